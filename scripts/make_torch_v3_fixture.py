#!/usr/bin/env python3
"""Writes tests/data/torch_readback/v3_layout.pt and v3_layout.pt.torch.json: a torch.save zip laid out
as torch >= 2.1 writes the dtypes of torch.storage._new_dtypes() (float8_*, uint16/32/64, complex32):
each tensor is torch._utils._rebuild_tensor_v3(UntypedStorage, offset, size, stride, requires_grad,
hooks, torch.<dtype>), its storage's persistent id ('storage', torch.UntypedStorage, key, location,
nbytes). Debian's torch 1.13 cannot write these, so this file is crafted from torch 2.x's
Tensor._reduce_ex_internal and serialization.persistent_id with stand-ins under torch's names; it runs
without torch. The real files written by torch 2.11 come from scripts/device/gpu_checks.sh
(tests/data/torch211). The JSON beside it uses describe.py's layout (name, dtype, shape, sha256)."""
import collections
import hashlib
import io
import json
import os
import pickle
import sys
import types
import zipfile

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "torch_readback")

# Stand-ins registered under torch's module names, so pickle writes exactly torch's GLOBALs.
torch = types.ModuleType("torch")
utils = types.ModuleType("torch._utils")
sys.modules.update({"torch": torch, "torch._utils": utils})


def _rebuild_tensor_v3(*args):
    raise AssertionError("never called: this file is only written")


_rebuild_tensor_v3.__module__, _rebuild_tensor_v3.__qualname__ = "torch._utils", "_rebuild_tensor_v3"
utils._rebuild_tensor_v3 = _rebuild_tensor_v3
UntypedStorage = type("UntypedStorage", (), {"__module__": "torch"})
torch.UntypedStorage = UntypedStorage


class DType:
    def __init__(self, name):
        self.name, self.__module__ = name, "torch"
        setattr(torch, name, self)

    def __reduce__(self):  # torch.dtype pickles as the global torch.<name>
        return self.name


class Storage:
    def __init__(self, key, data):
        self.key, self.data = key, data


class Tensor:
    def __init__(self, storage, offset, size, stride, dtype):
        self.args = (storage, offset, size, stride, False, collections.OrderedDict(), dtype)

    def __reduce__(self):
        return (_rebuild_tensor_v3, self.args)


class Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            return ("storage", UntypedStorage, obj.key, "cuda:0", len(obj.data))
        return None


def main():
    e4m3, e5m2, u16, u64, c32 = (DType(n) for n in ("float8_e4m3fn", "float8_e5m2", "uint16", "uint64",
                                                     "complex32"))
    raw = {"0": bytes(range(0x30, 0x36)), "1": b"".join(v.to_bytes(2, "little") for v in (1, 2, 300, 4, 65535, 6)),
           "2": b"".join(v.to_bytes(8, "little") for v in (2**64 - 1, 7)), "3": bytes([0x3c, 0x00, 0x00, 0xc0] * 2),
           "4": bytes([0x3c, 0xbc, 0x01, 0x80])}
    st = {k: Storage(k, v) for k, v in raw.items()}
    # (name, storage, offset, size, stride, dtype, element size)
    tensors = [("w_fp8", st["0"], 0, (2, 3), (3, 1), e4m3, 1), ("u16", st["1"], 0, (6,), (1,), u16, 2),
               ("u16_view", st["1"], 2, (3,), (1,), u16, 2), ("u64", st["2"], 0, (2,), (1,), u64, 8),
               ("c32", st["3"], 0, (2,), (1,), c32, 4), ("e5m2_t", st["4"], 0, (2, 2), (1, 2), e5m2, 1)]
    state = {"model": {n: Tensor(s, o, size, stride, d) for n, s, o, size, stride, d, _ in tensors}, "step": 3}
    buf = io.BytesIO()
    Pickler(buf, protocol=2).dump(state)
    path = os.path.join(OUT, "v3_layout.pt")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("v3_layout/data.pkl", buf.getvalue())
        z.writestr("v3_layout/byteorder", "little")
        for k, v in raw.items():
            z.writestr(f"v3_layout/data/{k}", v)
        z.writestr("v3_layout/version", "3\n")
    names = {"float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2", "uint16": "U16", "uint64": "U64",
             "complex32": "C32"}
    described = []
    for n, s, o, size, stride, d, es in tensors:  # the elements in C order, as torch would read them
        idx = [()]
        for dim in size:
            idx = [i + (k,) for i in idx for k in range(dim)]
        data = b"".join(s.data[(o + sum(a * b for a, b in zip(i, stride))) * es:][:es] for i in idx)
        described.append({"name": "model." + n, "dtype": names[d.name], "torch_dtype": d.name, "shape": list(size),
                          "sha256": hashlib.sha256(data).hexdigest()})
    with open(path + ".torch.json", "w") as f:
        json.dump({"file": "v3_layout.pt", "writer": "scripts/make_torch_v3_fixture.py (crafted, not torch)",
                   "tensors": described}, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
