#!/usr/bin/env python3
"""Fails on an #include that points up the layer order, or torch reaching torch-free code.

The layers, lowest first. A file may include headers of its own layer and of layers listed
before it, never after. bench/ and tests/ sit above everything. The CMake libraries mirror this
list (one per layer, linked downward only); this check catches what linking alone cannot: a
header-only upward include.

Second rule: LibTorch stays out of torch-free code. A header that includes ATen, c10 or torch
(directly or through another project header) may only be included by *_torch.cpp files and
other such headers, and its name ends in _torch.h (and only such a header's does).

Third rule: the torch-free verifier (verifier/check, pins, tensors, plan, process) never includes
the built-in workload (fixtures/): pins take an already-resolved config.

Usage: check_layers.py [ROOT]   exit 0 clean, 1 with one line per violation.
"""
import os
import re
import sys

LAYERS = [
    "base",
    "faultfs",
    "formats",
    "distributed",
    "shards",
    "layouts",
    "fixtures",
    "verifier/process",
    "verifier/plan",
    "verifier/tensors",
    "verifier/pins",
    "verifier/check",
    "verifier/drill",
    "verifier/pilot",
    "verifier/train",
    "verifier/cli",
    "api",
    "python",
    "bench",
    "fuzz",
    "examples",
    "tests",
]
# Layers of the torch-free verifier that take what the workload resolved and never the workload.
WORKLOAD_FREE = {"verifier/check", "verifier/pins", "verifier/tensors", "verifier/plan", "verifier/process"}
INCLUDE = re.compile(r'^\s*#\s*include\s+([<"])([^">]+)[">]', re.M)
TORCH = re.compile(r"^(ATen|c10|torch)/")


def layer_of(path):
    best = None
    for i, layer in enumerate(LAYERS):
        if path == layer or path.startswith(layer + "/"):
            if best is None or len(layer) > len(LAYERS[best]):
                best = i
    return best


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    sources = {}
    for top in {layer.split("/")[0] for layer in LAYERS}:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in files:
                if name.endswith((".h", ".cpp")):
                    full = os.path.join(dirpath, name)
                    rel = os.path.relpath(full, root)
                    with open(full, encoding="utf-8", errors="replace") as f:
                        sources[rel] = INCLUDE.findall(f.read())
    problems = []
    for path, includes in sorted(sources.items()):
        mine = layer_of(path)
        for kind, target in includes:
            if kind != '"':
                continue
            theirs = layer_of(target)
            if theirs is None or mine is None:
                continue
            if theirs > mine:
                problems.append(f"{path}: includes \"{target}\": {LAYERS[mine]}/ may not include "
                                f"{LAYERS[theirs]}/ (it is higher in the layer order)")

    torch_headers = set()
    changed = True
    while changed:  # transitive closure over project headers
        changed = False
        for path, includes in sources.items():
            if not path.endswith(".h") or path in torch_headers:
                continue
            if any((k == "<" and TORCH.match(t)) or (k == '"' and t in torch_headers) for k, t in includes):
                torch_headers.add(path)
                changed = True
    for path, includes in sorted(sources.items()):
        if not path.endswith(".cpp") or path.endswith("_torch.cpp") or path.endswith("_torch_test.cpp"):
            continue
        for kind, target in includes:
            if (kind == "<" and TORCH.match(target)) or (kind == '"' and target in torch_headers):
                problems.append(f"{path}: includes {target}, which needs LibTorch: only *_torch.cpp "
                                f"files may (keep torch out of torch-free code)")
    # A header that pulls in LibTorch says so in its name, so a reader (and a reviewer of an include
    # line) knows the cost without running this check; and a *_torch.h name that needs no torch lies.
    for path in sorted(sources):
        if not path.endswith(".h"):
            continue
        if path in torch_headers and not path.endswith("_torch.h"):
            problems.append(f"{path}: includes LibTorch (directly or through a project header) but its "
                            f"name does not end in _torch.h")
        elif path.endswith("_torch.h") and path not in torch_headers:
            problems.append(f"{path}: named *_torch.h but includes no LibTorch header")
    # The torch-free verifier (check, pins, tensors) takes configs already resolved: it never sees
    # the built-in workload (fixtures/), so it does not link the workload's config and yaml-cpp.
    for path, includes in sorted(sources.items()):
        if layer_of(path) is None or LAYERS[layer_of(path)] not in WORKLOAD_FREE:
            continue
        for kind, target in includes:
            if kind == '"' and target.startswith("fixtures/"):
                problems.append(f"{path}: includes \"{target}\": {LAYERS[layer_of(path)]}/ is part of the "
                                f"torch-free verifier and may not depend on the workload (fixtures/)")
    for p in problems:
        print("layer check: " + p)
    if problems:
        print(f"layer check: {len(problems)} violation(s); the order is: " + " < ".join(LAYERS))
        return 1
    print(f"layer check: {len(sources)} files, {len(LAYERS)} layers, no upward include")
    return 0


if __name__ == "__main__":
    sys.exit(main())
