#!/usr/bin/env python3
"""A small DistributedDataParallel program (gloo, CPU) that keeps ckptcheck's drill contract on
several ranks; examples/pytorch/train.py is the single-process one. Run it with:

  ckptcheck drill --nproc-per-node 2 --save-at 4 --resume-steps 4 -- /usr/bin/python3 examples/pytorch/train_ddp.py
  ckptcheck launch --nproc-per-node 2 -- /usr/bin/python3 examples/pytorch/train_ddp.py
      (launch needs CKPTCHECK_CKPT_DIR, CKPTCHECK_STEPS, CKPTCHECK_SAVE_EVERY, CKPTCHECK_METRICS set)

Ranks come from torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), which
`ckptcheck launch` and torchrun both set; without WORLD_SIZE it runs as one process, world size 1.

Model: an MLP with dropout under DDP, AdamW, a warmup + cosine LambdaLR schedule. Data: a fixed
synthetic set, reshuffled each epoch by a torch.Generator seeded with seed + epoch (as
DistributedSampler does); each step takes the next global batch and each rank a strided slice of
it, so the data position (epoch, cursor) is the same on every rank and for every world size.
Per-rank randomness: dropout (torch's RNG, seeded SEED + rank) and input jitter (a torch.Generator
seeded JITTER_SEED + rank): restoring another rank's RNG changes the loss.

A checkpoint is a directory step_XXXXXXXX of torch.save files holding state_dicts and tensors only
(torch >= 2 reads them with weights_only=True): rank 0 writes model.pt, optimizer.pt, scheduler.pt
and trainer.pt (the step); every rank R writes rng-rank{R}.pt (its RNG states, the data position).
All ranks write into .tmp-step_XXXXXXXX and fsync their files; after a barrier rank 0 fsyncs the
directory, renames it, fsyncs the checkpoint dir and only then appends the checkpoint event, so a
checkpoint is whole or absent after a SIGKILL and still there after a power loss. Only rank 0
writes the metrics file; the loss it logs is the mean over all ranks.

Resuming with another world size: a rank with no rng-rank{R}.pt (the world grew) reseeds its RNGs
from (step, rank) and reads the data position from rng-rank0.pt; its random stream then differs
from an uninterrupted run's. The drill judges per-rank files by its control run at the new world
size, not by their names: rng-rank1.pt resumed on one rank is absent there as in the control run,
and one a grown world's new rank writes must be there with the control run's layout.

--bug NAME introduces a resume bug on purpose (the drill must catch each one):
  rank0-rng         every rank restores rank 0's RNG file
  forget-optimizer  the optimizer state is not loaded
"""
import argparse
import json
import math
import os
import shutil
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

BUGS = ("rank0-rng", "forget-optimizer")
SEED, JITTER_SEED = 1234, 4321


class Data:
    """A fixed synthetic data set; each step takes the next global batch, each rank every world-th
    sample of it. The cursor counts global samples, so it does not depend on the world size."""

    def __init__(self, n=240, dim=16, batch=48, seed=7):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, dim, generator=g)
        self.y = (self.x @ torch.randn(dim, 1, generator=g)).tanh() + 0.1 * torch.randn(n, 1, generator=g)
        self.batch, self.seed, self.epoch, self.cursor = batch, seed, 0, 0

    def next_batch(self, rank, world):
        if self.cursor + self.batch > len(self.x):
            self.epoch, self.cursor = self.epoch + 1, 0
        order = torch.randperm(len(self.x), generator=torch.Generator().manual_seed(self.seed + self.epoch))
        idx = order[self.cursor + rank:self.cursor + self.batch:world]
        self.cursor += self.batch
        return self.x[idx], self.y[idx]

    def state_dict(self):
        return {"epoch": self.epoch, "cursor": self.cursor}

    def load_state_dict(self, state):
        self.epoch, self.cursor = state["epoch"], state["cursor"]


def log(path, record):
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")


def save_file(obj, path):
    """torch.save, then fsync: the data is durable before the directory is renamed."""
    with open(path, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())


