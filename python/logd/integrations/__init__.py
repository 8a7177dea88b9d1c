"""Hooks for training frameworks, each a few lines over logd.init()/log()/finish().
Imported on demand, so logd itself needs none of these frameworks:

    from logd.integrations.transformers import LogdCallback   # Trainer(callbacks=[LogdCallback(project=...)])
    from logd.integrations.accelerate import LogdTracker      # Accelerator(log_with=LogdTracker(...))
    from logd.integrations.lightning import LogdLogger        # Trainer(logger=LogdLogger(project=...))
"""
from typing import Dict, List, Optional

from ..media import Image


def numbers(values: dict) -> dict:
    """The entries of a framework's metrics dict that a run's log() takes: numbers, and logd.Histogram, Image and
    Text values as they are; strings (which history cannot hold) and containers are left out."""
    return {k: v for k, v in values.items() if v is not None and not isinstance(v, (str, bytes, list, tuple, dict))}


def image_list(images) -> list:
    """The images of one key, as the frameworks pass them: a list or tuple; a 4-D batch (NumPy N x H x W x C,
    torch N x C x H x W), split along its first axis; or a single image (anything logd.Image takes)."""
    if isinstance(images, (list, tuple)):
        return list(images)
    mod = type(images).__module__ or ""
    if (mod.startswith("numpy") or mod.startswith("torch")) and getattr(images, "ndim", None) == 4:
        return list(images)
    return [images]


def as_image(x, caption: Optional[str] = None) -> Image:
    if isinstance(x, Image):
        return x if caption is None else Image(x.data, caption=caption)
    return Image(x, caption=caption)


def log_images(run, images: Dict[str, list], step: Optional[int], captions: Optional[Dict[str, List[str]]] = None) -> None:
    """Logs several images under each key, all at one step: the dashboard shows the images of a key at a step side
    by side. Every image is made (and checked) before any is logged, so a bad one logs none. Each log() takes the
    i-th image of every key; a key's images share its step with the others, the run's next step when none is
    given."""
    captions = captions or {}
    made = {}
    for k, v in images.items():
        cs = captions.get(k) or [None] * len(v)
        made[k] = [as_image(x, c) for x, c in zip(v, cs)]
    if step is None:
        # One step for all of them, the one log(step=None) would take (a DisabledRun counts none).
        step = getattr(run, "_next_step", 0)
    for i in range(max((len(v) for v in made.values()), default=0)):
        run.log({k: v[i] for k, v in made.items() if i < len(v)}, step=step)
