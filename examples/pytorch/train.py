#!/usr/bin/env python3
"""A plain PyTorch training program, written the way people write them, that keeps ckptcheck's
drill contract (README: "Drill your own program"):

  CKPTCHECK_CKPT_DIR   where checkpoints go          CKPTCHECK_STEPS       train until this step
  CKPTCHECK_SAVE_EVERY save every K steps            CKPTCHECK_METRICS     JSON lines to append to
  CKPTCHECK_RESUME     checkpoint to resume from     CKPTCHECK_ROLE        for the logs only

Model: a small MLP regressor with dropout, AdamW, a warmup + cosine LambdaLR schedule, a dynamic
loss scaler with GradScaler's fields, and a shuffled synthetic data set read through a cursor. A
checkpoint is a directory of torch.save files (model.pt, optimizer.pt, scheduler.pt, scaler.pt,
rng.pt, data.pt) or, with --single-file, one step_N.pt holding the same dict.

Each step line also carries the contract's optional fields: `tokens` (the samples of the batch)
and, on the first step of every run, `peak_memory_bytes` of that full step including the optimizer
step (on CPU: VmHWM over the step, reset just before it, less VmRSS before the model was built; with
--device cuda: torch.cuda.reset_peak_memory_stats() before the step, torch.cuda.max_memory_allocated()
after it).

--device cuda trains on the GPU (CPU is the default); the checkpoint then also holds the CUDA RNG
state. GPU kernels need not be bit-exact between runs: drill it with --control.

--bug NAME introduces a classic resume bug on purpose (the drill must catch each one):
  forget-optimizer, forget-scheduler, forget-rng, forget-data-position, forget-scaler.
"""
import argparse
import shutil
import time
import json
import math
import os

import torch
import torch.nn as nn

BUGS = ("forget-optimizer", "forget-scheduler", "forget-rng", "forget-data-position", "forget-scaler")


class LossScaler:
    """Dynamic loss scaling with torch.cuda.amp.GradScaler's state; usable on CPU."""

    def __init__(self, init_scale=2.0**10, growth_factor=2.0, backoff_factor=0.5, growth_interval=3):
        self.scale, self.growth_factor, self.backoff_factor = init_scale, growth_factor, backoff_factor
        self.growth_interval, self.growth_tracker = growth_interval, 0

    def step(self, optimizer, params):
        grads = [p.grad for p in params if p.grad is not None]
        for g in grads:
            g.div_(self.scale)
        finite = all(torch.isfinite(g).all() for g in grads)
        if finite:
            optimizer.step()
            self.growth_tracker += 1
            if self.growth_tracker == self.growth_interval:
                self.scale *= self.growth_factor
                self.growth_tracker = 0
        else:
            self.scale *= self.backoff_factor
            self.growth_tracker = 0

    def state_dict(self):
        return {"scale": self.scale, "growth_factor": self.growth_factor, "backoff_factor": self.backoff_factor,
                "growth_interval": self.growth_interval, "_growth_tracker": self.growth_tracker}

    def load_state_dict(self, state):
        self.scale, self.growth_tracker = state["scale"], state["_growth_tracker"]


class Data:
    """A fixed synthetic data set, reshuffled each epoch from (seed, epoch); the cursor is state."""

    def __init__(self, n=512, dim=16, batch=32, seed=7):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, dim, generator=g)
        self.y = (self.x @ torch.randn(dim, 1, generator=g)).tanh() + 0.1 * torch.randn(n, 1, generator=g)
        self.batch, self.seed, self.epoch, self.cursor = batch, seed, 0, 0

    def next_batch(self):
        if self.cursor + self.batch > len(self.x):
            self.epoch, self.cursor = self.epoch + 1, 0
        order = torch.randperm(len(self.x), generator=torch.Generator().manual_seed(self.seed + self.epoch))
        idx = order[self.cursor:self.cursor + self.batch]
        self.cursor += self.batch
        return self.x[idx], self.y[idx]

    def state_dict(self):
        return {"epoch": self.epoch, "cursor": self.cursor}

    def load_state_dict(self, state):
        self.epoch, self.cursor = state["epoch"], state["cursor"]


def proc_status_bytes(field):
    """VmRSS or VmHWM of this process from /proc/self/status, in bytes; 0 where unavailable."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def reset_peak_rss():
    """Resets VmHWM to the current RSS (Linux: write 5 to clear_refs); False where not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def log(path, record):
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")


def save_file(obj, path):
    """torch.save, then fsync: the data is durable before anyone renames the file."""
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


def save(ckpt_dir, step, state, single_file):
    """Writes a temporary name, fsyncs it, renames it and fsyncs the directory: a checkpoint is whole
    or absent after a SIGKILL, and still there after a power loss (drill --faults power-loss)."""
    if single_file:
        final = os.path.join(ckpt_dir, "step_%d.pt" % step)
        tmp = final + ".tmp"
        save_file(state, tmp)
    else:
        final = os.path.join(ckpt_dir, "step_%d" % step)
        tmp = final + ".tmp"
        os.makedirs(tmp, exist_ok=True)
        for name, part in state.items():
            save_file(part, os.path.join(tmp, name + ".pt"))
        fsync_dir(tmp)  # the files' entries in the temporary directory
    os.replace(tmp, final)
    fsync_dir(ckpt_dir)  # the rename
    return final