def fsync_dir(path):
    """Makes the directory's entries (creates, renames, deletes) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save(ckpt_dir, step, rank, shared, own):
    """Every rank writes into .tmp-step_X; once all have, rank 0 renames it to step_X."""
    final = os.path.join(ckpt_dir, "step_%08d" % step)
    tmp = os.path.join(ckpt_dir, ".tmp-step_%08d" % step)
    if rank == 0:
        shutil.rmtree(tmp, ignore_errors=True)  # left over by a save that was killed
        os.makedirs(tmp)
    dist.barrier()
    for name, part in shared.items():  # empty on every rank but 0
        save_file(part, os.path.join(tmp, name + ".pt"))
    save_file(own, os.path.join(tmp, "rng-rank%d.pt" % rank))
    dist.barrier()  # every rank's file is written and fsynced
    if rank == 0:
        fsync_dir(tmp)  # every rank's entry in the temporary directory
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        fsync_dir(ckpt_dir)  # the rename: durable before the checkpoint event
    return final


def load(path):
    # The files hold plain data only: torch >= 2 reads them with weights_only=True (1.13's
    # weights-only reader knows no floats).
    return torch.load(path, weights_only=int(torch.__version__.split(".")[0]) >= 2)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bug", choices=BUGS, help="introduce a resume bug")
    parser.add_argument("--lr", type=float, default=3e-3)
    args = parser.parse_args()
    ckpt_dir = os.environ["CKPTCHECK_CKPT_DIR"]
    steps = int(os.environ["CKPTCHECK_STEPS"])
    save_every = int(os.environ["CKPTCHECK_SAVE_EVERY"])
    metrics = os.environ["CKPTCHECK_METRICS"]
    resume = os.environ.get("CKPTCHECK_RESUME")

    if "WORLD_SIZE" in os.environ:
        dist.init_process_group("gloo")  # env://: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    else:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    rank, world = dist.get_rank(), dist.get_world_size()
    os.makedirs(ckpt_dir, exist_ok=True)

    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)  # one thread: the same reduction order every run, so runs are bit-exact
    torch.manual_seed(SEED)  # the same initial weights on every rank
    model = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Dropout(0.1), nn.Linear(64, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    warmup = 4
    schedule = lambda s: (s + 1) / warmup if s < warmup else 0.5 * (1 + math.cos(math.pi * min(1.0, s / 200)))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    data, step = Data(), 0
    torch.manual_seed(SEED + rank)  # dropout: a stream per rank
    jitter = torch.Generator().manual_seed(JITTER_SEED + rank)

    if resume:
        model.load_state_dict(load(os.path.join(resume, "model.pt")))
        if args.bug != "forget-optimizer":
            optimizer.load_state_dict(load(os.path.join(resume, "optimizer.pt")))
        scheduler.load_state_dict(load(os.path.join(resume, "scheduler.pt")))
        step = load(os.path.join(resume, "trainer.pt"))["step"]
        mine = os.path.join(resume, "rng-rank%d.pt" % (0 if args.bug == "rank0-rng" else rank))
        if os.path.exists(mine):
            rng = load(mine)
            torch.set_rng_state(rng["torch"])
            jitter.set_state(rng["jitter"])
        else:  # saved by a smaller world: this rank had no stream; start a new one, reproducibly
            rng = load(os.path.join(resume, "rng-rank0.pt"))
            torch.manual_seed(SEED + rank + 1000 * step)
            jitter.manual_seed(JITTER_SEED + rank + 1000 * step)
            print("rank %d: no rng-rank%d.pt in %s (world size changed): reseeded" % (rank, rank, resume),
                  file=sys.stderr)
        data.load_state_dict(rng["data"])
    # find_unused_parameters=True: DDP keeps its first bucket layout instead of rebuilding it after
    # step 1, so a resumed run reduces gradients in the same order as an uninterrupted one (with 3+
    # ranks the all-reduce's summation order depends on the layout). Its warning that no parameter was
    # unused is expected. DDP broadcasts rank 0's weights (identical here anyway).
    ddp = DistributedDataParallel(model, find_unused_parameters=True)

    ddp.train()
    while step < steps:
        x, y = data.next_batch(rank, world)
        x = x + 0.05 * torch.randn(x.shape, generator=jitter)
        optimizer.zero_grad(set_to_none=True)
        loss = nn.functional.mse_loss(ddp(x), y)
        loss.backward()  # DDP all-reduces the gradients: the mean over the ranks
        lr = scheduler.get_last_lr()[0]
        optimizer.step()
        scheduler.step()
        step += 1
        total = loss.detach().clone()
        dist.all_reduce(total)  # the sum over the ranks
        if rank == 0:
            log(metrics, {"step": step, "loss": total.item() / world, "lr": lr})
        if step % save_every == 0:
            shared = {} if rank else {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                                      "scheduler": scheduler.state_dict(), "trainer": {"step": step}}
            own = {"torch": torch.get_rng_state(), "jitter": jitter.get_state(), "data": data.state_dict()}
            path = save(ckpt_dir, step, rank, shared, own)
            if rank == 0:
                log(metrics, {"event": "checkpoint", "step": step, "path": path})
    # DDP goes before the process group. Left to interpreter exit, torch 1.13's Reducer drops the
    # last reference to the Gloo group while holding the GIL and joins a worker thread that is
    # waiting for the GIL: the rank never exits (seen: one rank spinning for 10 minutes).
    del ddp
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
