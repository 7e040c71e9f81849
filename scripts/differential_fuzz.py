#!/usr/bin/env python3
"""Differential mutation fuzzer: ckptcheck's verdict against what the real loader would do.

    /usr/bin/python3 scripts/differential_fuzz.py [--seconds 30] [--iterations N] [--seed 0]
        [--corpus fuzz/corpus/differential] [--findings fuzz/findings/differential]
        [--binary build/ckptcheck] [--timeout 15] [--allow GLOBAL ...]

Seeds: every file in --corpus (created on first use from tests/data/attack/ and the legitimate
tests/data/pytorch/*.pt). Each iteration mutates one seed (bit flips, inserted/deleted bytes, a
duplicated zip end record, a case-changed zip member name, truncation, appended data or another
seed, a protocol-4 FRAME inserted after a PROTO), writes it to a temp dir and runs
`ckptcheck verify --weights-only --json FILE` (--timeout, 15 s). When verify passes (exit 0) the
mutant goes to scripts/loader_oracle.py (a long-lived worker; it never runs a payload and nothing
here calls torch.load). A FINDING is:
  crash          verify exited with a code other than 0/1/2 or died by a signal;
  timeout        verify ran past --timeout (15 s: ckptcheck's HDF5 parser child is itself
                 stopped at 10 s, so a 10 s limit would flag every file that hangs libhdf5);
  global         verify passed, but the loader would look up a global outside the weights-only
                 allowlist (ALLOWLIST below, plus --allow);
  dispatch       verify passed, but torch.load would hand the file to torch.jit.load or to the
                 pre-0.4 tar reader;
  zip_ambiguous  verify passed a zip that torch (miniz) and Python's zipfile both read, with
                 different records or bytes (a zip only one of them can read is not one);
  reading        verify passed, but `ckptcheck inspect --json` lists fewer pickle globals than the
                 loader would look up (ckptcheck read a different pickle than torch does).
Each finding is written to --findings as <n>-<kind>.<ext> plus <n>-<kind>.json (the reason, the
seed, the mutations, verify's and the oracle's output). Exit status 1 when there is a finding.
Deterministic for a given --seed: mutant i is the same on every run (--iterations makes the
number of mutants exact; --seconds only stops early).
"""
import argparse
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
DEFAULT_CORPUS = os.path.join(ROOT, "fuzz", "corpus", "differential")
DEFAULT_FINDINGS = os.path.join(ROOT, "fuzz", "findings", "differential")
VERIFY_TIMEOUT = 15  # ckptcheck's own HDF5 parser child stops at 10 s wall clock: leave it room

# torch.load(weights_only=True)'s allowlist: torch 1.13's _get_allowed_globals() and what torch 2.x
# added for plain state dicts (rebuild v3, parameter with state, from_type_v2, device, UntypedStorage).
DTYPES = ["complex32", "complex64", "complex128", "float16", "float32", "float64", "bfloat16", "int8",
          "int16", "int32", "int64", "uint8", "bool", "half", "float", "double", "long", "int", "short",
          "cfloat", "cdouble", "chalf"]
ALLOWLIST = {
    "collections.OrderedDict", "torch.nn.parameter.Parameter", "torch.serialization._get_layout",
    "torch.Size", "torch.Tensor", "torch.device", "torch.storage.UntypedStorage",
    "torch._utils._rebuild_parameter", "torch._utils._rebuild_parameter_with_state",
    "torch._utils._rebuild_tensor", "torch._utils._rebuild_tensor_v2", "torch._utils._rebuild_tensor_v3",
    "torch._utils._rebuild_sparse_tensor", "torch._utils._rebuild_meta_tensor_no_storage",
    "torch._utils._rebuild_sparse_csr_tensor", "torch._tensor._rebuild_from_type_v2",
} | {f"torch.{d}" for d in DTYPES}
STORAGE = re.compile(r"^torch(\.cuda)?\.[A-Za-z0-9]*Storage$")


def allowed(name, extra):
    return name in ALLOWLIST or name in extra or bool(STORAGE.match(name))


# ---- corpus -----------------------------------------------------------------------------------

def ensure_corpus(corpus):
    if os.path.isdir(corpus) and any(os.path.isfile(os.path.join(corpus, n)) for n in os.listdir(corpus)):
        return
    os.makedirs(corpus, exist_ok=True)
    attack = os.path.join(ROOT, "tests", "data", "attack")
    for n in sorted(os.listdir(attack)) if os.path.isdir(attack) else []:
        p = os.path.join(attack, n)
        if os.path.isfile(p) and n != "expected.json":
            shutil.copyfile(p, os.path.join(corpus, n))
    legit = os.path.join(ROOT, "tests", "data", "pytorch")
    for n in sorted(os.listdir(legit)) if os.path.isdir(legit) else []:
        p = os.path.join(legit, n)
        if os.path.isfile(p) and n.endswith(".pt") and not n.startswith(("malicious", "torchscript_hostile")):
            shutil.copyfile(p, os.path.join(corpus, "pytorch_" + n))


