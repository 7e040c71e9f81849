#!/usr/bin/env python3
"""What the real readers see in a file, without running any payload: the reference for
differential tests of ckptcheck's readers (scripts/differential_fuzz.py).

    /usr/bin/python3 scripts/loader_oracle.py FILE [FILE...]   one JSON object per file
    /usr/bin/python3 scripts/loader_oracle.py --serve          reads paths on stdin, one JSON line each

Written for Debian's torch 1.13. Nothing is unpickled for real: pickles are walked by CPython's C
unpickler (the one torch.load uses) with find_class returning an inert stand-in class (recording the
module and name; nothing is imported) and persistent_load returning None, so every REDUCE/BUILD/NEWOBJ
acts on stand-ins. TorchScript archives are never handed to torch.jit.load.

Output (one object per file):
  {"path": str, "size": int,
   "torch_dispatch": "torch_save_zip" | "torchscript" | "zip_unreadable" | "tar" | "legacy" | "npy",
        what torch.load(path) does: PK\\3\\4 first -> miniz (PyTorchFileReader), TorchScript when
        'constants.pkl' is a record; else tarfile.open(fileobj, 'r:') succeeding -> the pre-0.4 tar
        reader; else the legacy pickle stream. "npy" (\x93NUMPY): numpy.load's reading instead, its
        object pickle listed under "pickles" with source "npy".
   "zip": null | {"torch": {"archive": str|null, "records": [{"name", "size", "sha256"}], "error": str|null},
                  "zipfile": {"records": [{"name", "size", "sha256"}], "error": str|null},
                  "agree": bool, "disagreements": [str]},
        torch's records are get_all_records() (archive prefix stripped) with the bytes get_record(name)
        returns; zipfile's are every central-directory entry (full names, the entry's own bytes).
        agree: the same record names (zipfile's minus the archive prefix) and, for each, zipfile's
        read(prefix + name) has the bytes torch reads.
   "pickles": [{"source": "stream" | "<record>" | "tar:<member>", "start": int, "end": int|null,
                "globals": [{"module", "name"}], "value": str, "error": str|null}],
        the pickles the loader would unpickle, in order, with the [start, end) offsets the C
        unpickler consumed from a real file (f.tell() after each load, after the same zip probe and
        tar attempt torch makes first, so buffering matches); a loader stop (bad magic number,
        protocol version, unpickling error) ends the list.
   "legacy": null | {"storages": [{"key", "type", "numel", "start", "end"}], "end": int,
                     "trailing_bytes": int, "error": str|null},
        for the legacy stream: where each raw storage sits after the storage-keys pickle.
   "tar": {"opens": bool, "members": [str], "error": str|null},
   "globals": ["module.name", ...]}   every global the loader would look up, sorted, unique.
"""
import hashlib
import io
import json
import os
import pickle
import struct
import sys
import tarfile
import zipfile

MAGIC_NUMBER = 0x1950A86A20F9469CFC6C
PROTOCOL_VERSION = 1001
ELEMENT_SIZE = {"Double": 8, "Float": 4, "Half": 2, "BFloat16": 2, "Long": 8, "Int": 4, "Short": 2,
                "Char": 1, "Byte": 1, "Bool": 1, "ComplexFloat": 8, "ComplexDouble": 16, "QInt8": 1,
                "QUInt8": 1, "QInt32": 4, "QUInt4x2": 1, "QUInt2x4": 1}
MAX_PICKLES = 64


def sha256(b):
    return hashlib.sha256(b).hexdigest()


# ---- inert unpickling -------------------------------------------------------------------------

class Stub:
    """What every global becomes: callable, buildable, appendable, and does nothing."""
    __slots__ = ("__dict__",)

    def __new__(cls, *args, **kwargs):
        return object.__new__(cls)

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        return Stub()

    def __setstate__(self, state):
        pass

    def append(self, item):
        pass

    def extend(self, items):
        pass

    def __setitem__(self, key, value):
        pass

    def __repr__(self):
        return f"<{type(self).__name__}>"


class InertUnpickler(pickle.Unpickler):
    """CPython's C unpickler; globals become fresh Stub subclasses, persistent ids are recorded."""

    def __init__(self, f, seen):
        super().__init__(f, encoding="utf-8")
        self.seen = seen
        self.pids = []

    def find_class(self, module, name):
        self.seen.append({"module": str(module), "name": str(name)})
        return type(f"{module}.{name}", (Stub,), {"__slots__": ()})

    def persistent_load(self, pid):
        self.pids.append(pid)
        return None


def inert_load(f, source):
    """One pickle from f's position: (record, value, pids)."""
    start = f.tell()
    seen = []
    u = InertUnpickler(f, seen)
    rec = {"source": source, "start": start, "end": None, "globals": seen, "value": "", "error": None}
    value = None
    try:
        value = u.load()
        rec["value"] = repr(value)[:200]
    except Exception as e:  # noqa: BLE001  (anything a hostile pickle provokes)
        rec["error"] = f"{type(e).__name__}: {e}"[:300]
    try:
        rec["end"] = f.tell()
    except Exception:  # noqa: BLE001
        pass
    return rec, value, u.pids


