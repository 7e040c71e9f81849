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
from conftest import DATA, key_pair


RESTRICTED = "restricted"


@pytest.fixture
def torch_loads(monkeypatch):
    """Every load of a torch file from here on: RESTRICTED when it could construct only
    allowlisted objects (torch.load(weights_only=True), or torch's reader with ckptcheck's
    restricted unpickler on torch 1.13), else "UNSAFE"."""
    calls = []
    real_load, real_reader = torch.load, torch.serialization._load

    def load(*a, **k):
        calls.append(RESTRICTED if k.get("weights_only") else "UNSAFE")
        return real_load(*a, **k)

    def reader(zip_file, map_location, pickle_module, *a, **k):
        calls.append(RESTRICTED if pickle_module.__name__ == "ckptcheck.restricted_pickle" else "UNSAFE")
        return real_reader(zip_file, map_location, pickle_module, *a, **k)

    monkeypatch.setattr(torch, "load", load)
    monkeypatch.setattr(torch.serialization, "_load", reader)
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


def test_save_is_sealed_and_leaves_no_temporary(tmp_path, torch_loads):
    path = tmp_path / "state.pt"
    state = a_state()
    assert ckptcheck.torch.save(state, path) == str(path)
    assert sorted(os.listdir(tmp_path)) == ["state.pt", "state.pt.ckptcheck.seal.json"]
    report = ckptcheck.verify(path, weights_only=True)
    assert report.ok and report.sealed, report.errors
    loaded = ckptcheck.torch.load(path)
    assert torch_loads == [RESTRICTED]
    assert sorted(loaded) == ["model", "rng", "step"] and loaded["step"] == 7
    assert torch.equal(loaded["model"]["weight"], state["model"]["weight"])
    # Saving again replaces the file and its seal (the old seal would refuse the new bytes).
    ckptcheck.torch.save(a_state(1), path)
    assert sorted(os.listdir(tmp_path)) == ["state.pt", "state.pt.ckptcheck.seal.json"]
    assert torch.equal(ckptcheck.torch.load(path)["model"]["weight"], a_state(1)["model"]["weight"])


def test_the_seal_taken_as_torch_writes_equals_one_read_back_from_disk(tmp_path):
    """save hashes the file, its 1 MiB pieces and its tensor records as torch writes them: the seal
    must be byte for byte the one `ckptcheck seal` writes by reading the same bytes back."""
    torch.manual_seed(3)
    # Records above and below the writer's 64 KiB threshold, a file of a few pieces.
    state = {"big": torch.randn(700, 1000), "medium": torch.randn(20000), "small": torch.randn(10), "step": 3}
    saved = tmp_path / "saved" / "state.pt"
    saved.parent.mkdir()
    ckptcheck.torch.save(state, saved)
    copy = tmp_path / "copy" / "state.pt"
    copy.parent.mkdir()
    shutil.copyfile(saved, copy)
    ckptcheck.seal(copy)
    sealed = open(str(saved) + ".ckptcheck.seal.json", "rb").read()
    assert sealed == open(str(copy) + ".ckptcheck.seal.json", "rb").read()
    files = json.loads(sealed)["files"]
    assert len(files[0]["pieces"]) == 3 and len(files[0]["tensors"]) == 3


def test_a_save_torch_cannot_finish_leaves_the_previous_file_and_its_seal(tmp_path):
    class Unpicklable:
        def __reduce__(self):
            raise RuntimeError("cannot pickle this")

    path = tmp_path / "state.pt"
    ckptcheck.torch.save(a_state(), path)
    before = open(path, "rb").read()
    with pytest.raises(RuntimeError, match="cannot pickle this"):
        ckptcheck.torch.save({"w": torch.ones(100000), "bad": Unpicklable()}, path)
    assert sorted(os.listdir(tmp_path)) == ["state.pt", "state.pt.ckptcheck.seal.json"]  # no temporary
    assert open(path, "rb").read() == before
    assert ckptcheck.verify(path, weights_only=True).ok


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
    assert torch_loads == [RESTRICTED]


def test_a_directory_checkpoint_round_trips_and_a_stale_file_is_refused(tmp_path, torch_loads):
    for step in (1, 2):
        torch.manual_seed(step)
        ckptcheck.torch.save_dir({"model": torch.nn.Linear(4, 3).state_dict(), "progress": {"step": step}},
                                 tmp_path / ("step_%d" % step))
    assert sorted(os.listdir(tmp_path)) == ["step_1", "step_2"]
    assert sorted(os.listdir(tmp_path / "step_2")) == ["ckptcheck.seal.json", "model.pt", "progress.pt"]
    loaded = ckptcheck.torch.load(tmp_path / "step_2")
    assert sorted(loaded) == ["model", "progress"] and loaded["progress"] == {"step": 2}
    assert torch_loads == [RESTRICTED, RESTRICTED]
    shutil.copy(tmp_path / "step_1" / "model.pt", tmp_path / "step_2" / "model.pt")
    with pytest.raises(ckptcheck.VerifyError) as e:
        ckptcheck.torch.load(tmp_path / "step_2")
    assert "seal_file_sha256_mismatch" in [f.code for f in e.value.report.errors]
    assert torch_loads == [RESTRICTED, RESTRICTED]
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
    assert torch_loads == [RESTRICTED]


