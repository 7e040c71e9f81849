#!/usr/bin/env python3
"""Prints the layer list of docs/architecture.md, generated from scripts/check_layers.py's LAYERS.

The order comes from LAYERS (lowest first, the order the layer check enforces); the one-line
description of each folder comes from DESCRIPTIONS below. A layer without a description, or a
description of a folder that is not a layer, fails (exit 1): add or remove the entry here when
LAYERS changes.

Usage:
  gen_layer_doc.py               print the list as markdown
  gen_layer_doc.py --check FILE  exit 1 if the block between the markers in FILE differs
  gen_layer_doc.py --write FILE  rewrite the block between the markers in FILE

The block is every line strictly between `<!-- layers:begin -->` and `<!-- layers:end -->`.
Exit codes: 0 ok, 1 a check failed (a layer without a description or the reverse, a block that
differs, --check on a file without the markers), 2 usage or I/O error.
"""
import importlib.util
import os
import sys

BEGIN = "<!-- layers:begin -->"
END = "<!-- layers:end -->"

DESCRIPTIONS = {
    "base": "Status/Result, byte coding, SHA-256, file I/O, JSON fields, parallel jobs, progress",
    "faultfs": "the fault file system: a durability model (what a power loss keeps, ENOSPC, EIO) tested in "
               "process; ckptcheck-faultfs mounts it with libfuse3 ([faultfs.md](faultfs.md))",
    "formats": "chunks <-> bytes on disk: native, safetensors, HDF5, torch.save zip + pickle (torch-free)",
    "distributed": "torchrun's environment, the byte collective: the c10d process group (`*_torch`) and MPI (`mpi_*`, linked only into the commands), the size-balanced share split",
    "shards": "training state <-> named tensor chunks: plans, the one save pipeline, manifest, commit, "
              "mapped and resharded loads",
    "layouts": "the registry of checkpoint layouts, one file each (native, single file, sharded index, DCP, "
               "Megatron, HF Trainer, Accelerate, DeepSpeed, model folder, sealed folder): each detected by "
               "evidence, its files' roles and loaders, its resume rule; two claims on one path refused",
    "fixtures": "the built-in workload (LibTorch): model, AdamW, schedule, loss scaler, data, configs",
    "verifier/process": "the one child-process spawner, the launcher (local and Slurm steps), the drill's event protocol",
    "verifier/plan": "reservation planning from drill measurements, the hardware catalog",
    "verifier/tensors": "forensics: any checkpoint as named tensors, statistics, NaN counts, comparison, and the shard scan (one pass over a file: every chunk's SHA-256 and NaN/Inf counts) that verify and inspect share",
    "verifier/pins": "pins, drift, container fingerprint",
    "verifier/check": "verify: shard checks against the manifest, coverage, resumability, signatures, the report",
    "verifier/drill": "the restore drill in phases (plan, launcher, checkpoint checks, comparison, faults, live snapshot), from scratch and live; its report, HTML, JUnit and history",
    "verifier/pilot": "`ckptcheck pilot`: the precision x activation-checkpointing matrix and the scaling "
                      "study, each variant a fresh measured run, and its report and HTML",
    "verifier/train": "one training run of the built-in workload (`*_torch`)",
    "verifier/cli": "the commands: parse flags, call one library function, map Status to an exit code",
    "api": "the public C++ API (installed as `<ckptcheck/ckptcheck.h>`, `<ckptcheck/ckptcheck_torch.h>`)",
    "python": "`import ckptcheck`: a pybind11 binding over `api/` (`binding/`) and the package beside it: verify, seal, inspect, diff, `ckptcheck.torch` (save and a verified load), `ckptcheck.contract` ([python.md](python.md))",
    "bench": "`ckptcheck_bench` (`make bench`): every performance claim, measured against its baseline",
    "fuzz": "libFuzzer targets for the torch-free parsers: structure-aware mutators, seed corpora, "
            "dictionaries",
    "examples": "training programs that keep the drill contract: `examples/pytorch/train.py`, and a "
                "LibTorch program on the public API in `examples/libtorch/`",
    "tests": "mirrors the folders above; `tests/cli/` runs the built programs",
}


def load_layers():
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("check_layers", os.path.join(here, "check_layers.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.LAYERS)


def generate():
    """The block's lines (without the markers), or raises ValueError naming what does not match."""
    layers = load_layers()
    missing = [layer for layer in layers if layer not in DESCRIPTIONS]
    extra = [name for name in DESCRIPTIONS if name not in layers]
    problems = []
    if missing:
        problems.append("no description for layer(s) " + ", ".join(missing))
    if extra:
        problems.append("description(s) for " + ", ".join(extra) + " not in check_layers.py's LAYERS")
    if problems:
        raise ValueError("; ".join(problems) + " (edit DESCRIPTIONS in scripts/gen_layer_doc.py)")
    return [f"- `{layer}/` — {DESCRIPTIONS[layer]}" for layer in layers]


def split_block(text, path):
    """(before, block, after) as lists of lines; LookupError when the markers are missing."""
    lines = text.split("\n")
    try:
        begin = lines.index(BEGIN)
        end = lines.index(END, begin + 1)
    except ValueError:
        raise LookupError(f"{path}: no '{BEGIN}' ... '{END}' block")
    return lines[:begin + 1], lines[begin + 1:end], lines[end:]


def main(argv):
    if len(argv) == 1:
        mode, path = "print", None
    elif len(argv) == 3 and argv[1] in ("--check", "--write"):
        mode, path = argv[1][2:], argv[2]
    else:
        print("usage: gen_layer_doc.py [--check FILE | --write FILE]", file=sys.stderr)
        return 2
    try:
        generated = generate()
    except ValueError as e:
        print(f"gen_layer_doc: {e}", file=sys.stderr)
        return 1
    if mode == "print":
        print("\n".join(generated))
        return 0
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        before, block, after = split_block(text, path)
    except OSError as e:
        print(f"gen_layer_doc: {e}", file=sys.stderr)
        return 2
    except LookupError as e:  # --check: the file fails the check; --write: nothing to rewrite
        print(f"gen_layer_doc: {e}", file=sys.stderr)
        return 1 if mode == "check" else 2
    if mode == "check":
        if block == generated:
            return 0
        for i in range(max(len(block), len(generated))):
            found = block[i] if i < len(block) else "<end of block>"
            expected = generated[i] if i < len(generated) else "<end of block>"
            if found != expected:
                break
        print(f"gen_layer_doc: {path}: layer list differs from scripts/check_layers.py at block line "
              f"{i + 1}: expected {expected!r}, found {found!r}; "
              f"run scripts/gen_layer_doc.py --write {path}")
        return 1
    new_text = "\n".join(before + generated + after)
    if new_text != text:
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(new_text)
        os.replace(tmp, path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
