"""One rank of a small training run (python/tests/test_torch.py): an MLP trained for
STEPS steps with DistributedDataParallel (``ddp``) or FSDP2's ``fully_shard`` (``fsdp``)
on the backend named in argv, each rank on its own batches; every rank's loss per step
goes to OUT.rank<R>.json, for the test to compare between backends.

usage: torch_train.py BACKEND ddp|fsdp STEPS OUT"""

import json
import sys

import torch
import torch.distributed as dist

backend, wrapper, steps, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
dist.init_process_group(backend=backend)
rank, size = dist.get_rank(), dist.get_world_size()

torch.manual_seed(0)  # the same initial weights on every rank and for both backends
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))
if wrapper == "ddp":
    # A small bucket so the gradients go out as several all-reduces, as in real runs.
    model = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.01)
else:
    from torch.distributed.fsdp import fully_shard

    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(model)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
data = torch.Generator().manual_seed(100 + rank)
losses = []
for step in range(steps):
    x = torch.randn(16, 32, generator=data)
    y = x[:, :4].sum(dim=1, keepdim=True).sin()
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
with open(f"{out}.rank{rank}.json", "w") as f:
    json.dump(losses, f)
dist.destroy_process_group()
