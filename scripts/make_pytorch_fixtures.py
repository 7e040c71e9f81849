#!/usr/bin/python3
"""Writes the PyTorch fixtures for tests/pytorch_file_test.cpp into tests/data/pytorch/.

Run with Debian's interpreter, which has python3-torch 1.13:  /usr/bin/python3 scripts/make_pytorch_fixtures.py
The malicious files are only *pickled* here (__reduce__ is consulted when saving, never called);
nothing in them runs unless someone unpickles them with the real pickle module.
"""
import hashlib
import json
import os
import pickletools
import zipfile

import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "pytorch")
DTYPE = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
         torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
         torch.bool: "BOOL"}


def flatten(obj, prefix=""):
    if isinstance(obj, torch.Tensor):
        yield prefix, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from flatten(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from flatten(v, f"{prefix}.{i}" if prefix else str(i))


def raw_bytes(t):
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16; its bits are an int16
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def describe(obj):
    return [{"name": n, "dtype": DTYPE[t.dtype], "shape": list(t.shape),
             "sha256": hashlib.sha256(raw_bytes(t)).hexdigest()} for n, t in flatten(obj)]


def first_refused_global(path):
    with zipfile.ZipFile(path) as z:
        pkl = z.read(next(n for n in z.namelist() if n.endswith("/data.pkl")))
    allowed = {"collections OrderedDict", "torch._utils _rebuild_tensor_v2", "torch._utils _rebuild_parameter"}
    for op, arg, _ in pickletools.genops(pkl):
        if op.name == "GLOBAL" and arg not in allowed and not arg.startswith("torch ") :
            return arg.replace(" ", ".")
    raise RuntimeError(f"{path}: no foreign global")


class RunsShell:
    def __reduce__(self):
        return (os.system, ("touch /tmp/ckptcheck_fixture_was_executed",))


class RunsEval:
    def __reduce__(self):
        return (eval, ("__import__('os').system('touch /tmp/ckptcheck_fixture_was_executed')",))


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(1234)
    model = torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.ReLU(), torch.nn.Linear(6, 3))
    state = model.state_dict()
    base = torch.arange(40, dtype=torch.float32)
    state["half_weight"] = torch.randn(4, 5).half()
    state["bf16_weight"] = torch.randn(3, 7).bfloat16()
    state["step_counts"] = torch.arange(6, dtype=torch.int64).reshape(2, 3)
    state["mask"] = torch.tensor([True, False, True, True])
    state["slice_view"] = base[10:22].view(3, 4)  # contiguous view with storage offset 10
    state["slice_base"] = base
    fixtures = {"model_state.pt": state}

    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(2, 8)).sum().backward()
    opt.step()
    fixtures["adamw_state.pt"] = opt.state_dict()

    expected = {"files": {}, "malicious": {}}
    for name, obj in fixtures.items():
        path = os.path.join(OUT, name)
        torch.save(obj, path)
        expected["files"][name] = describe(obj)
    for name, obj in {"malicious_os_system.pt": {"weight": torch.zeros(2), "x": RunsShell()},
                      "malicious_eval.pt": {"weight": torch.zeros(2), "x": RunsEval()}}.items():
        path = os.path.join(OUT, name)
        torch.save(obj, path)
        expected["malicious"][name] = first_refused_global(path)
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
