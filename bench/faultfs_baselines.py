"""The fault file system's bench row (ckptcheck_bench --only faultfs), run with Debian's /usr/bin/python3.

  faultfs_baselines.py save FAULTFS_BIN WORK GIB REPS
      mounts FAULTFS_BIN (ckptcheck-faultfs) on WORK/mnt over WORK/backing, then times torch.save + fsync
      of the same GIB GiB state ({"layer.<i>.weight": randn(4096, 4096)}) into WORK/mnt (through the
      fault file system) and into WORK/plain (a directory beside the backing one: the same file system,
      no FUSE), alternating, best of REPS; prints one JSON object and unmounts (SIGTERM).
"""
import json
import os
import signal
import subprocess
import sys
import time


def state(gib):
    import torch
    gen = torch.Generator().manual_seed(19)
    return {"layer.%d.weight" % i: torch.randn(4096, 4096, generator=gen) for i in range(int(gib * 16))}


def fsync_path(path):
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if os.path.isdir(path) else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def drop(path):
    """Removes the previous save durably on both sides (on the mount, the unlink and its directory's
    fsync reach the model, which then frees the backing file), then waits for the disk: no save pays
    for the previous one's writeback (bench/README.md)."""
    if os.path.exists(path):
        os.remove(path)
        fsync_path(os.path.dirname(path))
    os.sync()


def torch_save_fsync(obj, path):
    import torch
    torch.save(obj, path)
    fsync_path(path)


def mounted(path):
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == path for line in f)


def main(argv):
    if argv[:1] != ["save"] or len(argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    program, work, gib, reps = argv[1], os.path.abspath(argv[2]), float(argv[3]), int(argv[4])
    dirs = {name: os.path.join(work, name) for name in ("backing", "state", "mnt", "plain")}
    for d in dirs.values():
        os.makedirs(d, exist_ok=True)
    log = open(os.path.join(work, "faultfs.log"), "w")
    daemon = subprocess.Popen([program, "--backing", dirs["backing"], "--state", dirs["state"], "--control",
                               os.path.join(dirs["state"], "control.sock"), "--root-name", "ckpt", dirs["mnt"]],
                              stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 10
        while not mounted(dirs["mnt"]):
            if daemon.poll() is not None or time.monotonic() > deadline:
                print("ckptcheck-faultfs did not mount (see %s)" % log.name, file=sys.stderr)
                return 1
            time.sleep(0.01)
        obj = state(gib)
        paths = {"faultfs": os.path.join(dirs["mnt"], "state.pt"), "plain": os.path.join(dirs["plain"], "state.pt")}
        times = {"faultfs": [], "plain": []}
        for _ in range(reps):
            for side in ("plain", "faultfs"):  # alternating: a slow spell of the disk hits both
                drop(paths[side])
                start = time.perf_counter()
                torch_save_fsync(obj, paths[side])
                times[side].append(time.perf_counter() - start)
        out = {"bytes": os.path.getsize(paths["faultfs"]),
               "faultfs_seconds": min(times["faultfs"]), "faultfs_all": times["faultfs"],
               "plain_seconds": min(times["plain"]), "plain_all": times["plain"]}
        for side in ("plain", "faultfs"):
            drop(paths[side])
        print(json.dumps(out))
        return 0
    finally:
        daemon.send_signal(signal.SIGTERM)  # the daemon unmounts itself
        try:
            daemon.wait(timeout=10)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
            subprocess.call(["/usr/bin/fusermount3", "-u", "-z", dirs["mnt"]])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
