"""The safe path for PyTorch users: save that a crash cannot tear and that seals what it wrote, and
load that verifies before torch sees a byte.

    import ckptcheck.torch
    ckptcheck.torch.save(state, "ckpt/step_100.pt")          # temp name, fsync, rename, seal
    state = ckptcheck.torch.load("ckpt/step_100.pt")         # verify, then weights_only=True

torch itself is imported on the first call, never by `import ckptcheck` or `import ckptcheck.torch`.
"""
import contextlib as _contextlib
import importlib as _importlib
import os as _os
import shutil as _shutil
import threading as _threading

import ckptcheck as _ckptcheck

from .durable import fsync, fsync_parent
from .errors import UsageError

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


def _save_file(obj, path):
    # By name: torch then writes through its own C++ stream, where a Python file object would get
    # every record as a copied bytes object.
    _torch().save(obj, path)
    fsync(path)


def save(obj, path, *, key=None):
    """torch.save(obj, path) that a crash cannot leave half-written, sealed for verify.

    Writes to a temporary name in the same directory, fsyncs it, renames it to `path`, fsyncs the
    directory, then seals it (`ckptcheck seal`: every tensor's SHA-256 in PATH.ckptcheck.seal.json)
    and, with `key` (a PEM Ed25519 private key), signs the seal. A crash before the rename leaves
    the previous file at `path`; a crash between the rename and the seal leaves the new file
    unsealed (verify still runs the pickle gate on it). Returns `path`.
    """
    path = _os.fspath(path)
    if _os.path.isdir(path):
        raise UsageError("%s: is a directory; save writes one file (save_dir writes a directory)" % path)
    temp = _temp_name(path)
    try:
        _save_file(obj, temp)
        _os.replace(temp, path)
    except BaseException:
        with _contextlib.suppress(FileNotFoundError):
            _os.remove(temp)
        raise
    fsync_parent(path)
    _remove_seal(path)
    _ckptcheck.seal(path, key=key)
    return path


def save_dir(parts, path, *, key=None):
    """A checkpoint directory of torch.save files: `parts` maps a name to an object, written as
    `path/<name>.pt`, fsynced, in a temporary directory renamed to `path` (so the directory is whole
    or absent; an existing `path` is refused), then sealed as one (`path/ckptcheck.seal.json`) and
    signed with `key`. load(path) returns the same dict. Returns `path`."""
    path = _os.fspath(path)
    if not isinstance(parts, dict) or not parts:
        raise UsageError("`parts` must be a non-empty dict of name -> object, got %r" % type(parts).__name__)
    for name in parts:
        if not isinstance(name, str) or not name or "/" in name or name.startswith("."):
            raise UsageError("`parts`: %r is not a file name (no '/', no leading '.')" % (name,))
    if _os.path.lexists(path):
        raise UsageError("%s: already exists; a checkpoint directory is written once" % path)
    temp = _temp_name(path)
    try:
        _os.mkdir(temp)
        for name, obj in parts.items():
            _save_file(obj, _os.path.join(temp, name + ".pt"))
        fsync(temp)
        _os.rename(temp, path)
    except BaseException:
        _shutil.rmtree(temp, ignore_errors=True)
        raise
    fsync_parent(path)
    _ckptcheck.seal(path, key=key)
    return path


_allowlist_lock = _threading.Lock()


@_contextlib.contextmanager
def _allowing(torch, allow_globals):
    """torch.load(weights_only=True) that also accepts the globals verify was told to accept: the
    user reviewed them (verify's --allow-global); every other global stays refused."""
    if not allow_globals:
        yield
        return
    resolved = {}
    for full in allow_globals:
        module, _, name = full.rpartition(".")
        try:
            resolved[full] = getattr(_importlib.import_module(module), name)
        except (ImportError, AttributeError, ValueError) as e:
            raise UsageError("`allow_globals`: cannot resolve %r: %s" % (full, e)) from None
    if hasattr(torch.serialization, "safe_globals"):  # torch >= 2.5
        with torch.serialization.safe_globals(list(resolved.values())):
            yield
        return
    unpickler = torch._weights_only_unpickler
    with _allowlist_lock:
        original = unpickler._get_allowed_globals
        allowed = dict(original())
        allowed.update(resolved)
        unpickler._get_allowed_globals = lambda: allowed
        try:
            yield
        finally:
            unpickler._get_allowed_globals = original


def load(path, *, map_location=None, allow_globals=(), pubkey=None):
    """ckptcheck.verify(path), then torch.load(path, weights_only=True).

    verify runs first (the pickle gate: no global outside torch.load(weights_only=True)'s
    allowlist and `allow_globals`; the seal's hashes, when sealed; the signature, with `pubkey`).
    A refused checkpoint raises VerifyError (its .report names every finding) and torch is never
    handed the file. `path` is one torch.save file (returns what was saved) or a checkpoint
    directory of .pt files (returns {name without .pt: object}). `map_location` is torch.load's.
    """
    path = _os.fspath(path)
    globals_list = [allow_globals] if isinstance(allow_globals, str) else list(allow_globals)
    _ckptcheck.verify(path, allow_globals=globals_list, pubkey=pubkey).raise_if_failed()
    torch = _torch()
    with _allowing(torch, globals_list):
        if not _os.path.isdir(path):
            return torch.load(path, map_location=map_location, weights_only=True)
        names = sorted(n for n in _os.listdir(path) if n.endswith(".pt"))
        if not names:
            raise UsageError("%s: a checkpoint directory with no .pt file" % path)
        return {n[:-3]: torch.load(_os.path.join(path, n), map_location=map_location, weights_only=True)
                for n in names}
