"""`import ckptcheck`: verify, seal, inspect and diff give what the CLI's --json gives, options mean
what its flags mean, errors are one exception family, help() says what the CLI's help says."""
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

import pytest

import ckptcheck
from conftest import DATA, cli, key_pair, without_timing, write_safetensors


def test_import_loads_neither_torch_nor_numpy_nor_the_library():
    code = "import sys, ckptcheck, ckptcheck.torch, ckptcheck.contract; " \
           "print(sorted(m for m in ('torch', 'numpy', 'ckptcheck._native') if m in sys.modules)); " \
           "print(ckptcheck.__version__, 'ckptcheck._native' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split("\n")[:2] == ["[]", "0.1.0 True"], out


def test_verify_matches_the_cli_json(torch_files):
    for name, flags, ok in (("train.pt", [], True), ("model.pt", [], False), ("model.pt", ["--weights-only"], True)):
        path = str(torch_files / name)
        report = ckptcheck.verify(path, weights_only=bool(flags))
        code, out, _ = cli("verify", path, *flags, "--json")
        assert code == (0 if ok else 1) and report.ok == ok and report.kind == json.loads(out)["kind"] == "torch_save"
        assert without_timing(report.to_dict()) == without_timing(json.loads(out))
    # A model state alone lacks what a resume needs, and says so.
    assert [f.code for f in ckptcheck.verify(torch_files / "model.pt").errors] == ["optimizer_state_missing"]


def test_a_code_running_pickle_fails_and_names_the_callable():
    path = os.path.join(DATA, "pytorch", "malicious_os_system.pt")
    report = ckptcheck.verify(path)
    code, out, _ = cli("verify", path, "--json")
    assert code == 1 and not report.ok and not report
    assert without_timing(report.to_dict()) == without_timing(json.loads(out))
    codes = {f.code for f in report.errors}
    assert "pickle_global_refused" in codes, report.errors
    assert any("system" in f.message for f in report.errors), report.errors
    assert all(isinstance(f.file, str) and f.to_dict()["shard"] == f.file for f in report.errors)
    with pytest.raises(ckptcheck.VerifyError) as e:
        report.raise_if_failed()
    assert e.value.report is report and e.value.exit_code == 1 and "system" in str(e.value)


def test_allow_globals_accepts_exactly_the_reviewed_global():
    path = os.path.join(DATA, "gate", "code_webbrowser_open.pt")
    assert not ckptcheck.verify(path, weights_only=True).ok
    assert ckptcheck.verify(path, weights_only=True, allow_globals=["webbrowser.open"]).ok
    assert not ckptcheck.verify(path, weights_only=True, allow_globals=["webbrowser.open_new"]).ok


def test_every_gate_file_is_refused_as_the_cli_refuses_it():
    expected = json.load(open(os.path.join(DATA, "gate", "expected.json")))["code"]
    for name, callable_name in expected.items():
        report = ckptcheck.verify(os.path.join(DATA, "gate", name))
        assert not report.ok, name
        assert any(callable_name in f.message for f in report.errors), (name, report.errors)


def test_an_option_the_kind_cannot_honour_is_a_value_error_naming_it(tmp_path):
    path = write_safetensors(tmp_path / "w.safetensors", 64)
    cli_code, _, cli_err = cli("verify", str(path), "--allow-global", "os.system")
    assert cli_code == 2 and "--allow-global" in cli_err
    with pytest.raises(ValueError, match="`allow_globals`") as e:
        ckptcheck.verify(path, allow_globals=["os.system"])
    assert isinstance(e.value, ckptcheck.UsageError) and e.value.exit_code == 2
    with pytest.raises(ValueError, match="`allow_globals` 'system'"):
        ckptcheck.verify(DATA + "/pytorch/model_state.pt", allow_globals="system")
    assert ckptcheck.verify(path, weights_only=True).ok


