"""mode="disabled" (or LOGD_MODE=disabled): every call is a no-op, nothing is contacted."""
from . import _ids


class _Dict(dict):
    pass


class DisabledRun:
    def __init__(self, project="", name="", group="", config=None):
        self.id = "disabled-" + _ids.token_hex(4)
        self.project = project or "default"
        self.name = name
        self.group = group
        self.is_owner = True
        self.config = _Dict(config or {})
        self.summary = _Dict()
        self.problem = None

    def log(self, data, step=None, commit=None):
        pass

    def watch(self, model, group=None):
        return None  # nothing is timed: DDP keeps its own default all-reduce

    def handle(self):
        raise RuntimeError("logd: a disabled run has no handle (LOGD_MODE=disabled or mode='disabled')")

    def flush(self, timeout=10.0):
        return True

    def alert(self, title, text="", level="info", timeout=5.0):
        return False

    def finish(self, exit_code=None, timeout=None):
        from .finish_result import FinishResult

        return FinishResult("finished", "", False)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
