"""An Accelerate GeneralTracker: the main process logs accelerator.log() into one run.

    accelerator = Accelerator(log_with=LogdTracker(run_name="run-1"))
    accelerator.init_trackers("mnist", config={"lr": 0.1})     # the project, named once
    accelerator.log({"loss": loss}, step=step)
    accelerator.end_training()

Accelerate hands the project of ``init_trackers(project_name, ...)`` only to
the trackers it builds itself, not to a tracker object given in
``log_with``; so the first LogdTracker wraps ``Accelerator.init_trackers``
(once) to take the project from there, with ``init_kwargs={"logd": {...}}``
for logd.init(). The run starts in ``init_trackers``, or at the first log()
when that is never called. ``LogdTracker(project=...)`` wins over the
``init_trackers`` name.

Images go in as with Accelerate's own trackers, through the tracker object:
``accelerator.get_tracker("logd").log_images({"samples": [img, ...]}, step=step)``, each value a list of
images (HWC arrays, PIL images, CHW tensors, PNG/JPEG bytes) or a 4-D batch; the images of a key are logged at
one step, side by side. ``accelerator.log()`` also takes logd.Histogram, Image and Text values as they are.
"""
import functools
from typing import Optional

from accelerate.tracking import GeneralTracker, on_main_process

import logd

from . import image_list, log_images, numbers


class LogdTracker(GeneralTracker):
    name = "logd"
    requires_logging_directory = False
    main_process_only = True

    @on_main_process
    def __init__(self, run_name: Optional[str] = None, **init_kwargs):
        """init_kwargs go to logd.init() (group, tags, project, ...)."""
        super().__init__()
        self.run_name = run_name
        self._init_kwargs = init_kwargs
        self.run = None
        _take_project_from_init_trackers()

    def _start(self, project: Optional[str] = None, extra: Optional[dict] = None):
        if getattr(self, "run", None) is not None or not hasattr(self, "_init_kwargs"):
            return self.run if hasattr(self, "run") else None
        kwargs = dict(extra or {})
        kwargs.update(self._init_kwargs)
        if project and not kwargs.get("project"):
            kwargs["project"] = project
        self.run = logd.init(name=self.run_name, **kwargs)
        return self.run

    @property
    def tracker(self):
        return self._start()

    @on_main_process
    def store_init_configuration(self, values: dict):
        self._start().config.update(values)

    @on_main_process
    def log(self, values: dict, step: Optional[int] = None, **kwargs):
        self._start().log(numbers(values), step=step)

    @on_main_process
    def log_images(self, values: dict, step: Optional[int] = None, **kwargs):
        if kwargs:
            raise TypeError("LogdTracker.log_images takes the images and a step, not %s" % ", ".join(sorted(kwargs)))
        log_images(self._start(), {k: image_list(v) for k, v in values.items()}, step)

    @on_main_process
    def finish(self):
        if getattr(self, "run", None) is not None:
            self.run.finish()


def _take_project_from_init_trackers():
    """Wraps Accelerator.init_trackers once: LogdTrackers in log_with start their run with its project."""
    from accelerate import Accelerator

    original = Accelerator.init_trackers
    if getattr(original, "_logd_wrapped", False):
        return

    @functools.wraps(original)
    def init_trackers(self, project_name, config=None, init_kwargs=None, *args, **kwargs):
        extra = (init_kwargs or {}).get("logd") or {}
        for tracker in getattr(self, "log_with", None) or []:
            if isinstance(tracker, LogdTracker):
                tracker._start(project_name, extra)
        if init_kwargs is None:
            return original(self, project_name, config, *args, **kwargs)
        return original(self, project_name, config, init_kwargs, *args, **kwargs)

    init_trackers._logd_wrapped = True
    Accelerator.init_trackers = init_trackers
