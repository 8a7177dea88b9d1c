"""The torchrun (torch.distributed.elastic) environment of this process."""
import os

from ._pb import logd_pb2 as pb

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
