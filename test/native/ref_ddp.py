"""PyTorch DDP reference for examples/ddp/train.ts (the SimpleModel of the DP/DDP note).

Run one process per rank with plain env vars (no torchrun):
  MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 RANK=r WORLD_SIZE=n /usr/bin/python3 ref_ddp.py OUT_DIR [SEED]
Rank 0 writes OUT_DIR/initial.json (X, Y, weight, bias before training),
OUT_DIR/indices.json (indices[epoch][rank], what DistributedSampler yielded)
and OUT_DIR/final.json (weight, bias after training).
"""
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.optim as optim
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

N_SAMPLE, N_DIM, BATCH, EPOCHS, LR = 100, 10, 10, 10, 0.01


class SimpleDataset(Dataset):
    def __init__(self, data, target):
        self.data, self.target = data, target

    def __len__(self):
        return len(self.data)

    def __getitem__(self, idx):
        return self.data[idx], self.target[idx]


class SimpleModel(nn.Module):
    def __init__(self, input_dim):
        super().__init__()
        self.fc = nn.Linear(input_dim, 1)

    def forward(self, x):
        return torch.sigmoid(self.fc(x))


def main():
    out_dir = sys.argv[1]
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.manual_seed(seed)  # same data and initial weights on every rank
    X = torch.randn(N_SAMPLE, N_DIM)
    Y = torch.randint(0, 2, (N_SAMPLE,)).float()
    model = SimpleModel(N_DIM)
    initial = {
        "X": X.tolist(), "Y": Y.tolist(),
        "weight": model.fc.weight.detach().flatten().tolist(), "bias": model.fc.bias.detach().tolist()[0],
    }
    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world)
    ddp = DDP(model)
    dataset = SimpleDataset(X, Y)
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=seed)
    loader = DataLoader(dataset, batch_size=BATCH, sampler=sampler)
    optimizer = optim.SGD(ddp.parameters(), lr=LR)
    criterion = nn.BCELoss()
    indices = []
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        mine = list(iter(sampler))
        gathered = [None] * world
        dist.all_gather_object(gathered, mine)
        indices.append(gathered)
        for inputs, targets in loader:
            loss = criterion(ddp(inputs), targets.unsqueeze(1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    if rank == 0:
        os.makedirs(out_dir, exist_ok=True)
        with open(os.path.join(out_dir, "initial.json"), "w") as f:
            json.dump(initial, f)
        with open(os.path.join(out_dir, "indices.json"), "w") as f:
            json.dump(indices, f)
        with open(os.path.join(out_dir, "final.json"), "w") as f:
            json.dump({"weight": model.fc.weight.detach().flatten().tolist(), "bias": model.fc.bias.detach().tolist()[0]}, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
