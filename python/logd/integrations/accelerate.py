"""An Accelerate GeneralTracker: the main process logs accelerator.log() into one run.

    accelerator = Accelerator(log_with=LogdTracker(project="mnist", name="run-1"))
    accelerator.init_trackers("mnist", config={"lr": 0.1})
    accelerator.log({"loss": loss}, step=step)
    accelerator.end_training()
"""
from typing import Optional

from accelerate.tracking import GeneralTracker, on_main_process

import logd

from . import numbers


class LogdTracker(GeneralTracker):
    name = "logd"
    requires_logging_directory = False
    main_process_only = True

    @on_main_process
    def __init__(self, run_name: Optional[str] = None, **init_kwargs):
        """init_kwargs go to logd.init() (project, group, tags, ...)."""
        super().__init__()
        self.run_name = run_name
        self.run = logd.init(name=run_name, **init_kwargs)

    @property
    def tracker(self):
        return self.run

    @on_main_process
    def store_init_configuration(self, values: dict):
        self.run.config.update(values)

    @on_main_process
    def log(self, values: dict, step: Optional[int] = None, **kwargs):
        self.run.log(numbers(values), step=step)

    @on_main_process
    def finish(self):
        self.run.finish()
