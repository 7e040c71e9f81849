#!/usr/bin/env python3
"""A training program (no torch: it starts in milliseconds) on the drill contract that saves with
one save protocol or another, for the drill's storage faults (docs/drill.md, "Storage faults"):

  --protocol final         writes step_N.ckpt in place, no fsync (what torch.save(state, final) does)
  --protocol rename        writes step_N.ckpt.tmp, renames it, no fsync
  --protocol fsync-rename  writes the temp name, fsyncs it, renames it: no fsync of the directory
  --protocol durable       temp name, fsync, rename, fsync of the directory: survives a power loss
  --protocol in-place      overwrites latest.ckpt (fsynced) every save: one checkpoint, ever

--keep-last K deletes all but the newest K checkpoints after each save (retention);
--on-read-error exit|fresh|fallback: what a relaunch does when its checkpoint cannot be read
(raise, start from scratch, or take the newest older checkpoint it can read);
--swallow-save-errors: a save that fails is logged to stderr, and announced anyway;
--save-sleep S waits inside every save, once its first file is created (a slow save, for
power-loss-mid-save); --event-sleep S waits after every checkpoint event (room for the kill); --buffered-log never
flushes the metrics file (its lines reach it at exit: what the contract forbids).
A checkpoint is one safetensors file: w and m (float32), the random state (32 bytes, a SHA-256
chain) and the step (float32).
"""
import argparse
import array
import hashlib
import json
import os
import struct
import sys
import time

DTYPES = {"f": "F32", "B": "U8"}


def encode(tensors):
    header, offset, payload = {}, 0, b""
    for name, values in tensors.items():
        data = values.tobytes()
        header[name] = {"dtype": DTYPES[values.typecode], "shape": [len(values)],
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        payload += data
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + payload


def decode(blob):
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    out = {}
    for name, info in header.items():
        start, end = info["data_offsets"]
        if end + 8 + n > len(blob):
            raise ValueError("checkpoint truncated")
        values = array.array({v: k for k, v in DTYPES.items()}[info["dtype"]])
        values.frombytes(blob[8 + n + start:8 + n + end])
        out[name] = values
    return out


def write_file(path, blob, fsync, sleep=0.0):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        if sleep:
            time.sleep(sleep)
        view = memoryview(blob)
        while view:
            view = view[os.write(fd, view):]
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save(args, ckpt_dir, step, blob):
    if args.protocol == "in-place":
        final = os.path.join(ckpt_dir, "latest.ckpt")
        write_file(final, blob, True, args.save_sleep)
        return final
    final = os.path.join(ckpt_dir, "step_%d.ckpt" % step)
    if args.protocol == "final":
        write_file(final, blob, False, args.save_sleep)
        return final
    tmp = final + ".tmp"
    write_file(tmp, blob, args.protocol in ("fsync-rename", "durable"), args.save_sleep)
    os.replace(tmp, final)
    if args.protocol == "durable":
        fsync_dir(ckpt_dir)
    return final


def checkpoints(ckpt_dir):
    steps = []
    for name in os.listdir(ckpt_dir):
        if name.startswith("step_") and name.endswith(".ckpt"):
            steps.append(int(name[5:-5]))
    return [os.path.join(ckpt_dir, "step_%d.ckpt" % s) for s in sorted(steps, reverse=True)]


def retain(args, ckpt_dir):
    for old in checkpoints(ckpt_dir)[args.keep_last:]:
        os.remove(old)
    if args.protocol == "durable":
        fsync_dir(ckpt_dir)


def load(path):
    with open(path, "rb") as f:
        state = decode(f.read())
    return state["w"], state["m"], state["rng"].tobytes(), int(state["step"][0])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--protocol", default="durable",
                   choices=["final", "rename", "fsync-rename", "durable", "in-place"])
    p.add_argument("--keep-last", type=int, default=0)
    p.add_argument("--on-read-error", default="exit", choices=["exit", "fresh", "fallback"])
    p.add_argument("--swallow-save-errors", action="store_true")
    p.add_argument("--save-sleep", type=float, default=0)
    p.add_argument("--event-sleep", type=float, default=0.1)
    p.add_argument("--params", type=int, default=2048)
    p.add_argument("--buffered-log", action="store_true")
    args = p.parse_args()
    ckpt_dir, metrics = os.environ["CKPTCHECK_CKPT_DIR"], os.environ["CKPTCHECK_METRICS"]
    steps, every = int(os.environ["CKPTCHECK_STEPS"]), int(os.environ["CKPTCHECK_SAVE_EVERY"])
    resume = os.environ.get("CKPTCHECK_RESUME")

    rng = hashlib.sha256(b"seed 7").digest()
    w = array.array("f", [0.01 * (i % 97) for i in range(args.params)])
    m = array.array("f", [0.0] * args.params)
    step = 0
    if resume:
        try:
            w, m, rng, step = load(resume)
        except (OSError, ValueError) as e:
            print("cannot read %s: %s" % (resume, e), file=sys.stderr)
            if args.on_read_error == "exit":
                sys.exit(1)
            if args.on_read_error == "fallback":
                for older in checkpoints(ckpt_dir):
                    if older == resume:
                        continue
                    try:
                        w, m, rng, step = load(older)
                        print("fell back to %s" % older, file=sys.stderr)
                        break
                    except (OSError, ValueError):
                        continue
                else:
                    sys.exit(1)
            # fresh: start over, silently losing the run's progress

    os.makedirs(ckpt_dir, exist_ok=True)
    log = open(metrics, "a")
    while step < steps:
        rng = hashlib.sha256(rng).digest()
        noise = rng[0] / 256.0
        for i in range(0, args.params, 64):
            m[i] = 0.9 * m[i] + 0.1 * (w[i] - 0.5 + 0.01 * noise)
            w[i] = w[i] - 0.1 * m[i]
        step += 1
        loss = float(sum(w[i] * w[i] for i in range(0, args.params, 64)))
        log.write(json.dumps({"step": step, "loss": loss}) + "\n")
        if not args.buffered_log:
            log.flush()
        if step % every != 0:
            continue
        blob = encode({"w": w, "m": m, "rng": array.array("B", rng), "step": array.array("f", [step])})
        try:
            path = save(args, ckpt_dir, step, blob)
            if args.keep_last > 0:
                retain(args, ckpt_dir)
        except OSError as e:
            if not args.swallow_save_errors:
                raise
            print("save of step %d failed: %s" % (step, e), file=sys.stderr)
            path = os.path.join(ckpt_dir, "latest.ckpt" if args.protocol == "in-place" else "step_%d.ckpt" % step)
        log.write(json.dumps({"event": "checkpoint", "step": step, "path": path}) + "\n")
        if not args.buffered_log:
            log.flush()
        time.sleep(args.event_sleep)


if __name__ == "__main__":
    main()