def test_a_missing_path_is_a_read_error():
    with pytest.raises(ckptcheck.ReadError) as e:
        ckptcheck.verify("/nonexistent/ckpt.pt")
    assert isinstance(e.value, OSError) and isinstance(e.value, ckptcheck.Error)
    assert "/nonexistent/ckpt.pt" in str(e.value)


@pytest.mark.parametrize("kwargs", [{"jobs": -1}, {"jobs": 2000}, {"jobs": "4"}, {"allow_globals": [3]}])
def test_bad_option_values_are_value_errors(torch_files, kwargs):
    with pytest.raises(ValueError):
        ckptcheck.verify(str(torch_files / "model.pt"), **kwargs)


def test_seal_then_verify_names_the_changed_tensor(tmp_path, torch_files):
    path = tmp_path / "model.pt"
    shutil.copy(torch_files / "model.pt", path)
    sealed = ckptcheck.seal(str(path))
    assert sealed.seal == str(path) + ".ckptcheck.seal.json" and sealed.files == 1 and sealed.tensors == 4
    assert sorted(sealed.to_dict()) == ["bytes", "files", "seal", "tensors", "unread"]
    with pytest.raises(ValueError, match="seal"):
        ckptcheck.seal(str(path))  # a seal is never replaced
    report = ckptcheck.verify(path, weights_only=True)
    assert report.ok and report.sealed
    tensor = json.load(open(sealed.seal))["files"][0]["tensors"][0]
    with open(path, "r+b") as f:
        f.seek(tensor["offset"])
        b = f.read(1)
        f.seek(tensor["offset"])
        f.write(bytes([b[0] ^ 0x40]))
    report = ckptcheck.verify(path, weights_only=True)
    assert not report.ok
    assert any(f.code == "seal_tensor_sha256_mismatch" and tensor["name"] in f.tensor + f.message
               for f in report.errors), report.errors
    _, out, _ = cli("verify", str(path), "--weights-only", "--json")
    assert without_timing(report.to_dict()) == without_timing(json.loads(out))


def test_seal_with_key_is_checked_with_pubkey(tmp_path, torch_files):
    key, pub = key_pair(tmp_path, "key")
    path = tmp_path / "model.pt"
    shutil.copy(torch_files / "model.pt", path)
    ckptcheck.seal(path, key=key)
    assert os.path.exists(str(path) + ".ckptcheck.seal.json.sig")
    assert ckptcheck.verify(path, weights_only=True, pubkey=pub).ok
    _, other_pub = key_pair(tmp_path, "other")
    refused = ckptcheck.verify(path, weights_only=True, pubkey=other_pub)
    assert not refused.ok
    _, out, _ = cli("verify", str(path), "--weights-only", "--pubkey", str(other_pub), "--json")
    assert without_timing(refused.to_dict()) == without_timing(json.loads(out))


def test_seal_with_a_key_that_cannot_sign_writes_nothing(tmp_path, torch_files):
    # A seal is never replaced: one left unsigned by a bad key blocked the retry with the right one.
    key, pub = key_pair(tmp_path, "key")
    path = tmp_path / "model.pt"
    shutil.copy(torch_files / "model.pt", path)
    for wrong in (pub, tmp_path / "missing.pem"):
        with pytest.raises(ckptcheck.Error):
            ckptcheck.seal(path, key=wrong)
        assert not os.path.exists(str(path) + ".ckptcheck.seal.json")
    ckptcheck.seal(path, key=key)
    assert ckptcheck.verify(path, weights_only=True, pubkey=pub).ok
    shutil.copy(torch_files / "model.pt", tmp_path / "unsealed.pt")
    code, out, err = cli("sign", str(tmp_path / "unsealed.pt"), "--key", str(key), check=2)
    assert "no seal to sign" in err and "ckptcheck seal" in err, err


