"""The Python package's bench rows (ckptcheck_bench --only python), run with Debian's /usr/bin/python3
and PYTHONPATH naming the built package. Each subcommand prints one JSON object of best-of-N seconds.

  python_baselines.py write PATH GIB          torch.save of {"layer.<i>.weight": randn(4096, 4096)}, GIB GiB
  python_baselines.py verify PATH REPS        ckptcheck.verify(PATH, weights_only=True), timed around the call
  python_baselines.py save-load DIR GIB REPS  ckptcheck.torch.save vs torch.save + fsync of the same state,
                                              ckptcheck.torch.load vs torch.load(weights_only=True) of the file
"""
import json
import os
import sys
import time


def state(gib):
    import torch
    gen = torch.Generator().manual_seed(19)
    return {"layer.%d.weight" % i: torch.randn(4096, 4096, generator=gen) for i in range(int(gib * 16))}


def drop(path):
    for p in (path, path + ".ckptcheck.seal.json", path + ".ckptcheck.seal.json.sig"):
        if os.path.exists(p):
            os.remove(p)
    os.sync()  # no save pays for the previous one's writeback (bench/README.md)


def best(reps, prepare, run):
    times = []
    for _ in range(reps):
        prepare()
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times), times


def torch_save_fsync(obj, path):
    import torch
    torch.save(obj, path)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def main(argv):
    if argv[:1] == ["write"] and len(argv) == 3:
        import torch
        torch_save_fsync(state(float(argv[2])), argv[1])
        return 0
    if argv[:1] == ["verify"] and len(argv) == 3:
        import ckptcheck
        report = []
        seconds, all_seconds = best(int(argv[2]), lambda: None,
                                    lambda: report.append(ckptcheck.verify(argv[1], weights_only=True)))
        print(json.dumps({"seconds": seconds, "all_seconds": all_seconds, "ok": report[-1].ok,
                          "bytes_hashed": report[-1].bytes_hashed}))
        return 0 if report[-1].ok else 1  # a weights-only state passes: anything else is an error
    if argv[:1] == ["save-load"] and len(argv) == 4:
        import torch
        import ckptcheck.torch
        directory, reps = argv[1], int(argv[3])
        obj = state(float(argv[2]))
        base, ours = os.path.join(directory, "torch.pt"), os.path.join(directory, "ours.pt")
        out = {}
        out["torch_save_fsync"], out["torch_save_fsync_all"] = best(
            reps, lambda: drop(base), lambda: torch_save_fsync(obj, base))
        out["ckptcheck_save"], out["ckptcheck_save_all"] = best(
            reps, lambda: drop(ours), lambda: ckptcheck.torch.save(obj, ours))
        del obj
        out["torch_load"], out["torch_load_all"] = best(
            reps, lambda: None, lambda: torch.load(ours, weights_only=True))
        out["ckptcheck_load"], out["ckptcheck_load_all"] = best(
            reps, lambda: None, lambda: ckptcheck.torch.load(ours))
        out["bytes"] = os.path.getsize(ours)
        print(json.dumps(out))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
