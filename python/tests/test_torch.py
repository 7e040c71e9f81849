"""ckptcheck.torch: save is atomic and sealed, load verifies before torch sees a byte. torch is
Debian's PyTorch 1.13 (/usr/bin/python3), imported once for this file."""
import json
import os
import shutil
import subprocess

import pytest
import torch

import ckptcheck
import ckptcheck.torch
from conftest import DATA


@pytest.fixture
def torch_loads(monkeypatch):
    """Every torch.load call from here on, by its weights_only argument."""
    calls = []
    real = torch.load
    monkeypatch.setattr(torch, "load", lambda *a, **k: calls.append(k.get("weights_only")) or real(*a, **k))
    return calls


def a_state(seed=0):
    torch.manual_seed(seed)
    return {"model": torch.nn.Linear(4, 3).state_dict(), "step": 7, "rng": torch.get_rng_state()}


def flip(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x40]))


def key_pair(tmp_path, name):
    key, pub = tmp_path / (name + ".pem"), tmp_path / (name + ".pub")
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", str(key)], check=True)
    subprocess.run(["openssl", "pkey", "-in", str(key), "-pubout", "-out", str(pub)], check=True)
    return key, pub


def test_save_is_sealed_and_leaves_no_temporary(tmp_path, torch_loads):
    path = tmp_path / "state.pt"
    state = a_state()
    assert ckptcheck.torch.save(state, path) == str(path)
    assert sorted(os.listdir(tmp_path)) == ["state.pt", "state.pt.ckptcheck.seal.json"]
    report = ckptcheck.verify(path, weights_only=True)
    assert report.ok and report.sealed, report.errors
    loaded = ckptcheck.torch.load(path)
    assert torch_loads == [True]
    assert sorted(loaded) == ["model", "rng", "step"] and loaded["step"] == 7
    assert torch.equal(loaded["model"]["weight"], state["model"]["weight"])
    # Saving again replaces the file and its seal (the old seal would refuse the new bytes).
    ckptcheck.torch.save(a_state(1), path)
    assert sorted(os.listdir(tmp_path)) == ["state.pt", "state.pt.ckptcheck.seal.json"]
    assert torch.equal(ckptcheck.torch.load(path)["model"]["weight"], a_state(1)["model"]["weight"])


def test_load_refuses_a_flipped_bit_and_torch_never_sees_the_file(tmp_path, torch_loads):
    path = tmp_path / "state.pt"
    ckptcheck.torch.save(a_state(), path)
    seal = json.load(open(str(path) + ".ckptcheck.seal.json"))
    weight = next(t for t in seal["files"][0]["tensors"] if t["name"].endswith("weight"))
    flip(path, weight["offset"] + 3)
    with pytest.raises(ckptcheck.VerifyError) as e:
        ckptcheck.torch.load(path)
    assert "seal_tensor_sha256_mismatch" in [f.code for f in e.value.report.errors]
    assert torch_loads == []


def test_load_refuses_a_code_running_pickle_naming_the_callable(torch_loads):
    with pytest.raises(ckptcheck.VerifyError, match="system") as e:
        ckptcheck.torch.load(os.path.join(DATA, "pytorch", "malicious_os_system.pt"))
    assert [f.code for f in e.value.report.errors] == ["pickle_global_refused"]
    assert torch_loads == []


def test_signed_save_loads_only_under_its_key(tmp_path, torch_loads):
    key, pub = key_pair(tmp_path, "key")
    _, other = key_pair(tmp_path, "other")
    path = tmp_path / "ckpt" / "state.pt"
    path.parent.mkdir()
    ckptcheck.torch.save(a_state(), path, key=key)
    assert sorted(os.listdir(path.parent)) == ["state.pt", "state.pt.ckptcheck.seal.json",
                                               "state.pt.ckptcheck.seal.json.sig"]
    assert ckptcheck.torch.load(path, pubkey=pub)["step"] == 7
    with pytest.raises(ckptcheck.VerifyError):
        ckptcheck.torch.load(path, pubkey=other)
    assert torch_loads == [True]


def test_a_directory_checkpoint_round_trips_and_a_stale_file_is_refused(tmp_path, torch_loads):
    for step in (1, 2):
        torch.manual_seed(step)
        ckptcheck.torch.save_dir({"model": torch.nn.Linear(4, 3).state_dict(), "progress": {"step": step}},
                                 tmp_path / ("step_%d" % step))
    assert sorted(os.listdir(tmp_path)) == ["step_1", "step_2"]
    assert sorted(os.listdir(tmp_path / "step_2")) == ["ckptcheck.seal.json", "model.pt", "progress.pt"]
    loaded = ckptcheck.torch.load(tmp_path / "step_2")
    assert sorted(loaded) == ["model", "progress"] and loaded["progress"] == {"step": 2}
    assert torch_loads == [True, True]
    shutil.copy(tmp_path / "step_1" / "model.pt", tmp_path / "step_2" / "model.pt")
    with pytest.raises(ckptcheck.VerifyError) as e:
        ckptcheck.torch.load(tmp_path / "step_2")
    assert "seal_file_sha256_mismatch" in [f.code for f in e.value.report.errors]
    assert torch_loads == [True, True]
    with pytest.raises(ValueError, match="already exists"):  # a directory is written once
        ckptcheck.torch.save_dir({"model": {}}, tmp_path / "step_1")


def test_allow_globals_reach_torch_load_too(tmp_path, torch_loads):
    # A reviewed global passes verify and torch's weights-only unpickler, for this call only.
    import datetime
    path = tmp_path / "delta.pt"
    ckptcheck.torch.save({"day": datetime.timedelta(days=3)}, path)
    with pytest.raises(ckptcheck.VerifyError, match="datetime.timedelta"):
        ckptcheck.torch.load(path)
    assert ckptcheck.torch.load(path, allow_globals=["datetime.timedelta"])["day"] == datetime.timedelta(days=3)
    with pytest.raises(ckptcheck.VerifyError):
        ckptcheck.torch.load(path)
    assert torch_loads == [True]


def test_what_this_torch_refuses_after_verify_is_a_ckptcheck_error(tmp_path, torch_loads):
    # collections.Counter is on newer torch's weights-only allowlist (and verify's), not on 1.13's.
    import collections
    path = tmp_path / "counter.pt"
    ckptcheck.torch.save({"counts": collections.Counter(a=1)}, path)
    with pytest.raises(ckptcheck.Error, match="collections.Counter"):
        ckptcheck.torch.load(path)
    assert torch_loads == [True]
