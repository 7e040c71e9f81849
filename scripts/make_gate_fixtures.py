#!/usr/bin/env python3
"""Fixtures for verify's pickle gate and for reading what torch.load(weights_only=True) reads.

Written with Debian's PyTorch (/usr/bin/python3); run from the repository root:
    /usr/bin/python3 scripts/make_gate_fixtures.py

tests/data/gate/
  code_<name>.pt       a torch.save zip whose pickle names one code-running callable outside
                       torch.load(weights_only=True)'s allowlist. Only *pickled* here: __reduce__ is
                       consulted when saving, and the callable is never called. torch.load with
                       weights_only=True refuses each (checked below); weights_only=False would run it.
  code_protocol4_os_system.pt  os.system pickled with protocol 4 (STACK_GLOBAL instead of GLOBAL).
  pre04_tensors.pt     a legacy (non-zip) torch.save file whose tensors are pickled as torch < 0.4
                       did: torch._utils._rebuild_tensor(storage, offset, size, stride).
  clean_weights.h5     a Keras-style HDF5 weights file with two float datasets and no NaN.
  tied_weights.bin     a pytorch_model.bin whose lm_head.weight is embed.weight (one tensor object).
  lightning_scores.ckpt  Lightning's ModelCheckpoint state where current_score and best_model_score
                       are one tensor.
  expected.json        per file: what torch.load(weights_only=True) returns (name, dtype, shape,
                       sha256 of the bytes) or, for code_*, the refused global.
"""
import hashlib
import json
import os
import pickletools
import runpy
import shutil
import subprocess
import webbrowser
import zipfile
import importlib

import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_pytorch_fixtures import describe  # noqa: E402  (one definition of a fixture's expected tensors)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "gate")
SENTINEL = "/tmp/ckptcheck_gate_fixture_was_executed"


def calls(fn, *args):
    class Calls:
        def __reduce__(self):
            return (fn, args)
    return Calls()


CODE = {
    "code_subprocess_popen.pt": calls(subprocess.Popen, ["touch", SENTINEL]),
    "code_builtins_getattr.pt": calls(getattr, "", "join"),
    "code_importlib_import_module.pt": calls(importlib.import_module, "os"),
    "code_shutil_rmtree.pt": calls(shutil.rmtree, "/tmp/ckptcheck_gate_fixture_dir"),
    "code_runpy_run_path.pt": calls(runpy.run_path, "/tmp/ckptcheck_gate_fixture.py"),
    "code_webbrowser_open.pt": calls(webbrowser.open, "http://127.0.0.1:9/"),
    "code_posix_popen.pt": calls(os.popen, "touch " + SENTINEL),
    "code_builtins_compile.pt": calls(compile, "1", "<x>", "eval"),
}


class Pre04Tensor:
    """Pickles a tensor the way torch < 0.4 did."""

    def __init__(self, t):
        self.t = t

    def __reduce__(self):
        return (torch._utils._rebuild_tensor,
                (self.t.storage(), self.t.storage_offset(), tuple(self.t.size()), self.t.stride()))


def globals_of_zip(path):
    with zipfile.ZipFile(path) as z:
        pkl = z.read(next(n for n in z.namelist() if n.endswith("/data.pkl")))
    return [arg.replace(" ", ".") for op, arg, _ in pickletools.genops(pkl) if op.name == "GLOBAL"]


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(5)
    expected = {"code": {}, "read": {}}
    for name, obj in CODE.items():
        path = os.path.join(OUT, name)
        torch.save({"weight": torch.zeros(2), "x": obj}, path)
        try:
            torch.load(path, weights_only=True)
        except Exception:  # refused: the point of the fixture
            pass
        else:
            raise RuntimeError(f"{name}: torch.load(weights_only=True) accepted it")
        refused = [g for g in globals_of_zip(path)
                   if not g.startswith("torch.") and g != "collections.OrderedDict"]
        expected["code"][name] = refused[0]
    # Protocol 4 names globals with STACK_GLOBAL (two strings on the stack) instead of GLOBAL.
    path = os.path.join(OUT, "code_protocol4_os_system.pt")
    torch.save({"weight": torch.zeros(2), "x": calls(os.system, "touch " + SENTINEL)}, path, pickle_protocol=4)
    with zipfile.ZipFile(path) as z:
        pkl = z.read(next(n for n in z.namelist() if n.endswith("/data.pkl")))
    assert any(op.name == "STACK_GLOBAL" for op, _, _ in pickletools.genops(pkl)), "expected STACK_GLOBAL"
    expected["code"]["code_protocol4_os_system.pt"] = os.system.__module__ + ".system"
    assert not os.path.exists(SENTINEL), "a fixture ran its payload"

    # torch < 0.4: _rebuild_tensor, in the legacy stream format; a view with an offset and a stride.
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    pre04 = {"weight": Pre04Tensor(base), "bias": Pre04Tensor(torch.randn(6, dtype=torch.float64)),
             "row": Pre04Tensor(base[2])}
    path = os.path.join(OUT, "pre04_tensors.pt")
    torch.save(pre04, path, _use_new_zipfile_serialization=False)
    loaded = torch.load(path, weights_only=True)
    expected["read"]["pre04_tensors.pt"] = {"tensors": describe(loaded), "aliases": {}}

    # Tied weights: one tensor object under two names.
    embed = torch.randn(8, 4)
    tied = {"embed.weight": embed, "lm_head.weight": embed, "norm.weight": torch.ones(4)}
    path = os.path.join(OUT, "tied_weights.bin")
    torch.save(tied, path)
    loaded = torch.load(path, weights_only=True)
    assert loaded["embed.weight"].data_ptr() == loaded["lm_head.weight"].data_ptr()
    expected["read"]["tied_weights.bin"] = {"tensors": describe(loaded),
                                            "aliases": {"lm_head.weight": "embed.weight"}}

    score = torch.tensor(0.25)
    lightning = {"epoch": 3, "global_step": 120, "pytorch-lightning_version": "2.1.0",
                 "state_dict": {"layer.weight": torch.randn(3, 2)},
                 "optimizer_states": [{"state": {}, "param_groups": [{"lr_milli": 100, "params": [0]}]}],
                 "lr_schedulers": [{"last_epoch": 3}],
                 "callbacks": {"ModelCheckpoint": {"current_score": score, "best_model_score": score,
                                                   "monitor": "val_loss"}}}
    path = os.path.join(OUT, "lightning_scores.ckpt")
    torch.save(lightning, path)
    loaded = torch.load(path, weights_only=True)
    expected["read"]["lightning_scores.ckpt"] = {
        "tensors": describe(loaded),
        "aliases": {"callbacks.ModelCheckpoint.best_model_score": "callbacks.ModelCheckpoint.current_score"}}

    # A clean Keras-style HDF5 weights file (keras_like.weights.h5 holds a NaN on purpose).
    import h5py
    import numpy as np
    with h5py.File(os.path.join(OUT, "clean_weights.h5"), "w") as f:
        layer = f.create_group("layers/dense/vars")
        layer.create_dataset("0", data=np.arange(48, dtype=np.float32).reshape(6, 8) / 7)
        layer.create_dataset("1", data=np.linspace(-1, 1, 8, dtype=np.float32))

    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
