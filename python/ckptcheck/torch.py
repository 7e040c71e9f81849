"""The safe path for PyTorch users: save that a crash cannot tear and that seals what it wrote, and
load that verifies before torch sees a byte.

    import ckptcheck.torch
    ckptcheck.torch.save(state, "ckpt/step_100.pt")          # temp name, fsync, rename, seal
    state = ckptcheck.torch.load("ckpt/step_100.pt")         # verify, then a weights-only load

torch itself is imported on the first call, never by `import ckptcheck` or `import ckptcheck.torch`.
"""
import contextlib as _contextlib
import importlib as _importlib
import os as _os
import pickle as _pickle
import shutil as _shutil
import threading as _threading

import ckptcheck as _ckptcheck

from .durable import fsync, fsync_parent
from .errors import Error, UsageError
from .restricted_pickle import restricted_pickle_module

__all__ = ["save", "save_dir", "load"]


def _torch():
    import torch  # noqa: the one place this module imports torch

    return torch


def _remove_seal(path):
    """The seal of what was at `path` before (and its signature): stale once the new bytes are there."""
    seal = _os.path.join(path, "ckptcheck.seal.json") if _os.path.isdir(path) else path + ".ckptcheck.seal.json"
    for f in (seal, seal + ".sig"):
        with _contextlib.suppress(FileNotFoundError):
            _os.remove(f)


def _temp_name(path):
    head, tail = _os.path.split(_os.path.abspath(path))
    return _os.path.join(head, ".%s.tmp-%d-%d" % (tail, _os.getpid(), _threading.get_ident()))


def _save_hashed(torch, obj, path):
    """torch.save(obj, path) by name into a new file that the library hashes as it grows (the
    file's and each seal piece's SHA-256, on the core torch.save leaves idle); finish() fsyncs it
    while each tensor's bytes are hashed. Sealing it afterwards reads nothing back: this is what
    keeps save near torch.save + fsync (docs/python.md, bench --only python)."""
    written = _ckptcheck._library().HashingTail(path)
    torch.save(obj, path)
    written.finish()
    return written


def save(obj, path, *, key=None):
    """torch.save(obj, path) that a crash cannot leave half-written, sealed for verify.

    torch.save writes `path`'s name inside a temporary directory beside it, through a file that
    hashes the bytes on their way to the disk (the seal's SHA-256 of the file, its pieces and every
    tensor: nothing is read back) and is fsynced; the seal is written from those digests and, with
    `key` (a PEM Ed25519 private key), signed; then the file is renamed to `path`, its seal beside
    it (PATH.ckptcheck.seal.json), and the directory fsynced.
    A crash before the rename leaves the previous file at `path`; between the two renames, the new
    file unsealed (verify still runs the pickle gate on it). Saving over a file replaces its seal.
    Returns `path`.
    """
    path = _os.fsdecode(_os.fspath(path))  # str, bytes or os.PathLike, as verify takes them
    if _os.path.isdir(path):
        raise UsageError("%s: is a directory; save writes one file (save_dir writes a directory)" % path)
    head, tail = _os.path.split(_os.path.abspath(path))
    temp_dir = _temp_name(path)
    _os.mkdir(temp_dir)
    try:
        temp = _os.path.join(temp_dir, tail)  # the seal records the file's own name: the final one
        written = _save_hashed(_torch(), obj, temp)
        _ckptcheck._seal(temp, key, 0, [written])
        seal_files = [n for n in sorted(_os.listdir(temp_dir)) if n != tail]  # the seal and its .sig
        _remove_seal(path)
        _os.replace(temp, path)
        for name in seal_files:
            _os.replace(_os.path.join(temp_dir, name), _os.path.join(head, name))
        fsync(head)
    finally:
        _shutil.rmtree(temp_dir, ignore_errors=True)
    return path


def save_dir(parts, path, *, key=None):
    """A checkpoint directory of torch.save files: `parts` maps a name to an object, written as
    `<name>.pt` into a temporary directory beside `path` (each hashed as it is written and
    fsynced, as save does), sealed as one (`ckptcheck.seal.json` inside it, signed with `key`), then renamed to `path` and its parent
    fsynced: the directory appears whole and sealed, or not at all. An existing `path` is refused.
    load(path) returns the same dict. Returns `path`."""
    path = _os.fsdecode(_os.fspath(path))  # str, bytes or os.PathLike, as verify takes them
    if not isinstance(parts, dict) or not parts:
        raise UsageError("`parts` must be a non-empty dict of name -> object, got %r" % type(parts).__name__)
    for name in parts:
        if not isinstance(name, str) or not name or "/" in name or name.startswith("."):
            raise UsageError("`parts`: %r is not a file name (no '/', no leading '.')" % (name,))
    if _os.path.lexists(path):
        raise UsageError("%s: already exists; a checkpoint directory is written once" % path)
    temp = _temp_name(path)
    _os.mkdir(temp)
    try:
        torch = _torch()
        written = [_save_hashed(torch, obj, _os.path.join(temp, name + ".pt")) for name, obj in parts.items()]
        _ckptcheck._seal(temp, key, 0, written)
        fsync(temp)
        _os.rename(temp, path)
    except BaseException:
        _shutil.rmtree(temp, ignore_errors=True)
        raise
    fsync_parent(path)
    return path


def _resolve(allow_globals):
    resolved = {}
    for full in allow_globals:
        module, _, name = full.rpartition(".")
        try:
            resolved[full] = getattr(_importlib.import_module(module), name)
        except (ImportError, AttributeError, ValueError) as e:
            raise UsageError("`allow_globals`: cannot resolve %r: %s" % (full, e)) from None
    return resolved


