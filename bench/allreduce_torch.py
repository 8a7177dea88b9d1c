"""torch.distributed (gloo) side of bench/allreduce.ts: same sizes, same loop.

One process per rank with MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE set; argv:
SIZES_BYTES_COMMA_SEPARATED TOTAL_BYTES_PER_SIZE. Rank 0 prints one JSON line
per size: {"bytes": B, "iters": K, "seconds": per-op seconds}.
"""
import json
import os
import sys
import time

import torch
import torch.distributed as dist


def main():
    sizes = [int(s) for s in sys.argv[1].split(",")]
    budget = int(sys.argv[2])
    dist.init_process_group("gloo", init_method="env://")
    rank = dist.get_rank()
    for nbytes in sizes:
        t = torch.ones(nbytes // 4, dtype=torch.float32)
        iters = max(5, min(200, budget // nbytes))
        for _ in range(20):  # same warm-up as bench/allreduce.ts
            dist.all_reduce(t)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(t)
        seconds = (time.perf_counter() - t0) / iters
        if rank == 0:
            print(json.dumps({"bytes": nbytes, "iters": iters, "seconds": seconds}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
