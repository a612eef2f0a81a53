"""A gloo job that goes wrong on purpose, for `railyard triage` on PyTorch's Flight Recorder
dumps (python/tests/test_torch.py). After four good collectives, ``stuck``: rank 1 stops
calling while rank 0 enters an all-reduce; ``desync``: rank 0 calls an all-reduce of 16
floats, rank 1 an all-gather of 8. Two seconds later every rank writes its dump, as
torch's watchdog does when a collective times out (TORCH_FR_DUMP_TEMP_FILE + rank).

usage: torch_fr_job.py stuck|desync"""

import os
import sys
import threading
import time
from datetime import timedelta

import torch
import torch._C._distributed_c10d as c10d
import torch.distributed as dist

mode = sys.argv[1]
dist.init_process_group("gloo", timeout=timedelta(seconds=30))
rank = dist.get_rank()
for i in range(3):
    dist.all_reduce(torch.ones(4 + i))
dist.broadcast(torch.ones(2, dtype=torch.int64), 0)


def dump():
    c10d._dump_fr_trace_file(rank)
    print(f"rank {rank} dumped", flush=True)
    os._exit(0)


threading.Timer(2.0, dump).start()
if mode == "stuck":
    if rank == 1:
        time.sleep(30)
    dist.all_reduce(torch.ones(16))
elif rank == 0:
    dist.all_reduce(torch.ones(16))
else:
    dist.all_gather_into_tensor(torch.empty(16), torch.ones(8))
time.sleep(30)
