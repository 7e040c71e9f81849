"""The CLI's hostile inputs (tests/cli/hostile_inputs_test.cpp) and the gate's code-running pickles,
through the binding: each call returns a report or raises a ckptcheck.Error, the interpreter
neither crashes nor hangs, under the CLI suite's 2 GiB address-space limit."""
import io
import json
import os
import pickle
import subprocess
import sys
import zipfile

from conftest import DATA


def torch_zip(path, pickle_bytes, storage=b""):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", pickle_bytes)
        z.writestr("archive/byteorder", "little")
        if storage:
            z.writestr("archive/data/0", storage)
    return path


def hostile_files(d):
    deep = "[" * 200000 + "]" * 200000
    header = ('{"x":' + deep + "}").encode()
    header += b" " * ((8 - len(header) % 8) % 8)
    files = []
    with open(os.path.join(d, "deep.safetensors"), "wb") as f:
        f.write(len(header).to_bytes(8, "little") + header)
    files.append(os.path.join(d, "deep.safetensors"))
    cycle = []
    cycle.append(cycle)
    files.append(torch_zip(os.path.join(d, "cycle.pt"), pickle.dumps(cycle, protocol=2)))
    with open(os.path.join(DATA, "pickle", "memo-chain-fuzz.pkl"), "rb") as f:
        files.append(torch_zip(os.path.join(d, "fuzz.pt"), f.read()))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("archive/data.pkl", pickle.dumps({}, protocol=2))
    with open(os.path.join(d, "half.pt"), "wb") as f:
        f.write(buf.getvalue()[: len(buf.getvalue()) // 2])
    files.append(os.path.join(d, "half.pt"))
    open(os.path.join(d, "empty.bin"), "wb").close()
    files.append(os.path.join(d, "empty.bin"))
    with open(os.path.join(d, "lfs.bin"), "w") as f:
        f.write("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize 123\n" % ("a" * 64))
    files.append(os.path.join(d, "lfs.bin"))
    for folder in ("gate", "pytorch"):
        for name in sorted(os.listdir(os.path.join(DATA, folder))):
            if name.endswith((".pt", ".ckpt", ".bin", ".h5")):
                files.append(os.path.join(DATA, folder, name))
    return files


# Runs in a child with the address space capped: a report or a ckptcheck.Error for every call.
CHILD = r"""
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
import ckptcheck
out = []
for path in json.load(sys.stdin):
    for call in (lambda p: ckptcheck.verify(p), lambda p: ckptcheck.verify(p, quick=True),
                 lambda p: ckptcheck.inspect(p, stats=True)):
        try:
            r = call(path)
            out.append([path, "ok" if r.ok else "failed", ""])
        except ckptcheck.Error as e:
            out.append([path, type(e).__name__, str(e)])
print(json.dumps(out))
"""


def test_every_hostile_input_is_answered_by_a_report_or_an_error(tmp_path):
    files = hostile_files(str(tmp_path))
    r = subprocess.run([sys.executable, "-c", CHILD], input=json.dumps(files), capture_output=True, text=True,
                       timeout=240)
    assert r.returncode == 0, "the interpreter died (%d):\n%s" % (r.returncode, r.stderr[-3000:])
    answers = json.loads(r.stdout)
    assert len(answers) == 3 * len(files)
    by_file = {}
    for path, outcome, message in answers:
        by_file.setdefault(os.path.basename(path), []).append(outcome)
        if outcome not in ("ok", "failed"):
            assert outcome in ("ReadError", "DamageError", "UsageError"), (path, outcome, message)
            assert "internal error" not in message
            assert os.path.basename(path) in message, (path, message)
    # The damaged and code-running ones are never "ok" to verify.
    for name in ("deep.safetensors", "cycle.pt", "fuzz.pt", "half.pt", "empty.bin", "lfs.bin",
                 "malicious_os_system.pt", "code_posix_popen.pt"):
        assert by_file[name][0] != "ok", (name, by_file[name])
