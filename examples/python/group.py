"""Pattern "many processes": every rank logs a run of its own, all in one group.

    .venv-python/bin/python -m torch.distributed.run \
        --nproc_per_node 4 --redirects 1 --tee 1 --log_dir /tmp/logd-torchrun examples/python/group.py

Then `logd runs --group <the group printed>` lists the four
runs. Rank 0 names the group and broadcasts it, so every rank of one launch
agrees on it (torchrun's TORCHELASTIC_RUN_ID is "none" without a rendezvous
id). A restarted worker (--max_restarts) logs into a new run named
"<name>-attempt-<n>".
"""
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import logd


class SimpleModel(nn.Module):
    def __init__(self, input_dim):
        super().__init__()
        self.fc = nn.Linear(input_dim, 1)

    def forward(self, x):
        return torch.sigmoid(self.fc(x))


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    name = ["ddp-" + time.strftime("%Y%m%d-%H%M%S")]
    dist.broadcast_object_list(name, src=0)
    group = name[0]
    data = TensorDataset(torch.randn(400, 10), torch.randint(0, 2, (400,)).float())
    sampler = DistributedSampler(data)
    loader = DataLoader(data, batch_size=10, sampler=sampler)
    model = DDP(SimpleModel(10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.BCELoss()

    # `with`: finished on leaving, crashed if training raises.
    with logd.init(project="examples-python", group=group, name="rank%d" % rank, job_type="train", config={"lr": 0.01}) as run:
        step = 0
        for epoch in range(3):
            sampler.set_epoch(epoch)
            for x, y in loader:
                opt.zero_grad()
                loss = loss_fn(model(x).squeeze(1), y)
                loss.backward()
                opt.step()
                run.log({"loss": loss.detach(), "grad": {"norm": model.module.fc.weight.grad.norm()}}, step=step)
                step += 1
    if rank == 0:
        print("stored: logd runs --group %s" % group)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
