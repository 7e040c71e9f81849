#!/usr/bin/env python3
"""A data-parallel training program that keeps per-rank state the way real programs name it, for
the drill across world sizes (no torch: it starts in milliseconds, so a test can drill it often).

Ranks come from torchrun's environment (RANK, WORLD_SIZE), as `ckptcheck launch` sets it. Every
rank holds the same model: each step takes the next global batch, rank r its samples r, r+W, ...,
and the gradient is the sum of the ranks' partial sums in rank order, as an all-reduce adds them
(every rank adds all of them itself: the ranks never talk, so no transport is needed). The order
of that sum depends on the world size, so two world sizes differ in the last bits: the noise the
drill's control run measures.

Per-rank state: rank r's random stream (a Park-Miller generator seeded 1000 + r, drawn once per
step) and the data position, written by rank r alone under the name --per-rank chooses:
  rank_pt            rank_<r>.pt
  random_states_pkl  random_states_<r>.pkl   (accelerate's name)
  rng_state_pth      rng_state_<r>.pth       (transformers' Trainer's name)
  rank_dir           rank<r>/state.pt
Rank 0 writes model.pt (the weights) and optimizer.pt (momentum, step). Every file is a legacy
torch.save file (torch.load reads it; tensors are float64), written here without torch.

A checkpoint is step_XXXXXXXX: every rank writes its file into .tmp-step_XXXXXXXX (each file
through a rename), rank 0 waits until every rank's file is there, renames the directory and only
then appends the checkpoint event. Resumed on more ranks than saved, a rank with no file of its
own rebuilds its stream from its seed (it is drawn once per step) and takes the data position from
rank 0's file, so it holds what an uninterrupted run at that world size holds.

--bug NAME introduces a resume bug on purpose:
  rank0-state      every rank restores rank 0's per-rank file
  lose-rank-state  a resumed run no longer writes per-rank files
"""
import argparse
import io
import os
import pickle
import struct
import sys
import time

SCHEMES = {
    "rank_pt": "rank_{r}.pt",
    "random_states_pkl": "random_states_{r}.pkl",
    "rng_state_pth": "rng_state_{r}.pth",
    "rank_dir": "rank{r}/state.pt",
}
DIM, SAMPLES, BATCH, LR, MOMENTUM = 6, 60, 12, 0.05, 0.9
LEGACY_MAGIC, LEGACY_PROTOCOL = 0x1950A86A20F9469CFC6C, 1001


# --- legacy torch.save, float64 tensors and plain data only -------------------------------------
class Tensor(list):
    """A 1-D float64 tensor."""


def _pickle_value(out, value, storages):
    if isinstance(value, Tensor):
        key = str(len(storages))
        storages.append(value)
        out += b"ctorch._utils\n_rebuild_tensor_v2\n("
        out += b"(X\x07\x00\x00\x00storagectorch\nDoubleStorage\n"
        _pickle_value(out, key, storages)
        _pickle_value(out, "cpu", storages)
        _pickle_value(out, len(value), storages)
        out += b"NtQ"  # None view metadata; TUPLE; BINPERSID
        _pickle_value(out, 0, storages)
        out += b"(" + b"".join(_int(len(value))) + b"t(" + b"".join(_int(1)) + b"t\x89"
        out += b"ccollections\nOrderedDict\n)RtR"
    elif isinstance(value, dict):
        out += b"}("
        for k, v in value.items():
            _pickle_value(out, k, storages)
            _pickle_value(out, v, storages)
        out += b"u"
    elif isinstance(value, str):
        data = value.encode()
        out += b"X" + struct.pack("<I", len(data)) + data
    elif isinstance(value, bool):
        out += b"\x88" if value else b"\x89"
    elif isinstance(value, int):
        out += b"".join(_int(value))
    elif isinstance(value, float):
        out += b"G" + struct.pack(">d", value)
    else:
        raise TypeError(type(value))


