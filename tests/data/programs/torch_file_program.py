#!/usr/bin/env python3
"""A small PyTorch program on the drill contract whose checkpoint is ONE file per save, saved by
ckptcheck.torch.save (temp name, fsync, rename, the seal `<file>.ckptcheck.seal.json` renamed beside
it) and loaded by ckptcheck.torch.load (the seal and the pickles verified first), the documented
path; `--save torch` uses a bare torch.save/torch.load instead.

--bug forget-optimizer-save  saves the model and the step, not the optimizer (a fresh AdamW on resume)
--bug forget-optimizer-load  saves the optimizer but never loads it on resume
--bug ignore-resume          ignores CKPTCHECK_RESUME and starts over from step 0

--save-sleep S  waits S seconds inside every save, after the save created its first name (torch.save
                itself is made to wait first), so drill --faults power-loss-mid-save lands inside it

Needs the ckptcheck package on the path for --save ckptcheck (PYTHONPATH=build/python).
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn as nn


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--save", choices=["ckptcheck", "torch"], default="ckptcheck")
    ap.add_argument("--bug", default="none",
                    choices=["none", "forget-optimizer-save", "forget-optimizer-load", "ignore-resume"])
    ap.add_argument("--save-sleep", type=float, default=0)
    args = ap.parse_args()
    ckpt_dir, steps = os.environ["CKPTCHECK_CKPT_DIR"], int(os.environ["CKPTCHECK_STEPS"])
    every, metrics = int(os.environ["CKPTCHECK_SAVE_EVERY"]), os.environ["CKPTCHECK_METRICS"]
    resume = os.environ.get("CKPTCHECK_RESUME")
    os.makedirs(ckpt_dir, exist_ok=True)
    torch.set_num_threads(1)
    torch.manual_seed(7)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    step = 0

    if args.save_sleep:
        unhurried = torch.save

        def slow_save(*a, **k):
            time.sleep(args.save_sleep)
            return unhurried(*a, **k)

        torch.save = slow_save
    if args.save == "ckptcheck":
        import ckptcheck
        import ckptcheck.torch
        save, load = ckptcheck.torch.save, ckptcheck.torch.load
    else:
        save, load = (lambda obj, path: torch.save(obj, path)), torch.load

    if resume and args.bug != "ignore-resume":
        try:
            state = load(resume)
        except Exception as e:  # ckptcheck.VerifyError: the seal or the pickles refused it
            print("torch_file_program: refusing to resume: %s" % e, file=sys.stderr)
            sys.exit(2)
        model.load_state_dict(state["model"])
        if "optimizer" in state and args.bug != "forget-optimizer-load":
            optimizer.load_state_dict(state["optimizer"])
        step = state["step"]

    def log(rec):
        with open(metrics, "a") as f:
            f.write(json.dumps(rec) + "\n")

    while step < steps:
        g = torch.Generator().manual_seed(1000 + step)
        x = torch.randn(4, 8, generator=g)
        y = x.sum(dim=1, keepdim=True)
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        step += 1
        log({"step": step, "loss": loss.item()})
        if step % every == 0:
            path = os.path.join(ckpt_dir, "step_%d.pt" % step)
            state = {"model": model.state_dict(), "step": step}
            if args.bug != "forget-optimizer-save":
                state["optimizer"] = optimizer.state_dict()
            save(state, path)
            log({"event": "checkpoint", "step": step, "path": path})


if __name__ == "__main__":
    main()
