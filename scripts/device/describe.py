"""What torch itself reads back from a checkpoint, as JSON: every tensor's name, dtype, shape and the
SHA-256 of its bytes (C order, little-endian, as stored). Shared by the programs under scripts/device/,
which write this next to each file they make, so ckptcheck's readers can be compared with torch there
(tests/data/torch211/)."""
import hashlib
import json

import torch

# torch dtype -> ckptcheck's (safetensors') name; dtypes with no safetensors name get a descriptive one.
DTYPE_NAMES = {
    "float32": "F32", "float64": "F64", "float16": "F16", "bfloat16": "BF16",
    "int64": "I64", "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8", "bool": "BOOL",
    "uint16": "U16", "uint32": "U32", "uint64": "U64",
    "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2", "float8_e4m3fnuz": "F8_E4M3FNUZ",
    "float8_e5m2fnuz": "F8_E5M2FNUZ", "float8_e8m0fnu": "F8_E8M0", "float4_e2m1fn_x2": "F4_E2M1FN_X2",
    "complex32": "C32", "complex64": "C64", "complex128": "C128",
}


def dtype_name(dtype):
    short = str(dtype).replace("torch.", "")
    return DTYPE_NAMES.get(short, short.upper())


def tensor_bytes(t):
    """The tensor's elements as stored: contiguous, every dtype read as its raw bytes."""
    t = t.detach()
    if hasattr(t, "full_tensor"):  # a DTensor: the whole tensor, gathered
        t = t.full_tensor()
    if t.device.type != "cpu":
        t = t.cpu()
    t = t.contiguous().reshape(-1)
    if t.dtype != torch.uint8:
        t = t.view(torch.uint8)
    return t.numpy().tobytes()


def entry(name, t):
    return {"name": name, "dtype": dtype_name(t.dtype), "torch_dtype": str(t.dtype).replace("torch.", ""),
            "shape": list(t.shape), "sha256": hashlib.sha256(tensor_bytes(t)).hexdigest()}


def flatten(obj, prefix=""):
    """(dotted name, tensor) for every tensor in nested dicts, lists and tuples, in order."""
    if isinstance(obj, torch.Tensor):
        yield prefix, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from flatten(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from flatten(v, f"{prefix}.{i}" if prefix else str(i))


def describe(obj):
    return [entry(n, t) for n, t in flatten(obj)]


def write(path, record):
    record.setdefault("torch", torch.__version__)
    with open(path, "w") as f:
        json.dump(record, f, indent=1, sort_keys=True)
        f.write("\n")
