"""The torchrun (torch.distributed.elastic) environment of this process."""
from __future__ import annotations

import os

from ._ids import sha256
from ._lazy import pb

TORCHRUN_VARS = (
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK",
    "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT",
)


def _int(name: str) -> int:
    v = os.environ.get(name, "")
    return int(v) if v.isdigit() else -1


def rank_info() -> pb.RankInfo:
    node = os.environ.get("GROUP_RANK")
    node = node if node is not None else os.environ.get("NODE_RANK", "")
    return pb.RankInfo(
        rank=_int("RANK"), local_rank=_int("LOCAL_RANK"), world_size=_int("WORLD_SIZE"),
        node_rank=int(node) if node.isdigit() else -1, local_world_size=_int("LOCAL_WORLD_SIZE"),
    )


def torchrun_env() -> dict:
    """The torchrun variables that are set, as they are (numbers as ints); {} outside torchrun."""
    out = {}
    for k in TORCHRUN_VARS:
        v = os.environ.get(k)
        if v is not None:
            out[k] = int(v) if v.isdigit() else v
    return out


def restart_count() -> int:
    """How often torchrun restarted this worker group (--max-restarts); 0 on the first attempt."""
    return max(0, _int("TORCHELASTIC_RESTART_COUNT"))


def _agent_identity() -> str:
    """The torchrun agent (this worker's parent) as pid + start time: the same for every restart it makes."""
    ppid = os.getppid()
    try:
        with open("/proc/%d/stat" % ppid, "rb") as f:
            stat = f.read()
        return "%d.%s" % (ppid, stat[stat.rindex(b")") + 2:].split()[19].decode())
    except (OSError, ValueError, IndexError):
        return str(ppid)


def job_run_id(project: str, group: str, name: str):
    """A run id stable across the restarts of one torchrun job, per rank; None outside torchrun.

    Derived from TORCHELASTIC_RUN_ID (torchrun's --rdzv-id / --run-id, a fresh uuid with --standalone), the
    project, group, name and RANK: a job restarted by hand with the same --rdzv-id continues its runs too. When
    the job has no run id ("none", the default of a static rendezvous), the torchrun agent process (pid and start
    time) stands for the job, so two jobs never share a run. Pass id= to choose it yourself."""
    rank = os.environ.get("RANK", "")
    if not rank.isdigit():
        return None
    job = os.environ.get("TORCHELASTIC_RUN_ID", "")
    if job in ("", "none"):
        job = "agent:" + _agent_identity()
    digest = sha256("\0".join((job, project, group, name, rank)).encode()).hexdigest()
    return "tr" + digest[:18]
