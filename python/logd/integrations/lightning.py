"""A Lightning Logger: rank zero logs log_metrics()/log_hyperparams() into one run.

    trainer = Trainer(logger=LogdLogger(project="mnist", group="exp-7"))
    self.logger.log_image("samples", [img_chw, img_hwc], step=self.global_step, caption=["a", "b"])
    self.logger.log_histogram("grad/fc", self.fc.weight.grad, step=self.global_step)

log_image() follows WandbLogger's convention (a list of images, keyword lists with one entry per image; here
only ``caption``): the images of a key are logged at one step, side by side. log_metrics() also takes
logd.Histogram, Image and Text values as they are.
"""
try:
    from lightning.pytorch.loggers.logger import Logger, rank_zero_experiment
    from lightning.pytorch.utilities import rank_zero_only
except ImportError:  # the older package name
    from pytorch_lightning.loggers.logger import Logger, rank_zero_experiment
    from pytorch_lightning.utilities import rank_zero_only

import logd

from . import image_list, log_images, numbers


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
    def log_image(self, key, images, step=None, **kwargs):
        """images: a list of anything logd.Image takes (CHW tensors, HWC uint8 arrays, PIL images, PNG/JPEG bytes,
        logd.Image), or a 4-D batch; caption=[...]: one per image."""
        images = image_list(images)
        unknown = sorted(set(kwargs) - {"caption"})
        if unknown:
            raise TypeError("LogdLogger.log_image takes caption=[...] besides the images, not %s" % ", ".join(unknown))
        captions = kwargs.get("caption")
        if captions is not None and len(captions) != len(images):
            raise ValueError("LogdLogger.log_image: %d image(s) but %d caption(s)" % (len(images), len(captions)))
        log_images(self.experiment, {key: images}, step, None if captions is None else {key: list(captions)})

    @rank_zero_only
    def log_histogram(self, key, values, step=None, bins=64, range=None):
        """values: a tensor (binned on its device), a NumPy array or a list; see logd.Histogram."""
        self.experiment.log({key: logd.Histogram(values, bins=bins, range=range)}, step=step)

    @rank_zero_only
    def finalize(self, status):
        if self._run is not None:
            self._run.finish(exit_code=0 if status == "success" else 1)
            self._run = None
