"""run.watch(ddp_model): where each rank's time goes around DDP's gradient all-reduce.

In synchronous DDP every rank steps at the same rate: the all-reduce waits for the slowest rank, so step times
and log times come out equal on every rank, and a rank that computes slower cannot be told from its steps. It
shows in *where* the time goes. This registers a DDP communication hook that does what DDP's default hook does
(average the bucket over the group with one all-reduce) and times, on this rank, per iteration:

- `logd/ddp/arrival`: the wall-clock time (seconds since the epoch) at which this rank's last gradient bucket was
  ready: its arrival at the collective. Across the ranks of a node (one clock), the latest arrival is the rank the
  others waited for;
- `logd/ddp/wait_ms`: from that arrival until the last bucket's all-reduce completed here: how long this rank
  waited for the others, plus the transfer itself. A straggler waits least; the ranks that wait for it, most;
- `logd/ddp/backward_ms`: from the first bucket ready to the last one (this rank's share of backward that
  overlaps communication);
- `logd/ddp/buckets`: the buckets of the iteration.

They ride in the training loop's own rows: the next run.log() after an iteration's all-reduce completed carries
that iteration's figures beside the loop's metrics (charted, exported and uploaded like any other), at the loop's
step. No row and no step of their own; a loop that logs every N steps gets every N-th iteration's figures. A name
the loop logs itself is left to the loop.

Opt-in, one call before the first backward: `run.watch(ddp_model)`. A model that already has a comm hook keeps
it (DDP allows one): watch() raises, saying so. Costs per bucket: two clock reads and a Future callback.
"""
import threading
import time


class _Iteration:
    __slots__ = ("first_ready", "last_ready", "last_ready_wall", "done", "buckets")

    def __init__(self):
        self.first_ready = None
        self.last_ready = 0.0
        self.last_ready_wall = 0.0
        self.done = 0.0
        self.buckets = 0


class DDPWatch:
    def __init__(self, run, model, group=None):
        import torch.distributed as dist

        self._run = run
        self._dist = dist
        self._group = group
        self._lock = threading.Lock()  # the hook's callbacks run on the backend's threads
        self._it = _Iteration()
        self._pending = None  # the last complete iteration's figures, until run.log() takes them (merge())

    def hook(self, state, bucket):
        dist = self._dist
        t = time.perf_counter()
        wall = time.time()
        with self._lock:
            it = self._it
            if it.first_ready is None:
                it.first_ready = t
            it.last_ready = t
            it.last_ready_wall = wall
            it.buckets += 1
        tensor = bucket.buffer()
        tensor.div_(dist.get_world_size(self._group))
        fut = dist.all_reduce(tensor, group=self._group, async_op=True).get_future()
        last = bucket.is_last()

        def done(f):
            if last:
                self._finish_iteration(time.perf_counter())
            return f.value()[0]

        return fut.then(done)

    def _finish_iteration(self, t_done: float) -> None:
        with self._lock:
            it = self._it
            self._it = _Iteration()
            if it.first_ready is None:
                return
            self._pending = {
                "logd/ddp/arrival": it.last_ready_wall,
                "logd/ddp/wait_ms": (t_done - it.last_ready) * 1000.0,
                "logd/ddp/backward_ms": (it.last_ready - it.first_ready) * 1000.0,
                "logd/ddp/buckets": it.buckets,
            }

    def merge(self, keys, vals):
        """(keys, vals) of a row with the last complete iteration's figures added (new lists: the row's own may be
        shared); the training thread, from run.log(), only when figures are pending."""
        with self._lock:
            m, self._pending = self._pending, None
        if not m:
            return keys, vals
        keys, vals = list(keys), list(vals)
        have = set(keys)
        for k, v in m.items():
            if k not in have:
                keys.append(k)
                vals.append(float(v))
        return keys, vals

    @property
    def pending(self) -> bool:
        return self._pending is not None


def watch(run, model, group=None) -> DDPWatch:
    from torch.nn.parallel import DistributedDataParallel

    if not isinstance(model, DistributedDataParallel):
        raise TypeError("logd: run.watch() takes a torch.nn.parallel.DistributedDataParallel model, not %s"
                        % type(model).__name__)
    w = DDPWatch(run, model, group if group is not None else getattr(model, "process_group", None))
    try:
        model.register_comm_hook(None, w.hook)
    except RuntimeError as e:
        raise RuntimeError("logd: run.watch() could not register its DDP communication hook (%s); DDP takes one hook "
                           "per model, registered before the first backward" % str(e).split("\n")[0]) from None
    return w