# ---- containers -------------------------------------------------------------------------------

def tar_view(path):
    out = {"opens": False, "members": [], "error": None}
    try:
        with open(path, "rb") as f, tarfile.open(fileobj=f, mode="r:", format=tarfile.PAX_FORMAT) as t:
            out["opens"] = True
            out["members"] = t.getnames()
    except Exception as e:  # noqa: BLE001
        out["error"] = f"{type(e).__name__}: {e}"[:300]
    return out


def torch_zip_view(path):
    import torch
    out = {"archive": None, "records": [], "error": None}
    try:
        r = torch._C.PyTorchFileReader(path)
        for name in r.get_all_records():
            data = r.get_record(name)
            out["records"].append({"name": name, "size": len(data), "sha256": sha256(data)})
        out["_reader"] = r
    except Exception as e:  # noqa: BLE001
        out["error"] = f"{type(e).__name__}: {e}"[:300]
    return out


def zipfile_view(path):
    out = {"records": [], "error": None, "_by_name": {}}
    try:
        with zipfile.ZipFile(path) as z:
            for info in z.infolist():
                data = z.read(info)
                out["records"].append({"name": info.filename, "size": len(data), "sha256": sha256(data)})
            for name in z.namelist():  # zipfile's lookup by name (the last duplicate wins)
                out["_by_name"][name] = sha256(z.read(name))
    except Exception as e:  # noqa: BLE001
        out["error"] = f"{type(e).__name__}: {e}"[:300]
    return out


def zip_view(path):
    t, z = torch_zip_view(path), zipfile_view(path)
    by_name = z.pop("_by_name")
    reader = t.pop("_reader", None)
    prefix = None
    if z["records"]:
        first = z["records"][0]["name"]
        prefix = first.split("/", 1)[0] + "/" if "/" in first else ""
        t["archive"] = prefix.rstrip("/")
    diffs = []
    if t["error"] or z["error"]:
        diffs.append("torch: %s; zipfile: %s" % (t["error"], z["error"]))
    else:
        tnames = sorted(r["name"] for r in t["records"])
        znames = sorted(r["name"][len(prefix):] if r["name"].startswith(prefix) else r["name"]
                        for r in z["records"])
        if tnames != znames:
            diffs.append(f"record names differ: torch {tnames} zipfile {znames}")
        for r in t["records"]:
            zs = by_name.get(prefix + r["name"])
            if zs != r["sha256"]:
                diffs.append(f"{r['name']}: torch reads {r['sha256'][:16]}, zipfile reads {str(zs)[:16]}")
    return {"torch": t, "zipfile": z, "agree": not diffs, "disagreements": diffs}, reader


# ---- the loader's path ------------------------------------------------------------------------

def legacy_pickles(path):
    """The pickles torch 1.13's _legacy_load reads from a real file, and where its storages sit."""
    import torch
    pickles = []
    legacy = {"storages": [], "end": None, "trailing_bytes": None, "error": None}
    with open(path, "rb") as f:
        # What torch.load does first, so the BufferedReader's state (and so a FRAME's reading) match.
        torch.serialization._is_zipfile(f)
        try:
            tarfile.open(fileobj=f, mode="r:", format=tarfile.PAX_FORMAT).close()
        except tarfile.TarError:
            torch.serialization._is_zipfile(f)
        f.seek(0)
        storages = {}
        for step in ("magic", "protocol", "sys_info", "object", "storage_keys"):
            rec, value, pids = inert_load(f, "stream")
            pickles.append(rec)
            if rec["error"]:
                legacy["error"] = f"{step} pickle: {rec['error']}"
                return pickles, legacy
            if step == "magic" and value != MAGIC_NUMBER:
                legacy["error"] = "invalid magic number"
                return pickles, legacy
            if step == "protocol" and value != PROTOCOL_VERSION:
                legacy["error"] = "invalid protocol version"
                return pickles, legacy
            for pid in pids:
                if isinstance(pid, tuple) and len(pid) >= 5 and pid[0] in ("storage", b"storage"):
                    storages.setdefault(pid[2], (type(pid[1]).__name__ if not isinstance(pid[1], type)
                                                 else pid[1].__name__, pid[4]))
            if step == "storage_keys":
                keys = value if isinstance(value, list) else []
                for key in keys:
                    start = f.tell()
                    head = f.read(8)
                    if len(head) < 8:
                        legacy["error"] = f"storage {key!r}: truncated size"
                        return pickles, legacy
                    numel, = struct.unpack("<q", head)
                    tname = storages.get(key, ("?", None))[0].rsplit(".", 1)[-1]
                    esize = ELEMENT_SIZE.get(tname[:-len("Storage")] if tname.endswith("Storage") else "", 1)
                    nbytes = numel * esize
                    if numel < 0 or nbytes > os.path.getsize(path) - f.tell():
                        legacy["error"] = f"storage {key!r}: {numel} elements run past the end of the file"
                        return pickles, legacy
                    f.seek(nbytes, os.SEEK_CUR)
                    legacy["storages"].append({"key": str(key), "type": tname, "numel": numel,
                                               "start": start, "end": f.tell()})
        legacy["end"] = f.tell()
        legacy["trailing_bytes"] = os.path.getsize(path) - f.tell()
    return pickles, legacy


