"""Hooks for training frameworks, each a few lines over logd.init()/log()/finish().
Imported on demand, so logd itself needs none of these frameworks:

    from logd.integrations.transformers import LogdCallback   # Trainer(callbacks=[LogdCallback(project=...)])
    from logd.integrations.accelerate import LogdTracker      # Accelerator(log_with=LogdTracker(...))
    from logd.integrations.lightning import LogdLogger        # Trainer(logger=LogdLogger(project=...))
"""


def numbers(values: dict) -> dict:
    """The entries of a framework's metrics dict that history can hold (numbers; not strings)."""
    return {k: v for k, v in values.items() if v is not None and not isinstance(v, (str, bytes, list, tuple, dict))}