def test_quick_reads_no_payload(torch_files):
    report = ckptcheck.verify(torch_files / "train.pt", quick=True)
    _, out, _ = cli("verify", str(torch_files / "train.pt"), "--quick", "--json", check=0)
    assert report.ok and report.bytes_hashed == 0
    assert without_timing(report.to_dict()) == without_timing(json.loads(out))


def test_inspect_and_diff_match_the_cli(torch_files):
    model, train = str(torch_files / "model.pt"), str(torch_files / "train.pt")
    report = ckptcheck.inspect(model, stats=True)
    _, out, _ = cli("inspect", model, "--stats", "--json", check=0)
    assert report.ok and report.to_dict() == json.loads(out)
    assert [t["name"] for t in report.tensors] == [t["name"] for t in json.loads(out)["tensors"]]
    one = ckptcheck.inspect(model, tensor="0.weight")
    assert [t["name"] for t in one.tensors] == ["0.weight"]
    with pytest.raises(ckptcheck.Error, match="no_such"):
        ckptcheck.inspect(model, tensor="no_such")
    same = ckptcheck.diff(model, model)
    assert same.identical and same.to_dict() == json.loads(cli("diff", model, model, "--json", check=0)[1])
    different = ckptcheck.diff(model, train, rtol=0.1)
    code, out, _ = cli("diff", model, train, "--rtol", "0.1", "--json")
    assert code == 1 and not different.identical and different.to_dict() == json.loads(out)
    with pytest.raises(ValueError, match="atol"):
        ckptcheck.diff(model, model, atol=-1)


def cli_help_texts(command):
    """{option or positional: its help text} of `ckptcheck COMMAND --help` (CLI11's layout: the
    name and type, two or more spaces, the text; or the text alone on the next, deeper line)."""
    _, out, _ = cli(command, "--help", check=0)
    texts, pending = {}, None
    for line in out.splitlines():
        m = re.match(r"^  (?:-h,)?(--[a-z-]+|[a-z]+)\b(?:.*?)(?:\s{2,}(\S.*))?$", line)
        if m:
            pending = None if m.group(2) else m.group(1)
            if m.group(2):
                texts[m.group(1)] = m.group(2).strip()
        elif pending and line.startswith(" " * 10):
            texts[pending], pending = line.strip(), None
    return texts


@pytest.mark.parametrize("command,function,flags", [
    ("verify", ckptcheck.verify, ["path", "--jobs", "--quick", "--weights-only", "--pubkey", "--allow-global"]),
    ("seal", ckptcheck.seal, ["path", "--jobs"]),
    ("inspect", ckptcheck.inspect, ["path", "--stats", "--tensor"]),
    ("diff", ckptcheck.diff, ["a", "b", "--rtol", "--atol"]),
])
def test_docstrings_say_what_the_cli_help_says(command, function, flags):
    doc = " ".join(function.__doc__.split())
    helps = cli_help_texts(command)
    for flag in flags:
        assert flag in helps, (flag, helps)
        assert helps[flag] in doc, "%s: %r is not in help(ckptcheck.%s)" % (flag, helps[flag], command)


def test_hashing_releases_the_gil(tmp_path):
    # A 192 MiB safetensors file, sealed, then verified (every byte hashed) on a thread while this
    # thread keeps running Python: with the GIL held through the hashing, it could not run at all.
    path = write_safetensors(tmp_path / "big.safetensors", 192 << 20)
    ckptcheck.seal(path)
    result = {}

    def run():
        start = time.monotonic()
        result["report"] = ckptcheck.verify(path, weights_only=True, jobs=1)
        result["seconds"] = time.monotonic() - start

    worker = threading.Thread(target=run)
    last, longest = time.monotonic(), 0.0
    worker.start()
    while worker.is_alive():
        now = time.monotonic()
        longest, last = max(longest, now - last), now
    assert result["report"].ok and result["report"].bytes_hashed >= 192 << 20
    assert longest < result["seconds"] / 2, "this thread stood still %.3f s of the %.3f s verify" % (
        longest, result["seconds"])