def tar_pickles(path):
    """The first pickle of each member the pre-0.4 reader unpickles (storages, tensors, pickle);
    partial: later pickles in `storages`/`tensors` follow raw data this does not walk."""
    pickles = []
    try:
        with open(path, "rb") as f, tarfile.open(fileobj=f, mode="r:", format=tarfile.PAX_FORMAT) as t:
            for member in ("storages", "tensors", "pickle"):
                try:
                    data = t.extractfile(member).read()
                except Exception as e:  # noqa: BLE001
                    pickles.append({"source": f"tar:{member}", "start": 0, "end": None, "globals": [],
                                    "value": "", "error": f"{type(e).__name__}: {e}"[:300]})
                    break
                rec, _, _ = inert_load(io.BytesIO(data), f"tar:{member}")
                pickles.append(rec)
                if rec["error"]:
                    break
    except Exception as e:  # noqa: BLE001
        pickles.append({"source": "tar", "start": 0, "end": None, "globals": [], "value": "",
                        "error": f"{type(e).__name__}: {e}"[:300]})
    return pickles


def npy_pickles(path):
    """An .npy whose dtype holds objects is a header then one pickle (numpy.load(allow_pickle=True))."""
    import ast
    with open(path, "rb") as f:
        head = f.read(10)
        major = head[6] if len(head) > 6 else 0
        n = struct.unpack("<H", head[8:10])[0] if major == 1 else struct.unpack("<I", head[8:10] + f.read(2))[0]
        try:
            header = ast.literal_eval(f.read(n).decode("latin1"))
            has_objects = "O" in str(header.get("descr"))
        except Exception as e:  # noqa: BLE001
            return [{"source": "npy", "start": 0, "end": None, "globals": [], "value": "",
                     "error": f"bad header: {type(e).__name__}: {e}"[:300]}]
        if not has_objects:
            return []
        rec, _, _ = inert_load(f, "npy")
        return [rec]


def examine(path):
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        first4 = f.read(4)
    out = {"path": path, "size": size, "torch_dispatch": None, "zip": None, "pickles": [],
           "legacy": None, "tar": tar_view(path), "globals": []}
    if first4 == b"\x93NUM":
        out["torch_dispatch"] = "npy"  # not torch's: numpy.load(allow_pickle=True) reads it
        out["pickles"] = npy_pickles(path)
    elif first4 == b"PK\x03\x04":
        out["zip"], reader = zip_view(path)
        torch_side = out["zip"]["torch"]
        if torch_side["error"]:
            out["torch_dispatch"] = "zip_unreadable"
        else:
            names = [r["name"] for r in torch_side["records"]]
            out["torch_dispatch"] = "torchscript" if "constants.pkl" in names else "torch_save_zip"
            for rec_name in (["data.pkl", "constants.pkl"] if out["torch_dispatch"] == "torchscript"
                             else ["data.pkl"]):
                if rec_name in names:
                    rec, _, _ = inert_load(io.BytesIO(reader.get_record(rec_name)), rec_name)
                    out["pickles"].append(rec)
    elif out["tar"]["opens"]:
        out["torch_dispatch"] = "tar"
        out["pickles"] = tar_pickles(path)
    else:
        out["torch_dispatch"] = "legacy"
        out["pickles"], out["legacy"] = legacy_pickles(path)
    out["globals"] = sorted({f"{g['module']}.{g['name']}" for p in out["pickles"] for g in p["globals"]})
    return out


def main(argv):
    if argv[1:] == ["--serve"]:
        for line in sys.stdin:
            path = line.rstrip("\n")
            try:
                res = examine(path)
            except Exception as e:  # noqa: BLE001
                res = {"path": path, "error": f"{type(e).__name__}: {e}"[:300]}
            sys.stdout.write(json.dumps(res, sort_keys=True) + "\n")
            sys.stdout.flush()
        return 0
    if len(argv) < 2 or argv[1].startswith("-"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    for path in argv[1:]:
        try:
            res = examine(path)
        except Exception as e:  # noqa: BLE001
            res = {"path": path, "error": f"{type(e).__name__}: {e}"[:300]}
        print(json.dumps(res, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    import warnings
    warnings.filterwarnings("ignore")
    sys.exit(main(sys.argv))