def test_an_optimizer_state_loads_with_its_floats(tmp_path, torch_loads):
    # torch 1.13's weights_only=True cannot read a float; the restricted unpickler can.
    model = torch.nn.Linear(4, 3)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.25)
    model(torch.randn(2, 4)).sum().backward()
    optimizer.step()
    path = ckptcheck.torch.save(optimizer.state_dict(), tmp_path / "optimizer.pt")
    loaded = ckptcheck.torch.load(path)
    assert loaded["param_groups"][0]["lr"] == 0.25 and loaded["param_groups"][0]["betas"] == (0.9, 0.999)
    assert torch.equal(loaded["state"][0]["exp_avg"], optimizer.state_dict()["state"][0]["exp_avg"])
    assert torch_loads == [RESTRICTED]


def test_the_unpickler_refuses_a_global_even_if_verify_were_bypassed(tmp_path, monkeypatch):
    # Defence in depth: were the file swapped between verify and the load (a race), the restricted
    # unpickler would still resolve nothing outside the allowlist: posix.system is never called.
    marker = tmp_path / "executed"
    evil = tmp_path / "evil.pt"
    data = open(os.path.join(DATA, "pytorch", "malicious_os_system.pt"), "rb").read()
    touched = b"touch /tmp/ckptcheck_fixture_was_executed"
    assert touched in data
    import zipfile
    with zipfile.ZipFile(os.path.join(DATA, "pytorch", "malicious_os_system.pt")) as z, \
            zipfile.ZipFile(evil, "w", zipfile.ZIP_STORED) as out:
        for item in z.infolist():
            body = z.read(item)
            if item.filename.endswith("data.pkl"):
                body = body.replace(b"\x58" + len(touched).to_bytes(4, "little") + touched,
                                    b"\x58" + len(b"touch " + bytes(marker)).to_bytes(4, "little") + b"touch " + bytes(marker))
            out.writestr(item, body)
    monkeypatch.setattr(ckptcheck, "verify", lambda *a, **k: type("Passed", (), {"raise_if_failed": lambda s: s, "kind": "torch_save"})())
    with pytest.raises(ckptcheck.Error, match="posix.system"):
        ckptcheck.torch.load(evil)
    assert not marker.exists()


def test_the_unpickler_refuses_build_on_a_class_even_if_verify_were_bypassed(tmp_path, monkeypatch):
    # BUILD on an allowlisted class with a dict state is setattr on the class: a file that patched
    # collections.Counter for the whole process (find_class alone let it). Refused, nothing changed.
    import collections
    import pickle
    magic = 0x1950a86a20f9469cfc6c
    patch = (b"\x80\x02ccollections\nCounter\n(N}X\x0b\x00\x00\x00most_commonc_codecs\nencode\nstb0"
             b"}X\x01\x00\x00\x00aK\x01s.")
    path = tmp_path / "patch.pt"
    with open(path, "wb") as f:
        for header in (magic, 1001, {"protocol_version": 1001, "little_endian": True,
                                     "type_sizes": {"short": 2, "int": 4, "long": 4}}):
            pickle.dump(header, f, protocol=2)
        f.write(patch)
        pickle.dump([], f, protocol=2)
    before = collections.Counter.most_common
    monkeypatch.setattr(ckptcheck, "verify", lambda *a, **k: type("Passed", (), {"raise_if_failed": lambda s: s, "kind": "torch_save_legacy"})())
    with pytest.raises(ckptcheck.Error, match="BUILD on"):
        ckptcheck.torch.load(path)
    assert collections.Counter.most_common is before


def test_load_of_a_folder_verify_reads_as_another_kind_is_refused_and_its_stray_pickle_gated(tmp_path):
    # A DCP folder is dcp.load's: load refuses it rather than torch.load its stray .pt files, and
    # verify now gates such a file (it passed, never examined).
    folder = tmp_path / "dcp"
    shutil.copytree(os.path.join(DATA, "dcp", "torch113"), folder)
    shutil.copy(os.path.join(DATA, "pytorch", "malicious_os_system.pt"), folder / "extra.pt")
    report = ckptcheck.verify(folder, weights_only=True)
    assert not report.ok and any("posix.system" in e.message for e in report.errors), report
    os.remove(folder / "extra.pt")
    torch.save({"w": torch.ones(2)}, folder / "extra.pt")
    with pytest.raises(ckptcheck.UsageError, match="a dcp checkpoint"):
        ckptcheck.torch.load(folder)


def test_paths_may_be_bytes(tmp_path):
    path = os.fsencode(tmp_path / "b.pt")
    ckptcheck.torch.save(a_state(), path)
    assert torch.equal(ckptcheck.torch.load(path)["model"]["weight"], a_state()["model"]["weight"])
