#!/usr/bin/env python3
"""train.py's model, optimizer, schedule, scaler and data, written on ckptcheck's Python package: the
drill contract through ckptcheck.contract.Run, checkpoints saved by ckptcheck.torch.save_dir (temp
directory, fsync, rename, sealed) and loaded by ckptcheck.torch.load, which verifies the seal and
the pickles before torch.load(weights_only=True) sees a byte. A damaged checkpoint (a flipped bit,
a truncated file, a file left from an older save) is refused instead of resumed from.

Needs the ckptcheck package on the path (PYTHONPATH=build/python in the tree, or the .deb).
"""
import math
import os
import sys

import torch
import torch.nn as nn

import ckptcheck
import ckptcheck.contract
import ckptcheck.torch
from train import Data, LossScaler  # the same workload as train.py, beside this file


def main():
    run = ckptcheck.contract.Run()
    os.makedirs(run.ckpt_dir, exist_ok=True)
    torch.set_num_threads(1)  # the same reduction order every run, so runs are bit-exact
    torch.manual_seed(1234)
    model = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Dropout(0.1), nn.Linear(64, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    schedule = lambda s: (s + 1) / 4 if s < 4 else 0.5 * (1 + math.cos(math.pi * min(1.0, s / 200)))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    scaler, data, step = LossScaler(), Data(), 0

    if run.resume:
        try:
            state = ckptcheck.torch.load(run.resume)
        except ckptcheck.Error as e:  # VerifyError names every finding; exit 2, nothing resumed
            print("train_contract: refusing to resume: %s" % e, file=sys.stderr)
            sys.exit(2)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        scaler.load_state_dict(state["scaler"])
        torch.set_rng_state(state["rng"]["cpu"])
        data.load_state_dict(state["data"])
        step = state["progress"]["step"]

    model.train()
    while step < run.steps:
        x, y = data.next_batch()
        optimizer.zero_grad(set_to_none=True)
        loss = nn.functional.mse_loss(model(x), y)
        (loss * scaler.scale).backward()
        lr = scheduler.get_last_lr()[0]
        scaler.step(optimizer, list(model.parameters()))
        scheduler.step()
        step += 1
        run.log(step, loss=loss.item(), lr=lr, loss_scale=scaler.scale, tokens=len(x))
        if run.should_save(step):
            parts = {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                     "scheduler": scheduler.state_dict(), "scaler": scaler.state_dict(),
                     "rng": {"cpu": torch.get_rng_state()}, "data": data.state_dict(), "progress": {"step": step}}
            run.checkpoint(step, ckptcheck.torch.save_dir(parts, os.path.join(run.ckpt_dir, "step_%d" % step)))


if __name__ == "__main__":
    main()