def retain(ckpt_dir, keep):
    """Deletes all but the newest `keep` checkpoints (after the new one is durable)."""
    steps = sorted(int(n.split("_")[1].split(".")[0]) for n in os.listdir(ckpt_dir)
                   if n.startswith("step_") and not n.endswith(".tmp"))
    for old in steps[:-keep]:
        for name in ("step_%d" % old, "step_%d.pt" % old):
            path = os.path.join(ckpt_dir, name)
            if os.path.isdir(path):
                shutil.rmtree(path)
            elif os.path.exists(path):
                os.remove(path)


def rng_state(device):
    state = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def load(path):
    if os.path.isfile(path):
        return torch.load(path)
    return {name[:-3]: torch.load(os.path.join(path, name)) for name in os.listdir(path) if name.endswith(".pt")}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--single-file", action="store_true", help="one .pt per checkpoint")
    parser.add_argument("--bug", choices=BUGS, help="introduce a classic resume bug")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda[:N]")
    parser.add_argument("--keep-last", type=int, default=0,
                        help="retention, as long runs do: after each save delete all but the newest N checkpoints")
    parser.add_argument("--step-sleep", type=float, default=0.0,
                        help="seconds to sleep per step (a slower run, for drilling it while it trains)")
    args = parser.parse_args()
    ckpt_dir = os.environ["CKPTCHECK_CKPT_DIR"]
    steps = int(os.environ["CKPTCHECK_STEPS"])
    save_every = int(os.environ["CKPTCHECK_SAVE_EVERY"])
    metrics = os.environ["CKPTCHECK_METRICS"]
    resume = os.environ.get("CKPTCHECK_RESUME")
    os.makedirs(ckpt_dir, exist_ok=True)
    rss_before_model = proc_status_bytes("VmRSS")

    torch.set_num_threads(1)  # one thread: the same reduction order every run, so runs are bit-exact
    torch.manual_seed(1234)  # seeds the CUDA generators too
    device = torch.device(args.device)
    on_gpu = device.type == "cuda"
    model = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Dropout(0.1), nn.Linear(64, 1)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    warmup = 4
    schedule = lambda s: (s + 1) / warmup if s < warmup else 0.5 * (1 + math.cos(math.pi * min(1.0, s / 200)))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    scaler, data, step = LossScaler(), Data(), 0

    if resume:
        state = load(resume)
        model.load_state_dict(state["model"])
        if args.bug != "forget-optimizer":
            optimizer.load_state_dict(state["optimizer"])
        if args.bug != "forget-scheduler":
            scheduler.load_state_dict(state["scheduler"])
        if args.bug != "forget-scaler":
            scaler.load_state_dict(state["scaler"])
        if args.bug != "forget-rng":
            torch.set_rng_state(state["rng"]["cpu"])
            if on_gpu:
                torch.cuda.set_rng_state(state["rng"]["cuda"].cpu(), device)
        if args.bug != "forget-data-position":
            data.load_state_dict(state["data"])
        step = state["progress"]["step"]

    model.train()
    first_step = True
    while step < steps:
        if args.step_sleep > 0:
            time.sleep(args.step_sleep)
        if first_step:
            if on_gpu:
                torch.cuda.synchronize(device)
                torch.cuda.reset_peak_memory_stats(device)
            else:
                reset_peak_rss()
        x, y = data.next_batch()
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad(set_to_none=True)
        loss = nn.functional.mse_loss(model(x), y)
        (loss * scaler.scale).backward()
        lr = scheduler.get_last_lr()[0]
        scale = scaler.scale
        grad_norm = math.sqrt(sum(float((p.grad / scale).pow(2).sum()) for p in model.parameters()))
        scaler.step(optimizer, list(model.parameters()))
        scheduler.step()
        step += 1
        record = {"step": step, "loss": loss.item(), "lr": lr, "grad_norm": grad_norm, "loss_scale": scale,
                  "tokens": len(x)}
        if first_step:
            if on_gpu:
                torch.cuda.synchronize(device)
                record["peak_memory_bytes"] = torch.cuda.max_memory_allocated(device)
            else:
                record["peak_memory_bytes"] = max(0, proc_status_bytes("VmHWM") - rss_before_model)
            first_step = False
        log(metrics, record)
        if step % save_every == 0:
            state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                     "scheduler": scheduler.state_dict(), "scaler": scaler.state_dict(),
                     "rng": rng_state(device), "data": data.state_dict(),
                     "progress": {"step": step}}
            path = save(ckpt_dir, step, state, args.single_file)
            if args.keep_last > 0:
                retain(ckpt_dir, args.keep_last)
            log(metrics, {"event": "checkpoint", "step": step, "path": path})


if __name__ == "__main__":
    main()