# Data types on newer torch's weights-only allowlist (and verify's gate, formats/pickle_globals.cpp)
# that torch 1.13's lacks.
_NEWER_TORCH_ALLOWS = ("collections.Counter", "builtins.set", "builtins.bytearray", "builtins.complex",
                       "_codecs.encode", "torch.device")


def _loader(torch, allow_globals):
    """(context, torch.load keywords) that load only what verify's gate accepted: weights_only=True
    with the reviewed globals where torch has safe_globals (>= 2.5); elsewhere a restricted
    unpickler (restricted_pickle.py says why) over torch's own allowlist and those globals."""
    reviewed = _resolve(allow_globals)
    if hasattr(torch.serialization, "safe_globals"):
        return torch.serialization.safe_globals(list(reviewed.values())), {"weights_only": True}
    allowed = dict(torch._weights_only_unpickler._get_allowed_globals())
    allowed.update(_resolve(_NEWER_TORCH_ALLOWS))
    allowed.update(reviewed)
    return _contextlib.nullcontext(), {"pickle_module": restricted_pickle_module(allowed)}


def _load_restricted(torch, f, map_location, pickle_module):
    """torch.load's own readers with `pickle_module`: torch 1.13's torch.load(weights_only=False)
    replaces any pickle_module it is given by pickle itself, so its private readers are called."""
    serialization = torch.serialization
    with serialization._open_file_like(f, "rb") as opened:
        if serialization._is_zipfile(opened):
            with serialization._open_zipfile_reader(opened) as zip_file:
                return serialization._load(zip_file, map_location, pickle_module, encoding="utf-8")
        return serialization._legacy_load(opened, map_location, pickle_module, encoding="utf-8")


def load(path, *, map_location=None, allow_globals=(), pubkey=None):
    """ckptcheck.verify(path), then torch.load(path, weights_only=True) or, on a torch whose
    weights-only mode cannot read floats (1.13), torch.load with a restricted unpickler that
    resolves only the same allowlist (restricted_pickle.py).

    verify runs first, with weights_only=True (the pickle gate: no global outside
    torch.load(weights_only=True)'s allowlist and `allow_globals`; the seal's hashes, when sealed;
    the signature, with `pubkey`; not whether the state is complete for a resume).
    A refused checkpoint raises VerifyError (its .report names every finding) and torch is never
    handed the file. `path` is one torch.save file (returns what was saved) or a checkpoint
    directory of .pt files (returns {name without .pt: object}). `map_location` is torch.load's.
    """
    path = _os.fsdecode(_os.fspath(path))  # str, bytes or os.PathLike, as verify takes them
    globals_list = [allow_globals] if isinstance(allow_globals, str) else list(allow_globals)
    # weights_only: a file of model weights is a fine thing to load; whether a checkpoint holds
    # everything a resume needs is ckptcheck.verify's question, not torch.load's.
    report = _ckptcheck.verify(path, weights_only=True, allow_globals=globals_list, pubkey=pubkey)
    report.raise_if_failed()
    torch = _torch()
    context, how = _loader(torch, globals_list)

    def load_one(f):
        kind = report.kind if f == path else "torch_save"  # a directory's .pt files: verified above
        if kind not in ("torch_save", "torch_save_legacy"):
            # torch.load reads torch.save's formats only: a safetensors file would fail with
            # "invalid load key", a TorchScript archive is refused by the gate above.
            hint = {"safetensors": "read it with safetensors.torch.load_file(path)",
                    "hdf5": "read it with h5py"}.get(kind, "ckptcheck.torch.load reads torch.save files")
            raise UsageError("%s: a %s file, not a torch.save file: %s" % (f, kind, hint))
        try:
            if "pickle_module" in how:
                return _load_restricted(torch, f, map_location, how["pickle_module"])
            return torch.load(f, map_location=map_location, **how)
        except _pickle.UnpicklingError as e:
            # The second layer: nothing ran (the unpickler refused before constructing anything it
            # does not allow), but the gate and torch's unpickler disagree about this file.
            raise Error("%s: torch %s's restricted load refused what ckptcheck's gate read as data (%s); nothing "
                        "ran. The two readers disagree about this file: please report it"
                        % (f, torch.__version__, str(e).rpartition("WeightsUnpickler error: ")[2]), 2) from None
        except RuntimeError as e:
            if map_location is None and "CUDA" in str(e):
                raise UsageError("%s: saved on a CUDA device, and this torch has none: pass map_location='cpu' "
                                 "(torch says: %s)" % (f, str(e).splitlines()[0])) from None
            raise

    with context:
        if not _os.path.isdir(path):
            return load_one(path)
        if report.kind not in ("sealed_directory", "model_folder"):
            # A DCP, DeepSpeed or trainer folder is read by its own loader, and verify judged it as
            # that checkpoint: a stray .pt at its top is no file verify vouched for.
            raise UsageError("%s: a %s checkpoint: ckptcheck.torch.load reads a torch.save file or a folder of .pt "
                             "files (save_dir's); load this one with its own loader" % (path, report.kind))
        names = sorted(n for n in _os.listdir(path) if n.endswith(".pt"))
        if not names:
            raise UsageError("%s: a checkpoint directory with no .pt file" % path)
        return {n[:-3]: load_one(_os.path.join(path, n)) for n in names}
