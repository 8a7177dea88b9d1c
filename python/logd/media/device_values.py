"""Values that are still being computed on a GPU when log() is called.

`run.log({"loss": loss})` with `loss` a one-element CUDA tensor used to call
.item() on the training thread: a device-to-host copy that waits for every
kernel queued before it. In a training loop that is the whole step (34 ms per
step on an H200 in test/gpu/train_cuda.py): logging stopped training each step.

Here log() instead queues an asynchronous copy of each such value into host
memory, right behind the kernels that make it, and records a CUDA event after
the copies. The row waits in a FIFO (`DeviceRows`) until its event has
completed; rows are handed to the writer in log() order, so a row without
device values that follows one with them waits behind it. The training thread
checks the head of the FIFO at each log() (event.query(), no wait) and hands on
every ready row; flush() and finish() wait for the rest (with their deadline).

What this means for the crash journal: a row enters the journal when it leaves
this FIFO, that is once the GPU has produced its values (usually within a step).
A process killed before then loses those rows; their GPU values never reached
the host. LOGD_DEVICE_VALUES=sync restores the old behaviour (.item() in log(),
the row journaled before log() returns), at the cost of a wait per log().

Only CUDA tensors take this path; CPU tensors, NumPy and Python numbers are read
at once, as before. A process that forked after CUDA started cannot use CUDA in
the child; the queue is dropped there (run._forked) like the rest of the
parent's writer state.
"""
import time
from collections import deque

# More rows than this waiting for the GPU: log() waits for the oldest (the GPU is that far behind; PyTorch's own
# launch queue stops the CPU long before, so this is a bound on memory, not a limit met in practice).
MAX_PENDING_ROWS = 4096


def is_device_scalar(v) -> bool:
    """A one-element real tensor on a CUDA device (checked without importing torch). A complex one takes log()'s own
    path, as before (float() of the tensor, the real part): read later, float() of its complex item would raise in
    whichever later log() hands its row on (seen on an H200: the real part is stored, nothing raises)."""
    return getattr(v, "is_cuda", False) is True and v.numel() == 1 and not v.is_complex()


def start_copy(index: int, v) -> tuple:
    """(index, host tensor, device): an asynchronous copy of a one-element CUDA tensor into (pinned) host memory,
    queued on the device's current stream behind the kernels that make the value."""
    return index, v.detach().reshape(()).to("cpu", non_blocking=True), v.device


def record_events(copies) -> tuple:
    """One CUDA event per device of a row's copies, recorded on that device's current stream after them: it
    completes when everything queued before it (the kernels that made the values, then the copies) has."""
    import torch

    events = []
    for device in {d for _, _, d in copies}:
        ev = torch.cuda.Event()
        ev.record(torch.cuda.current_stream(device))
        events.append(ev)
    return tuple(events)


class DeviceRows:
    """The FIFO of rows whose values are not on the host yet (see the module's text)."""

    __slots__ = ("rows",)

    def __init__(self):
        self.rows = deque()  # (step, time, keys, vals, [(index, host tensor)], (events...)): no events: ready

    def __bool__(self) -> bool:
        return bool(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def push(self, step, t, keys, vals, copies, events) -> None:
        self.rows.append((step, t, keys, vals, copies, events))

    def drain(self, add, deadline=None) -> int:
        """Hands every ready row at the head to add(step, time, keys, vals), in order. deadline None: only rows
        ready now (no wait); else waits (polling, so the wait has its deadline) until the FIFO is empty or the
        deadline passes. Returns how many rows are left."""
        rows = self.rows
        pause = 0.0002
        while rows:
            step, t, keys, vals, copies, events = rows[0]
            if events and not all(e.query() for e in events):
                if deadline is None and len(rows) <= MAX_PENDING_ROWS:
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    break
                time.sleep(pause)
                pause = min(pause * 2, 0.01)
                continue
            rows.popleft()
            for i, host, _ in copies:
                x = host.item()
                vals[i] = (1.0 if x else 0.0) if isinstance(x, bool) else float(x)
            add(step, t, keys, vals)
        return len(rows)

    def drop(self) -> int:
        """Forgets every row (a forked child: the parent's events are not this process's). Returns how many."""
        n = len(self.rows)
        self.rows.clear()
        return n
