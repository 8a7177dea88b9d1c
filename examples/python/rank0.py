"""Pattern "one process": every rank trains, only rank 0 creates a run and logs.

    .venv-python/bin/python -m torch.distributed.run \
        --nproc_per_node 4 --redirects 1 --tee 1 --log_dir /tmp/logd-torchrun examples/python/rank0.py

(after `make build python install`; `--redirects 1 --tee 1 --log_dir` only
because Debian's torch 1.13 torchrun on Python 3.11 does not start without
them.) The other ranks never contact logd.
The run records the torchrun environment in config["torchrun"].
"""
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
    data = TensorDataset(torch.randn(400, 10), torch.randint(0, 2, (400,)).float())
    sampler = DistributedSampler(data)
    loader = DataLoader(data, batch_size=10, sampler=sampler)
    model = DDP(SimpleModel(10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.BCELoss()

    run = logd.init(project="examples-python", name="rank0", config={"lr": 0.01, "batch_size": 10}) if rank == 0 else None
    step = 0
    for epoch in range(3):
        sampler.set_epoch(epoch)
        for x, y in loader:
            opt.zero_grad()
            loss = loss_fn(model(x).squeeze(1), y)
            loss.backward()
            opt.step()
            if run:
                run.log({"loss": loss.detach(), "epoch": epoch}, step=step)  # returns at once
            step += 1
    if run:
        run.summary.update({"final_loss": loss.item()})
        run.finish()
        print("stored: logd show %s" % run.id)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
