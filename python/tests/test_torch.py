"""ckptcheck.torch: save is atomic and sealed, load verifies before torch sees a byte. These tests
run torch.save/torch.load of Debian's PyTorch in child processes, so the package's own import
stays torch-free in this process."""
import json
import os
import shutil
import subprocess
import sys

import pytest

import ckptcheck
from conftest import DATA


def run_python(code, *args):
    r = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout, r.stderr


SAVE = r"""
import sys, torch, ckptcheck.torch
torch.manual_seed(0)
state = {"model": torch.nn.Linear(4, 3).state_dict(), "step": 7, "rng": torch.get_rng_state()}
print(ckptcheck.torch.save(state, sys.argv[1], key=sys.argv[2] if len(sys.argv) > 2 else None))
"""

LOAD = r"""
import sys, torch, ckptcheck, ckptcheck.torch
calls = []
real_load = torch.load
torch.load = lambda *a, **k: calls.append(k.get("weights_only")) or real_load(*a, **k)
try:
    state = ckptcheck.torch.load(sys.argv[1], pubkey=sys.argv[2] if len(sys.argv) > 2 else None)
except ckptcheck.VerifyError as e:
    print("REFUSED", [f.code for f in e.report.errors], "torch.load calls:", calls)
    print(e)
    sys.exit(3)
print("LOADED", sorted(state) if isinstance(state, dict) else type(state).__name__, "weights_only:", calls)
"""


def test_save_is_sealed_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "state.pt"
    code, out, err = run_python(SAVE, path)
    assert code == 0, err
    assert out.strip() == str(path)
    assert sorted(os.listdir(tmp_path)) == ["state.pt", "state.pt.ckptcheck.seal.json"]
    report = ckptcheck.verify(path)
    assert report.ok and report.sealed, report.errors
    code, out, err = run_python(LOAD, path)
    assert code == 0, err
    assert "LOADED ['model', 'rng', 'step'] weights_only: [True]" in out
    # Saving again replaces the file and its seal (the old seal would refuse the new bytes).
    code, _, err = run_python(SAVE, path)
    assert code == 0, err
    assert ckptcheck.verify(path).ok


def test_load_refuses_a_flipped_bit_and_torch_never_sees_the_file(tmp_path):
    path = tmp_path / "state.pt"
    assert run_python(SAVE, path)[0] == 0
    seal = json.load(open(str(path) + ".ckptcheck.seal.json"))
    weight = next(t for t in seal["files"][0]["tensors"] if t["name"].endswith("weight"))
    with open(path, "r+b") as f:
        f.seek(weight["offset"] + 3)
        b = f.read(1)
        f.seek(weight["offset"] + 3)
        f.write(bytes([b[0] ^ 0x40]))
    code, out, _ = run_python(LOAD, path)
    assert code == 3, out
    assert "seal_tensor_sha256_mismatch" in out and "torch.load calls: []" in out


def test_load_refuses_a_code_running_pickle_naming_the_callable(tmp_path):
    code, out, _ = run_python(LOAD, os.path.join(DATA, "pytorch", "malicious_os_system.pt"))
    assert code == 3, out
    assert "pickle_global_refused" in out and "system" in out and "torch.load calls: []" in out


def test_signed_save_loads_only_under_its_key(tmp_path):
    key, pub, other = tmp_path / "key.pem", tmp_path / "pub.pem", tmp_path / "other.pem"
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", str(key)], check=True)
    subprocess.run(["openssl", "pkey", "-in", str(key), "-pubout", "-out", str(pub)], check=True)
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", str(tmp_path / "o.pem")], check=True)
    subprocess.run(["openssl", "pkey", "-in", str(tmp_path / "o.pem"), "-pubout", "-out", str(other)], check=True)
    path = tmp_path / "ckpt" / "state.pt"
    path.parent.mkdir()
    assert run_python(SAVE, path, key)[0] == 0
    code, out, err = run_python(LOAD, path, pub)
    assert code == 0, out + err
    code, out, _ = run_python(LOAD, path, other)
    assert code == 3 and "torch.load calls: []" in out, out


def test_a_directory_checkpoint_round_trips_and_a_stale_file_is_refused(tmp_path):
    save_dir = r"""
import sys, torch, ckptcheck.torch
for step in (1, 2):
    torch.manual_seed(step)
    ckptcheck.torch.save_dir({"model": torch.nn.Linear(4, 3).state_dict(), "progress": {"step": step}},
                             sys.argv[1] + "/step_%d" % step)
"""
    code, _, err = run_python(save_dir, tmp_path)
    assert code == 0, err
    assert sorted(os.listdir(tmp_path / "step_2")) == ["ckptcheck.seal.json", "model.pt", "progress.pt"]
    code, out, err = run_python(LOAD, tmp_path / "step_2")
    assert code == 0, err
    assert "LOADED ['model', 'progress']" in out
    shutil.copy(tmp_path / "step_1" / "model.pt", tmp_path / "step_2" / "model.pt")
    code, out, _ = run_python(LOAD, tmp_path / "step_2")
    assert code == 3 and "seal_file_sha256_mismatch" in out and "torch.load calls: []" in out, out
    code, _, err = run_python(save_dir, tmp_path)  # step_1 exists: a directory is written once
    assert code != 0 and "already exists" in err
