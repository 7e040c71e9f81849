#!/usr/bin/env python3
"""A training program (no torch: it starts in milliseconds) that keeps the drill contract, or
breaks it the way newcomers do, one mistake at a time (--mistake):

  none               keeps the contract
  no-event           saves, but never logs a checkpoint event
  no-save            never saves
  loss-name          logs {"step": s, "train_loss": x}: no "loss"
  event-before-save  logs the checkpoint event before it saves (give --save-sleep: a slow save)
  relative-path      logs the checkpoint's path relative to CKPTCHECK_CKPT_DIR ("step_4")
  forget-rng         resumes without restoring its random state (a resume bug)
  keep-leftovers     creates step_N.tmp without removing one a killed save left (os.makedirs without
                     exist_ok): a relaunch in the killed run's own dir fails (drill --relaunch-dir same)

--stop-at S stops at step S whatever CKPTCHECK_STEPS says; --save-sleep waits inside every save
(between creating step_N.tmp and renaming it to step_N); --hidden-saves saves into
CKPTCHECK_CKPT_DIR/saves/ (made at start, so no save creates anything directly in the checkpoint
dir) and writes CKPTCHECK_CKPT_DIR/latest after each checkpoint event, then waits --step-sleep.
A checkpoint is a directory:
model.safetensors, optimizer.safetensors, rng.safetensors and progress.json, written into
step_N.tmp and renamed. Its random state is 32 bytes (a SHA-256 chain), saved as a U8 tensor.
"""
import argparse
import array
import hashlib
import json
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measured_program import read_safetensors, write_safetensors  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mistake", default="none")
    p.add_argument("--stop-at", type=int, default=0)
    p.add_argument("--save-sleep", type=float, default=0)
    p.add_argument("--step-sleep", type=float, default=0)
    p.add_argument("--hidden-saves", action="store_true")
    p.add_argument("--params", type=int, default=16)
    args = p.parse_args()
    ckpt_dir, metrics = os.environ["CKPTCHECK_CKPT_DIR"], os.environ["CKPTCHECK_METRICS"]
    steps, every = int(os.environ["CKPTCHECK_STEPS"]), int(os.environ["CKPTCHECK_SAVE_EVERY"])
    if args.stop_at:
        steps = min(steps, args.stop_at)
    resume = os.environ.get("CKPTCHECK_RESUME")

    rng = hashlib.sha256(b"seed 7").digest()
    w = array.array("f", [0.01 * i for i in range(args.params)])
    m = array.array("f", [0.0] * args.params)
    step = 0
    if resume:
        w = read_safetensors(os.path.join(resume, "model.safetensors"))["w"]
        m = read_safetensors(os.path.join(resume, "optimizer.safetensors"))["exp_avg"]
        if args.mistake != "forget-rng":
            rng = read_safetensors(os.path.join(resume, "rng.safetensors"))["state"].tobytes()
        with open(os.path.join(resume, "progress.json")) as f:
            step = json.load(f)["step"]

    save_dir = os.path.join(ckpt_dir, "saves") if args.hidden_saves else ckpt_dir
    os.makedirs(save_dir, exist_ok=True)
    log = open(metrics, "a")
    while step < steps:
        rng = hashlib.sha256(rng).digest()
        noise = rng[0] / 256.0
        for i in range(args.params):
            m[i] = 0.9 * m[i] + 0.1 * (w[i] - 0.5 + 0.01 * noise)
            w[i] = w[i] - 0.1 * m[i]
        step += 1
        loss = float(sum(x * x for x in w))
        log.write(json.dumps({"step": step, ("train_loss" if args.mistake == "loss-name" else "loss"): loss}) + "\n")
        log.flush()
        if step % every != 0 or args.mistake == "no-save":
            continue
        final = os.path.join(save_dir, "step_%d" % step)
        announced = "step_%d" % step if args.mistake == "relative-path" else final
        event = json.dumps({"event": "checkpoint", "step": step, "path": announced}) + "\n"
        if args.mistake == "event-before-save":
            log.write(event)
            log.flush()
        tmp = final + ".tmp"
        if args.mistake != "keep-leftovers":
            shutil.rmtree(tmp, ignore_errors=True)  # left by a save that was killed (a relaunch finds it)
        os.makedirs(tmp)
        write_safetensors(os.path.join(tmp, "model.safetensors"), {"w": w})
        write_safetensors(os.path.join(tmp, "optimizer.safetensors"), {"exp_avg": m})
        write_safetensors(os.path.join(tmp, "rng.safetensors"), {"state": array.array("B", rng)})
        with open(os.path.join(tmp, "progress.json"), "w") as f:
            json.dump({"step": step}, f)
        time.sleep(args.save_sleep)
        os.replace(tmp, final)
        if args.mistake not in ("event-before-save", "no-event"):
            log.write(event)
            log.flush()
        if args.hidden_saves:
            with open(os.path.join(ckpt_dir, "latest.tmp"), "w") as f:
                f.write("step_%d\n" % step)
            os.replace(os.path.join(ckpt_dir, "latest.tmp"), os.path.join(ckpt_dir, "latest"))
            time.sleep(args.step_sleep)


if __name__ == "__main__":
    main()
