"""A transformers TrainerCallback: the main process logs the Trainer's logs into one run.

    args = TrainingArguments(output_dir="out", run_name="bert-lr5e-5", report_to="none", ...)
    trainer = Trainer(..., args=args, callbacks=[LogdCallback(project="mnist", group="exp-7")])

The run is named by ``TrainingArguments.run_name`` (transformers sets it to
``output_dir`` when left unset); ``LogdCallback(name=...)`` overrides it.
``report_to`` picks transformers' own integrations (wandb, tensorboard, ...);
logd is not one of them: it is added through ``callbacks`` and logs whatever
``report_to`` says. ``report_to="none"`` keeps the others out.

The Trainer's logs are numbers; histograms and images go through the callback's run on the main process:
``cb.run.log({"grad/fc": logd.Histogram(p.grad)}, step=state.global_step)`` (``cb.run`` is None elsewhere).
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
            kwargs = dict(self._init_kwargs)
            config = dict(kwargs.pop("config", None) or {})
            config.setdefault("trainer", args.to_sanitized_dict())
            if not kwargs.get("name") and getattr(args, "run_name", None):
                kwargs["name"] = args.run_name
            self.run = logd.init(config=config, **kwargs)

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