def load_seeds(corpus):
    seeds = []
    for n in sorted(os.listdir(corpus)):
        p = os.path.join(corpus, n)
        if os.path.isfile(p):
            with open(p, "rb") as f:
                seeds.append((n, f.read()))
    if not seeds:
        sys.exit(f"differential_fuzz: no seeds in {corpus}")
    return seeds


# ---- mutations --------------------------------------------------------------------------------

EOCD = b"PK\x05\x06"


def m_flip(rng, d, seeds):
    if not d:
        return d, "flip(empty)"
    d = bytearray(d)
    n = rng.randint(1, 8)
    for _ in range(n):
        i = rng.randrange(len(d))
        d[i] ^= 1 << rng.randrange(8)
    return bytes(d), f"flip x{n}"


def m_byte(rng, d, seeds):
    if not d:
        return d, "byte(empty)"
    d = bytearray(d)
    i = rng.randrange(len(d))
    v = rng.choice([0, 0xFF, 0x7F, 0x80, ord("."), ord("c"), ord("R"), ord("\n"), rng.randrange(256)])
    d[i] = v
    return bytes(d), f"byte[{i}]={v:#x}"


def m_insert(rng, d, seeds):
    i = rng.randint(0, len(d))
    blob = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    return d[:i] + blob + d[i:], f"insert {len(blob)}@{i}"


def m_delete(rng, d, seeds):
    if len(d) < 2:
        return d, "delete(short)"
    i = rng.randrange(len(d))
    n = rng.randint(1, min(64, len(d) - i))
    return d[:i] + d[i + n:], f"delete {n}@{i}"


def m_truncate(rng, d, seeds):
    n = rng.randint(0, len(d))
    return d[:n], f"truncate {n}"


def m_append(rng, d, seeds):
    if rng.random() < 0.5:
        name, other = rng.choice(seeds)
        return d + other, f"append seed {name}"
    blob = bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
    return d + blob, f"append {len(blob)} random"


def m_splice(rng, d, seeds):
    name, other = rng.choice(seeds)
    i, j = rng.randint(0, len(d)), rng.randint(0, len(other))
    return d[:i] + other[j:], f"splice {i} + {name}[{j}:]"


def m_dup_eocd(rng, d, seeds):
    """Copies the end records (zip64 end + locator + EOCD when present) to the end or into the
    EOCD's comment, optionally pointing the copy somewhere else."""
    at = d.rfind(EOCD)
    if at < 0:
        return d, "dup_eocd(no eocd)"
    start = at
    z64 = d.rfind(b"PK\x06\x06", 0, at)
    if z64 >= 0 and at - z64 <= 76:
        start = z64
    tail = bytearray(d[start:at + 22])
    if rng.random() < 0.5:  # point the copy's central directory elsewhere
        k = len(tail) - 22 + 16
        off = struct.unpack_from("<I", tail, k)[0]
        struct.pack_into("<I", tail, k, max(0, off + rng.choice([-46, -1, 1, 46, 64])))
    if rng.random() < 0.5:  # hide it in the first EOCD's comment
        body = bytearray(d[:at + 22])
        struct.pack_into("<H", body, at + 20, len(tail))
        return bytes(body) + bytes(tail), "dup_eocd(comment)"
    return d + bytes(tail), "dup_eocd(appended)"


def m_case(rng, d, seeds):
    names = [m.start() for m in re.finditer(rb"archive/[A-Za-z0-9_.]+", d)]
    if not names:
        return d, "case(no names)"
    i = rng.choice(names)
    j = d.index(b"/", i) + 1
    end = j
    while end < len(d) and (chr(d[end]).isalnum() or d[end] in b"_."):
        end += 1
    return d[:j] + d[j:end].swapcase() + d[end:], f"case@{i}"


def m_frame(rng, d, seeds):
    protos = [m.start() for m in re.finditer(rb"\x80[\x02-\x05]", d)]
    if not protos:
        return d, "frame(no proto)"
    i = rng.choice(protos)
    stop = d.find(b".", i + 2)
    base = (stop - (i + 2) + 1) if stop > 0 else 0
    length = max(0, base + rng.choice([0, 0, 1, 8, 64, 512, 4096, -1]))
    return d[:i] + b"\x80\x04\x95" + struct.pack("<Q", length) + d[i + 2:], f"frame@{i} len {length}"


MUTATORS = [m_flip, m_byte, m_insert, m_delete, m_truncate, m_append, m_splice, m_dup_eocd, m_case, m_frame]


def mutate(rng, seeds):
    name, data = rng.choice(seeds)
    steps = []
    for _ in range(rng.randint(1, 3)):
        data, what = rng.choice(MUTATORS)(rng, data, seeds)
        steps.append(what)
    return name, data[:1 << 20], steps


# ---- runners ----------------------------------------------------------------------------------

