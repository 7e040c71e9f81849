"""Files and baselines for ckptcheck_bench's PyTorch rows, run with Debian's /usr/bin/python3.

  torch_baselines.py check                       exit 0 when torch imports (else the rows say "not available")
  torch_baselines.py write-torch-save PATH N     torch.save of {"layer.<i>.weight": randn(4096, 4096)} x N
  torch_baselines.py write-dcp DIR N             the same state as a PyTorch 1.13 DCP directory
  torch_baselines.py stats PATH                  the baseline: torch.load + per-tensor min, max, mean,
                                                 std, NaN and Inf counts, and SHA-256 of its bytes

The state is seeded, so the torch.save file and the DCP directory hold the same tensor bytes.
DCP is written as scripts/make_pytorch_fixtures.py writes its 1.13 fixture (same dataclass patch).
"""
import hashlib
import importlib.util
import os
import sys


def state(n):
    import torch
    gen = torch.Generator().manual_seed(19)
    return {f"layer.{i}.weight": torch.randn(4096, 4096, generator=gen) for i in range(n)}


def write_torch_save(path, n):
    import torch
    torch.save(state(n), path)
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def write_dcp(out, n):
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location(
        "make_pytorch_fixtures", os.path.join(here, "..", "scripts", "make_pytorch_fixtures.py"))
    fixtures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fixtures)
    FileSystemWriter, save_state_dict = fixtures.import_dcp_113()
    os.makedirs(out, exist_ok=True)
    save_state_dict(state(n), FileSystemWriter(out), no_dist=True)


def stats(path):
    import torch
    loaded = torch.load(path, map_location="cpu")
    out = []
    for name, t in loaded.items():
        t = t.contiguous()
        finite = torch.isfinite(t)
        out.append((name, t.min().item(), t.max().item(), t.mean().item(), t.std().item(),
                    int(torch.isnan(t).sum()), int((~finite).sum() - torch.isnan(t).sum()),
                    hashlib.sha256(t.numpy()).hexdigest()))
    print(len(out), "tensors")


def main(argv):
    if argv[:1] == ["check"]:
        import torch  # noqa: F401
        return 0
    if argv[:1] == ["write-torch-save"] and len(argv) == 3:
        write_torch_save(argv[1], int(argv[2]))
        return 0
    if argv[:1] == ["write-dcp"] and len(argv) == 3:
        write_dcp(argv[1], int(argv[2]))
        return 0
    if argv[:1] == ["stats"] and len(argv) == 2:
        stats(argv[1])
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
