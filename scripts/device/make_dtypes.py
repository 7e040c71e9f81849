#!/usr/bin/env python3
"""Writes OUT/dtypes.pt (torch.save) and OUT/dtypes.safetensors holding one small tensor of every dtype
this torch has and each format takes (bf16, fp16, the fp8 variants, uint16/32/64, bool, complex...),
plus a view into a shared storage at an offset and a 0-d tensor, and next to each what torch reads
back (OUT/<file>.torch.json). Usage: make_dtypes.py OUT_DIR"""
import io
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import describe  # noqa: E402

CANDIDATES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool",
              "uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
              "float8_e8m0fnu", "float4_e2m1fn_x2", "complex32", "complex64", "complex128"]


def make(dtype, shape, gen):
    """Real values where torch can convert to the dtype, else well-defined raw bits."""
    n = 1
    for d in shape:
        n *= d
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    if dtype.is_complex:
        z = torch.randn(shape, dtype=torch.complex64, generator=gen)
        return z.to(dtype)
    if dtype.is_floating_point:
        try:
            return (torch.randn(shape, generator=gen) * 4).to(dtype)
        except (RuntimeError, TypeError):
            pass
    if not dtype.is_floating_point:
        try:
            info = torch.iinfo(dtype)
            lo, hi = max(info.min, -1000), min(info.max, 60000)
            return torch.randint(lo, hi, shape, generator=gen, dtype=torch.int64).to(dtype)
        except (RuntimeError, TypeError):
            pass
    size = torch.empty((), dtype=dtype).element_size()
    raw = torch.randint(0, 128, (n * size,), generator=gen, dtype=torch.uint8)
    return raw.view(dtype).reshape(shape)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    gen = torch.Generator().manual_seed(45)
    tensors, missing = {}, []
    for i, name in enumerate(CANDIDATES):
        dtype = getattr(torch, name, None)
        if dtype is None:
            missing.append({"dtype": name, "why": "not in this torch"})
            continue
        try:
            t = make(dtype, (2, 3 + i % 3), gen)
            probe = io.BytesIO()
            torch.save({name: t}, probe)  # some dtypes torch can build but not save (1.13: complex32)
            probe.seek(0)
            torch.load(probe, weights_only=True)
            tensors[name] = t
        except Exception as e:  # a dtype torch names but cannot build, save or load here
            missing.append({"dtype": name, "why": f"{type(e).__name__}: {e}"[:200]})
    base = torch.arange(24, dtype=torch.float32)
    state = dict(tensors)
    state["shared_base"] = base
    state["shared_view"] = base[6:18].view(3, 4)  # same storage, offset 6 elements
    state["transposed"] = torch.arange(12, dtype=torch.int32).view(3, 4).t()  # non-contiguous strides
    state["scalar"] = torch.tensor(2.5, dtype=torch.float64)
    state["step"] = 45  # a plain int beside the tensors
    torch.save(state, os.path.join(out, "dtypes.pt"))
    back = torch.load(os.path.join(out, "dtypes.pt"), weights_only=True)
    describe.write(os.path.join(out, "dtypes.pt.torch.json"),
                   {"file": "dtypes.pt", "writer": "torch.save", "tensors": describe.describe(back),
                    "missing_dtypes": missing})

    try:
        import safetensors
        from safetensors.torch import load_file, save_file
    except ImportError as e:
        raise SystemExit(f"dtypes.pt written; no safetensors file: {e}")
    st, refused = {}, []
    for name, t in tensors.items():
        try:
            save_file({name: t}, os.path.join(out, "probe.safetensors"))
            st[name] = t
        except Exception as e:  # safetensors has no name for this dtype
            refused.append({"dtype": name, "why": f"{type(e).__name__}: {e}"[:200]})
    if os.path.exists(os.path.join(out, "probe.safetensors")):
        os.remove(os.path.join(out, "probe.safetensors"))
    save_file(st, os.path.join(out, "dtypes.safetensors"), metadata={"format": "pt", "made_by": "make_dtypes.py"})
    back = load_file(os.path.join(out, "dtypes.safetensors"))
    describe.write(os.path.join(out, "dtypes.safetensors.torch.json"),
                   {"file": "dtypes.safetensors", "writer": f"safetensors {safetensors.__version__}",
                    "tensors": describe.describe({k: back[k] for k in sorted(back)}),
                    "missing_dtypes": missing + refused})
    print(f"dtypes.pt: {len(tensors)} dtypes; safetensors: {len(st)}; not written: "
          f"{[m['dtype'] for m in missing + refused]}")


if __name__ == "__main__":
    main()
