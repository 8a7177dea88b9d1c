"""A transformers TrainerCallback: the main process logs the Trainer's logs into one run.

    trainer = Trainer(..., callbacks=[LogdCallback(project="mnist", group="exp-7")])
"""
from transformers import TrainerCallback

import logd

from . import numbers


class LogdCallback(TrainerCallback):
    def __init__(self, **init_kwargs):
        """init_kwargs go to logd.init() (project, name, group, tags, ...)."""
        self._init_kwargs = init_kwargs
        self.run = None

    def _setup(self, args, state):
        if self.run is None and state.is_world_process_zero:
            config = dict(self._init_kwargs.pop("config", None) or {})
            config.setdefault("trainer", args.to_sanitized_dict())
            self.run = logd.init(config=config, **self._init_kwargs)

    def on_train_begin(self, args, state, control, **kwargs):
        self._setup(args, state)

    def on_log(self, args, state, control, logs=None, **kwargs):
        self._setup(args, state)
        if self.run is not None and logs:
            self.run.log(numbers(logs), step=state.global_step)

    def on_train_end(self, args, state, control, **kwargs):
        if self.run is not None:
            self.run.summary.update({"global_step": state.global_step})
            self.run.finish()
            self.run = None