class Oracle:
    """scripts/loader_oracle.py --serve, restarted when it dies."""

    def __init__(self):
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen([sys.executable, "-W", "ignore", os.path.join(HERE, "loader_oracle.py"),
                                      "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, cwd=tempfile.gettempdir())

    def ask(self, path):
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        try:
            self.proc.stdin.write(path + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        if not line:
            self.close()
            return {"path": path, "error": "oracle worker died (the file crashes a torch/Python reader)"}
        return json.loads(line)

    def close(self):
        if self.proc is not None:
            try:
                self.proc.kill()
                self.proc.wait(timeout=5)
            except Exception:  # noqa: BLE001
                pass
            self.proc = None


def run_tool(binary, args, path, timeout=VERIFY_TIMEOUT):
    try:
        p = subprocess.run([binary] + args + [path], capture_output=True, timeout=timeout)
        return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        return None, "", "timeout"


def inspect_globals(binary, path):
    rc, out, _ = run_tool(binary, ["inspect", "--json"], path)
    try:
        return {g["name"] for g in json.loads(out).get("pickle_globals", [])}
    except Exception:  # noqa: BLE001
        return None


def judge(binary, path, rc, oracle, extra_allow, timeout):
    """[(kind, reason)] for one mutant."""
    if rc is None:
        return [("timeout", f"verify ran past {timeout} s")], None
    if rc not in (0, 1, 2):
        return [("crash", f"verify exited {rc}" + (" (signal %d)" % -rc if rc < 0 else ""))], None
    if rc != 0:
        return [], None
    o = oracle.ask(path)
    if "error" in o and "torch_dispatch" not in o:
        return [], o
    found = []
    if o["torch_dispatch"] in ("torchscript", "tar"):
        found.append(("dispatch", f"verify passed; torch.load would use the {o['torch_dispatch']} reader"))
    foreign = [g for g in o["globals"] if not allowed(g, extra_allow)]
    if foreign:
        found.append(("global", f"verify passed; the loader would look up {foreign}"))
    z = o.get("zip")
    if z and not z["agree"] and not z["torch"]["error"] and not z["zipfile"]["error"]:
        found.append(("zip_ambiguous", "verify passed; torch and zipfile read the zip differently: " +
                      "; ".join(z["disagreements"])[:500]))
    if o["globals"]:
        seen = inspect_globals(binary, path)
        missing = sorted(set(o["globals"]) - seen) if seen is not None else None
        if missing:
            found.append(("reading", f"inspect lists no {missing}, which the loader looks up"))
    return found, o


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--iterations", type=int, default=0, help="stop after N mutants (0: only --seconds)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=VERIFY_TIMEOUT, help="seconds per verify run")
    ap.add_argument("--corpus", default=DEFAULT_CORPUS)
    ap.add_argument("--findings", default=DEFAULT_FINDINGS)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "ckptcheck"))
    ap.add_argument("--allow", action="append", default=[], help="one more allowed global (module.name)")
    args = ap.parse_args()
    if not os.access(args.binary, os.X_OK):
        sys.exit(f"differential_fuzz: {args.binary} is not built")
    ensure_corpus(args.corpus)
    seeds = load_seeds(args.corpus)
    rng = random.Random(args.seed)
    oracle = Oracle()
    findings, n, deadline = 0, 0, time.monotonic() + args.seconds
    counts = {}
    with tempfile.TemporaryDirectory(prefix="ckptcheck_difffuzz_") as tmp:
        try:
            while time.monotonic() < deadline and (not args.iterations or n < args.iterations):
                seed_name, data, steps = mutate(rng, seeds)
                ext = os.path.splitext(seed_name)[1] or ".pt"
                path = os.path.join(tmp, f"mutant{ext}")
                with open(path, "wb") as f:
                    f.write(data)
                rc, out, err = run_tool(args.binary, ["verify", "--weights-only", "--json"], path, args.timeout)
                counts[rc] = counts.get(rc, 0) + 1
                found, o = judge(args.binary, path, rc, oracle, set(args.allow), args.timeout)
                for kind, reason in found:
                    findings += 1
                    os.makedirs(args.findings, exist_ok=True)
                    stem = os.path.join(args.findings, f"{args.seed}-{n}-{kind}")
                    shutil.copyfile(path, stem + ext)
                    with open(stem + ".json", "w") as f:
                        json.dump({"kind": kind, "reason": reason, "seed": args.seed, "iteration": n,
                                   "from": seed_name, "mutations": steps, "verify_exit": rc,
                                   "verify_stdout": out[-4000:], "verify_stderr": err[-2000:], "oracle": o},
                                  f, indent=1, sort_keys=True)
                    print(f"FINDING {kind}: {stem}{ext}: {reason}", flush=True)
                n += 1
        finally:
            oracle.close()
    print(f"differential_fuzz: {n} mutants of {len(seeds)} seeds, verify exits {counts}, {findings} findings")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
