"""ckptcheck from Python: verify, seal, inspect and diff any checkpoint, with the engines the
`ckptcheck` CLI runs (a binding over its C++ library, never a subprocess).

    import ckptcheck
    report = ckptcheck.verify("ckpt/step_100")      # a Report: .ok, .kind, .errors, .to_dict()
    ckptcheck.seal("model.pt")                      # after each torch.save: hashes beside the file

`ckptcheck.torch` saves and loads through verify (it imports torch when first used);
`ckptcheck.contract` keeps the restore drill's contract from a training loop. Importing this
package imports neither torch nor numpy, and loads the native library on the first call. Every
failure is a `ckptcheck.Error` (errors.py).
"""
import os as _os

from ._engine import native as _library
from .errors import DamageError, Error, ReadError, UsageError, VerifyError
from .reports import DiffReport, Finding, InspectReport, Report, SealResult

__all__ = ["verify", "seal", "inspect", "diff", "Report", "Finding", "SealResult", "InspectReport",
           "DiffReport", "Error", "UsageError", "ReadError", "DamageError", "VerifyError", "__version__"]


def _loads(text):
    import json  # on first use: `import ckptcheck` stays a few milliseconds

    return json.loads(text)


def _path(value, what):
    if isinstance(value, bytes):
        value = _os.fsdecode(value)
    if not isinstance(value, (str, _os.PathLike)):
        raise UsageError("`%s` must be a path (str or os.PathLike), not %s" % (what, type(value).__name__))
    value = _os.fspath(value)
    if not value or "\0" in value:
        raise UsageError("`%s` must be a non-empty path without NUL bytes, got %r" % (what, value))
    return value


def _jobs(jobs):
    if isinstance(jobs, bool) or not isinstance(jobs, int) or not 0 <= jobs <= 1024:
        raise UsageError("`jobs` must be an int from 0 (one per core) to 1024, got %r" % (jobs,))
    return jobs


def verify(path, *, weights_only=False, allow_globals=(), pubkey=None, jobs=0, quick=False):
    """Verify a checkpoint (or a root's latest) offline: `ckptcheck verify PATH --json`.

    path: checkpoint dir (step_XXXXXXXX), checkpoint root, sealed or DCP dir, HF Trainer folder or
        tensor file
    weights_only: a foreign checkpoint (DCP dir, torch.save file, HF folder) may hold model weights
        only (--weights-only)
    allow_globals: accept this pickle global (MODULE.NAME, repeatable) after reviewing it; every
        other global outside torch.load(weights_only=True)'s allowlist and the kind's trust profile
        (DCP, Megatron, TorchScript classes used as data) fails verify (--allow-global; a list: the
        lines of an --allow-globals-from file are the same thing)
    pubkey: require a signature that verifies under this Ed25519 key (manifest.json.sig, or the
        seal's .sig for other kinds); a checkpoint without one fails (--pubkey)
    jobs: shards hashed in parallel (default: all cores) (--jobs; 0 = all cores)
    quick: structure, headers, pickles, resume state and sizes only; no payload byte is read (--quick)

    Returns a Report; a damaged or refused checkpoint is a Report with ok False (call
    report.raise_if_failed() to get a VerifyError instead). Raises UsageError (a ValueError) for an
    option the checkpoint's kind cannot honour, ReadError when the path is not a readable
    checkpoint: where the CLI exits 2.
    """
    globals_list = [allow_globals] if isinstance(allow_globals, str) else list(allow_globals)
    for g in globals_list:
        if not isinstance(g, str) or not g:
            raise UsageError("`allow_globals` must hold MODULE.NAME strings, got %r" % (g,))
    key = "" if pubkey is None else _path(pubkey, "pubkey")
    text = _library().verify(_path(path, "path"), bool(weights_only), globals_list, key, _jobs(jobs), bool(quick))
    return Report(_loads(text))


def seal(path, *, key=None, jobs=0):
    """Write a hashed seal (every file's and tensor's SHA-256) beside any checkpoint, for verify:
    `ckptcheck seal PATH --json` (and `ckptcheck sign PATH --key KEY` with `key`).

    path: a checkpoint directory (DCP, HF Trainer, ...) or a single file
    key: PEM Ed25519 private key: the seal is signed (<seal>.sig), so verify(pubkey=...) accepts it
    jobs: files hashed in parallel (default: all cores) (--jobs; 0 = all cores)

    Returns a SealResult. Raises UsageError when a seal already exists (a seal written over a
    damaged checkpoint would bless the damage), ReadError when the path cannot be read.
    """
    return _seal(path, key, jobs, ())


def _seal(path, key, jobs, written):
    """seal(), also taking the digests of files hashed as they were written (`written`: finished
    _native.HashingTail objects) instead of reading them back: how ckptcheck.torch.save seals."""
    key_path = "" if key is None else _path(key, "key")
    return SealResult(_loads(_library().seal(_path(path, "path"), key_path, _jobs(jobs), list(written))))


def inspect(path, *, stats=False, tensor=None):
    """List the tensors, hashes and metadata of a checkpoint or tensor file:
    `ckptcheck inspect PATH --json`.

    path: checkpoint dir or root, tensor file (native, safetensors, HDF5, .pt) or
        model.safetensors.index.json
    stats: add min, max, mean, L2 norm and NaN/Inf counts per tensor (--stats)
    tensor: inspect only this tensor (--tensor)

    Returns an InspectReport (.ok: every recorded hash and CRC-32 agrees with the bytes). Nothing
    from the file is executed: pickle globals are named with their risk, never imported.
    """
    if tensor is not None and not isinstance(tensor, str):
        raise UsageError("`tensor` must be a tensor name (str), got %r" % (tensor,))
    return InspectReport(_loads(_library().inspect(_path(path, "path"), bool(stats), tensor or "")))


def diff(a, b, *, rtol=0, atol=0):
    """Compare two checkpoints or tensor files tensor by tensor: `ckptcheck diff A B --json`.

    a, b: checkpoint dir or root, tensor file or safetensors index
    rtol: relative tolerance (floating tensors) (--rtol)
    atol: absolute tolerance (floating tensors) (--atol)

    Returns a DiffReport (.identical: every tensor on both sides, within tolerance).
    """
    for name, value in (("rtol", rtol), ("atol", atol)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
            raise UsageError("`%s` must be a non-negative number, got %r" % (name, value))
    return DiffReport(_loads(_library().diff(_path(a, "a"), _path(b, "b"), float(rtol), float(atol))))


def __getattr__(name):
    # `ckptcheck.torch` and `ckptcheck.contract` on first use: torch is imported only when a
    # function of ckptcheck.torch runs.
    if name == "__version__":
        return _library().version()
    if name in ("torch", "contract"):
        import importlib

        return importlib.import_module("." + name, __name__)
    raise AttributeError("module 'ckptcheck' has no attribute %r" % name)
