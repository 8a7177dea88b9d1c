"""One torchrun worker of test/gpu/run.sh: DDP over NCCL on the GPU, every rank logging its own run in one group.

    python3 -m torch.distributed.run --nproc_per_node 1 test/gpu/ddp_nccl.py
"""
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import logd


def main():
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    model = DDP(nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 1)).to(dev), device_ids=[local])
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    run = logd.init(project="gpu-check", name="ddp-nccl-rank%d" % rank, group="gpu-check-ddp-nccl")
    run.watch(model)  # arrival and wait at NCCL's gradient all-reduce, as logd/ddp/* metrics
    print("RUN %s" % run.id, flush=True)
    for step in range(200):
        x = torch.randn(64, 256, device=dev)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        row = {"loss": loss.detach()}  # a CUDA tensor: log() does not wait for it
        if step % 50 == 0:
            row["grad/fc0"] = logd.Histogram(model.module[0].weight.grad)
        run.log(row, step=step)
    t = torch.ones(1, device=dev) * (rank + 1)
    dist.all_reduce(t)
    run.summary.update({"allreduce": t.item(), "backend": dist.get_backend()})
    res = run.finish()
    print("FINISHED %s %r" % (run.id, res), flush=True)
    if res.state != "finished":
        sys.exit("ddp_nccl.py: the run ended %s" % res.state)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
