#!/usr/bin/env python3
"""A training program with known costs, for the drill's outside measurements (no torch: it starts
fast). It keeps the drill contract, sleeps --start-sleep at start-up (fresh or resumed), --save-sleep
inside every save (before the checkpoint event), --step-sleep per step, and holds --hold-bytes of
touched memory for its whole run. Its checkpoint is a directory: model.safetensors (P float32
values), optimizer.safetensors (two moments of P float32 each) and progress.json. With --log-all
every step line carries the optional contract fields: tokens, peak_memory_bytes (= --hold-bytes,
what it reports, not a measurement) and data_wait_ms.
"""
import argparse
import array
import json
import os
import shutil
import struct
import time


# array typecode <-> safetensors dtype
DTYPES = {"f": "F32", "B": "U8"}


def write_safetensors(path, tensors):
    """tensors: name -> array.array of float32 ('f') or bytes ('B'), one dimension."""
    header, offset, payload = {}, 0, b""
    for name, values in tensors.items():
        data = values.tobytes()
        header[name] = {"dtype": DTYPES[values.typecode], "shape": [len(values)],
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        payload += data
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + payload)


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    out = {}
    for name, info in header.items():
        start, end = info["data_offsets"]
        values = array.array({v: k for k, v in DTYPES.items()}[info["dtype"]])
        values.frombytes(blob[8 + n + start:8 + n + end])
        out[name] = values
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--start-sleep", type=float, default=0)
    p.add_argument("--save-sleep", type=float, default=0)
    p.add_argument("--step-sleep", type=float, default=0)
    p.add_argument("--hold-bytes", type=int, default=0)
    p.add_argument("--params", type=int, default=1000)
    p.add_argument("--tokens", type=int, default=4096)
    p.add_argument("--data-wait-ms", type=float, default=7)
    p.add_argument("--log-all", action="store_true")
    args = p.parse_args()
    ckpt_dir, metrics = os.environ["CKPTCHECK_CKPT_DIR"], os.environ["CKPTCHECK_METRICS"]
    steps, every = int(os.environ["CKPTCHECK_STEPS"]), int(os.environ["CKPTCHECK_SAVE_EVERY"])
    resume = os.environ.get("CKPTCHECK_RESUME")
    held = b"\x01" * args.hold_bytes  # touched: resident for the whole run
    time.sleep(args.start_sleep)

    w = array.array("f", [0.001 * i for i in range(args.params)])
    m = array.array("f", [0.0] * args.params)
    v = array.array("f", [0.0] * args.params)
    step = 0
    if resume:
        w = read_safetensors(os.path.join(resume, "model.safetensors"))["w"]
        opt = read_safetensors(os.path.join(resume, "optimizer.safetensors"))
        m, v = opt["exp_avg"], opt["exp_avg_sq"]
        with open(os.path.join(resume, "progress.json")) as f:
            step = json.load(f)["step"]

    log = open(metrics, "a")
    while step < steps:
        time.sleep(args.step_sleep)
        for i in range(args.params):
            g = w[i] - 0.5
            m[i] = 0.9 * m[i] + 0.1 * g
            v[i] = 0.99 * v[i] + 0.01 * g * g
            w[i] = w[i] - 0.01 * m[i]
        step += 1
        record = {"step": step, "loss": float(sum(w)) + len(held) * 0.0}
        if args.log_all:
            record.update(tokens=args.tokens, peak_memory_bytes=args.hold_bytes, data_wait_ms=args.data_wait_ms)
        log.write(json.dumps(record) + "\n")
        log.flush()
        if step % every == 0:
            final = os.path.join(ckpt_dir, "step_%d" % step)
            tmp = final + ".tmp"
            shutil.rmtree(tmp, ignore_errors=True)  # left by a save that was killed (a relaunch finds it)
            os.makedirs(tmp)
            write_safetensors(os.path.join(tmp, "model.safetensors"), {"w": w})
            write_safetensors(os.path.join(tmp, "optimizer.safetensors"), {"exp_avg": m, "exp_avg_sq": v})
            with open(os.path.join(tmp, "progress.json"), "w") as f:
                json.dump({"step": step}, f)
            time.sleep(args.save_sleep)
            os.replace(tmp, final)
            log.write(json.dumps({"event": "checkpoint", "step": step, "path": final}) + "\n")
            log.flush()


if __name__ == "__main__":
    main()
