#!/usr/bin/env python3
"""Run under torchrun (the seed's command shape): trains a tiny MLP two steps wrapped in DDP or FSDP2
(torch.distributed.fsdp.fully_shard) and saves model and optimizer with torch.distributed.checkpoint
(get_state_dict, dcp.save), as torch 2.x training loops do.

  torchrun --standalone --nproc-per-node=1 dcp_save.py ddp|fsdp2 OUT_DIR [--cpu]

NCCL on CUDA, Gloo with --cpu (or without a GPU)."""
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn as nn
from torch.distributed.checkpoint.state_dict import get_state_dict


def main():
    mode, out = sys.argv[1], sys.argv[2]
    use_cuda = torch.cuda.is_available() and "--cpu" not in sys.argv
    dist.init_process_group(backend="nccl" if use_cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device("cuda", local) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    torch.manual_seed(45)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8)).to(device)
    if mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(model, device_ids=[local] if use_cuda else None)
    elif mode == "fsdp2":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        mesh = init_device_mesh(device.type, (world,))
        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
    else:
        raise SystemExit(f"unknown mode {mode!r}: ddp or fsdp2")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(rank)
    for _ in range(2):
        x = torch.randn(4, 16, generator=g).to(device)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    model_sd, optim_sd = get_state_dict(model, opt)
    state = {"model": model_sd, "optim": optim_sd,
             "extra": {"step": 2, "rng": torch.get_rng_state(), "mode": mode}}
    dcp.save(state, checkpoint_id=out)
    if rank == 0:
        kinds = sorted({type(v).__name__ for v in model_sd.values()})
        print(f"{mode}: world {world}, {device.type}, saved {out} (model tensors: {kinds})")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