def _int(value):
    if -(2**31) <= value < 2**31:
        return [b"J", struct.pack("<i", value)]
    data = value.to_bytes((value.bit_length() + 8) // 8, "little", signed=True)
    return [b"\x8a", bytes([len(data)]), data]


def torch_save(obj, path):
    storages, body = [], bytearray(b"\x80\x02")
    _pickle_value(body, obj, storages)
    body += b"."
    with open(path + ".part", "wb") as f:
        for head in (LEGACY_MAGIC, LEGACY_PROTOCOL,
                     {"protocol_version": LEGACY_PROTOCOL, "little_endian": True,
                      "type_sizes": {"short": 2, "int": 4, "long": 4}}):
            pickle.dump(head, f, protocol=2)
        f.write(bytes(body))
        pickle.dump([str(i) for i in range(len(storages))], f, protocol=2)
        for values in storages:
            f.write(struct.pack("<q", len(values)) + struct.pack("<%dd" % len(values), *values))
    os.replace(path + ".part", path)


class _Reader(pickle.Unpickler):
    def find_class(self, module, name):
        known = {("torch._utils", "_rebuild_tensor_v2"): lambda key, offset, size, *rest: ("tensor", key, size),
                 ("torch", "DoubleStorage"): "double", ("collections", "OrderedDict"): dict}
        return known[(module, name)]

    def persistent_load(self, pid):
        return pid[2]


def torch_load(path):
    with open(path, "rb") as f:
        for _ in range(3):
            pickle.load(f)
        obj = _Reader(f).load()
        keys = pickle.load(f)
        data = {}
        for key in keys:
            (n,) = struct.unpack("<q", f.read(8))
            data[key] = Tensor(struct.unpack("<%dd" % n, f.read(8 * n)))

    def resolve(v):
        if isinstance(v, tuple) and v and v[0] == "tensor":
            return data[v[1]]
        return {k: resolve(x) for k, x in v.items()} if isinstance(v, dict) else v

    return resolve(obj)


# --- training -------------------------------------------------------------------------------------
def park_miller(state):
    return state * 48271 % 2147483647


def stream_after(rank, draws):
    state = 1000 + rank
    for _ in range(draws):
        state = park_miller(state)
    return state


def data_set():
    state, x, y = 7, [], []
    for _ in range(SAMPLES):
        row = []
        for _ in range(DIM):
            state = park_miller(state)
            row.append(state / 2147483647.0 - 0.5)
        x.append(row)
        y.append(sum((i + 1) * 0.1 * v for i, v in enumerate(row)))
    return x, y


def step_gradient(w, x, y, cursor, world):
    """The gradient and loss of the global batch at `cursor`: each rank's partial sums, then their
    sum in rank order (an all-reduce's)."""
    partial = []
    for r in range(world):
        grad, loss = [0.0] * DIM, 0.0
        for j in range(r, BATCH, world):
            i = (cursor + j) % SAMPLES
            err = sum(a * b for a, b in zip(w, x[i])) - y[i]
            loss += err * err
            grad = [g + 2 * err * v for g, v in zip(grad, x[i])]
        partial.append((grad, loss))
    grad, loss = [0.0] * DIM, 0.0
    for g, l in partial:
        grad = [a + b for a, b in zip(grad, g)]
        loss += l
    return [g / BATCH for g in grad], loss / BATCH


def log(path, line):
    with open(path, "a") as f:
        f.write(line + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-rank", choices=sorted(SCHEMES), default="rank_pt")
    parser.add_argument("--bug", choices=("rank0-state", "lose-rank-state"))
    # Seconds each step takes once this run has saved: a step here takes microseconds, and a drill
    # that kills the run through Slurm (scancel of the step, ~0.3 s) needs the run still going.
    parser.add_argument("--after-save-seconds", type=float, default=0.0)
    args = parser.parse_args()
    ckpt_dir, metrics = os.environ["CKPTCHECK_CKPT_DIR"], os.environ["CKPTCHECK_METRICS"]
    steps, every = int(os.environ["CKPTCHECK_STEPS"]), int(os.environ["CKPTCHECK_SAVE_EVERY"])
    resume = os.environ.get("CKPTCHECK_RESUME")
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    own_file = lambda directory, r: os.path.join(directory, SCHEMES[args.per_rank].format(r=r))

    x, y = data_set()
    w, momentum, step, cursor, stream = Tensor([0.0] * DIM), Tensor([0.0] * DIM), 0, 0, 1000 + rank
    if resume:
        model, opt = torch_load(os.path.join(resume, "model.pt")), torch_load(os.path.join(resume, "optimizer.pt"))
        w, momentum, step = Tensor(model["weight"]), Tensor(opt["momentum"]), opt["step"]
        mine = own_file(resume, 0 if args.bug == "rank0-state" else rank)
        if os.path.exists(mine):
            state = torch_load(mine)
            stream, cursor = state["rng"], state["data"]["cursor"]
        else:  # saved by a smaller world: rebuild this rank's stream, take the position from rank 0
            stream, cursor = stream_after(rank, step), torch_load(own_file(resume, 0))["data"]["cursor"]
            print("rank %d: no %s (world size changed): stream rebuilt" % (rank, own_file("", rank)), file=sys.stderr)
    keep_rank_state = not (resume and args.bug == "lose-rank-state")
    saved = False

    while step < steps:
        if saved:
            time.sleep(args.after_save_seconds)
        grad, loss = step_gradient(w, x, y, cursor, world)
        momentum = Tensor(MOMENTUM * m + g for m, g in zip(momentum, grad))
        w = Tensor(a - LR * m for a, m in zip(w, momentum))
        stream = park_miller(stream)  # this rank's draw of the step (dropout, augmentation...)
        cursor += BATCH
        step += 1
        if rank == 0:
            log(metrics, '{"step": %d, "loss": %r, "lr": %r}' % (step, loss, LR))
        if step % every:
            continue
        tmp = os.path.join(ckpt_dir, ".tmp-step_%08d" % step)
        final = os.path.join(ckpt_dir, "step_%08d" % step)
        if keep_rank_state:
            os.makedirs(os.path.dirname(own_file(tmp, rank)), exist_ok=True)
            torch_save({"rng": stream, "data": {"cursor": cursor, "epoch": cursor // SAMPLES}}, own_file(tmp, rank))
        if rank:
            continue
        os.makedirs(tmp, exist_ok=True)
        torch_save({"weight": w}, os.path.join(tmp, "model.pt"))
        torch_save({"momentum": momentum, "step": step, "lr": LR}, os.path.join(tmp, "optimizer.pt"))
        deadline = time.monotonic() + 60
        while keep_rank_state and not all(os.path.exists(own_file(tmp, r)) for r in range(world)):
            if time.monotonic() > deadline:
                sys.exit("rank 0: the other ranks' files of step %d never appeared in %s" % (step, tmp))
            time.sleep(0.002)
        os.replace(tmp, final)
        log(metrics, '{"event": "checkpoint", "step": %d, "path": "%s"}' % (step, final))
        saved = True


if __name__ == "__main__":
    main()
