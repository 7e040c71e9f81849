"""The gate against the real readers (issue 63): every crafted parser differential in tests/data/attack/
(scripts/make_attack_fixtures.py) is read by Debian's torch 1.13 PyTorchFileReader (miniz), CPython's
pickle, zipfile and tarfile through scripts/loader_oracle.py (which never runs a payload), and by
`ckptcheck verify`. Where the real readers see a code-running global, a TorchScript or tar dispatch,
or two zip readers disagree, verify must refuse (exit 1) in both modes. Then a short differential fuzz
(scripts/differential_fuzz.py) whose oracle is the same agreement; `scripts/fuzz.sh` runs it longer."""
import json
import os
import subprocess
import sys

from conftest import CKPTCHECK_BIN, DATA, SOURCE_DIR, cli

sys.path.insert(0, os.path.join(SOURCE_DIR, "scripts"))
import loader_oracle  # noqa: E402

ATTACK = os.path.join(DATA, "attack")
EXPECTED = json.load(open(os.path.join(ATTACK, "expected.json")))
# torch.load(weights_only=True)'s allowlist for plain state dicts (1.13 and 2.x), as the fuzzer has it.
from differential_fuzz import allowed  # noqa: E402


def the_loader_would_run_code(view):
    outside = [g for g in view["globals"] if not allowed(g, set())]
    return bool(outside) or view["torch_dispatch"] in ("torchscript", "tar")


def test_every_attack_file_is_one_the_real_readers_read_dangerously_and_verify_refuses():
    seen = 0
    for name, want in EXPECTED["hostile"].items():
        path = os.path.join(ATTACK, name)
        if not os.path.isfile(path) or name.endswith(".h5"):  # Keras is not installed here
            continue
        view = loader_oracle.examine(path)
        zip_disagrees = bool(view.get("zip")) and not view["zip"]["agree"]
        assert the_loader_would_run_code(view) or zip_disagrees, (name, view["torch_dispatch"], view["globals"])
        for mode in want["refuse"]:
            rc, out, err = cli("verify", *([mode] if mode else []), path)
            assert rc == 1, (name, mode, out, err)
        seen += 1
    assert seen >= 20


def test_legitimate_files_read_the_same_by_torch_and_by_ckptcheck():
    for name, want in EXPECTED["legit"].items():
        path = os.path.join(ATTACK, name)
        view = loader_oracle.examine(path)
        assert not the_loader_would_run_code(view), (name, view["globals"])
        rc, out, _ = cli("inspect", "--json", path, check=0)
        ours = {(t["name"], t["sha256"]) for t in json.loads(out)["tensors"]}
        assert ours == {(t["name"], t["sha256"]) for t in want["tensors"]}, name
        cli("verify", "--weights-only", path, check=0)


def test_a_short_differential_fuzz_finds_no_disagreement(tmp_path):
    r = subprocess.run([sys.executable, os.path.join(SOURCE_DIR, "scripts", "differential_fuzz.py"),
                        "--iterations", "150", "--seed", "63", "--binary", CKPTCHECK_BIN,
                        "--corpus", os.path.join(SOURCE_DIR, "fuzz", "corpus", "differential"),
                        "--findings", str(tmp_path / "findings")],
                       capture_output=True, text=True, timeout=400)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


def test_python_diff_sees_every_value(tmp_path):
    """ckptcheck.diff: the same tensors at another step are not identical (issue 65)."""
    import ckptcheck
    import torch
    w = torch.ones(2, 2)
    torch.save({"w": w, "step": 20, "scheduler": {"last_epoch": 20}}, tmp_path / "a.pt")
    torch.save({"w": w, "step": 15, "scheduler": {"last_epoch": 3}}, tmp_path / "b.pt")
    d = ckptcheck.diff(str(tmp_path / "a.pt"), str(tmp_path / "b.pt"))
    assert not d.identical
    assert d.headline.startswith("step 20 vs 15")
    assert {v["path"] for v in d.values} >= {"step", "scheduler.last_epoch"}
    assert ckptcheck.diff(str(tmp_path / "a.pt"), str(tmp_path / "a.pt")).identical


def test_python_diff_compares_typed_values(tmp_path):
    """ckptcheck.diff: a tuple is not a list, and two byte strings that are not UTF-8 are not one
    (issue 65 item 9); each difference carries both types and reprs."""
    import ckptcheck
    import torch
    w = torch.ones(2, 2)
    torch.save({"w": w, "betas": (0.9, 0.999), "name": "\udcff"}, tmp_path / "a.pt")
    torch.save({"w": w, "betas": [0.9, 0.999], "name": "\udcfe"}, tmp_path / "b.pt")
    d = ckptcheck.diff(str(tmp_path / "a.pt"), str(tmp_path / "b.pt"))
    assert not d.identical
    by_path = {v["path"]: v for v in d.values}
    assert set(by_path) == {"betas", "name"}
    assert (by_path["betas"]["a_type"], by_path["betas"]["b_type"]) == ("tuple", "list")
    assert by_path["betas"]["a_repr"] == "(0.9, 0.999)"
    assert by_path["name"]["a_repr"] != by_path["name"]["b_repr"]
