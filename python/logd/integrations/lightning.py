"""A Lightning Logger: rank zero logs log_metrics()/log_hyperparams() into one run.

    trainer = Trainer(logger=LogdLogger(project="mnist", group="exp-7"))
"""
try:
    from lightning.pytorch.loggers.logger import Logger, rank_zero_experiment
    from lightning.pytorch.utilities import rank_zero_only
except ImportError:  # the older package name
    from pytorch_lightning.loggers.logger import Logger, rank_zero_experiment
    from pytorch_lightning.utilities import rank_zero_only

import logd

from . import numbers


class LogdLogger(Logger):
    def __init__(self, **init_kwargs):
        """init_kwargs go to logd.init() (project, name, group, tags, ...)."""
        super().__init__()
        self._init_kwargs = init_kwargs
        self._run = None

    @property
    def name(self):
        return self._init_kwargs.get("project") or "logd"

    @property
    def version(self):
        return self._run.id if self._run is not None else ""

    @property
    @rank_zero_experiment
    def experiment(self):
        if self._run is None:
            self._run = logd.init(**self._init_kwargs)
        return self._run

    @rank_zero_only
    def log_hyperparams(self, params, *args, **kwargs):
        self.experiment.config.update(dict(vars(params) if hasattr(params, "__dict__") and not isinstance(params, dict) else params))

    @rank_zero_only
    def log_metrics(self, metrics, step=None):
        self.experiment.log(numbers(metrics), step=step)

    @rank_zero_only
    def finalize(self, status):
        if self._run is not None:
            self._run.finish(exit_code=0 if status == "success" else 1)
            self._run = None
