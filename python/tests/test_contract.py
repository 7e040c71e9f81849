"""ckptcheck.contract.Run: the drill's six variables, its metrics lines and checkpoint events, and
what a program gets outside a drill."""
import json
import os
import subprocess
import sys

import pytest

import ckptcheck
from ckptcheck.contract import Run

VARIABLES = ("CKPTCHECK_CKPT_DIR", "CKPTCHECK_STEPS", "CKPTCHECK_SAVE_EVERY", "CKPTCHECK_METRICS",
             "CKPTCHECK_RESUME", "CKPTCHECK_ROLE")


@pytest.fixture
def clean_env(monkeypatch):
    for v in VARIABLES:
        monkeypatch.delenv(v, raising=False)
    return monkeypatch


def test_under_a_drill_every_value_comes_from_the_environment(tmp_path, clean_env):
    metrics = tmp_path / "metrics.jsonl"
    for name, value in (("CKPTCHECK_CKPT_DIR", str(tmp_path / "ckpt")), ("CKPTCHECK_STEPS", "8"),
                        ("CKPTCHECK_SAVE_EVERY", "4"), ("CKPTCHECK_METRICS", str(metrics)),
                        ("CKPTCHECK_RESUME", str(tmp_path / "ckpt" / "step_4")), ("CKPTCHECK_ROLE", "resumed")):
        clean_env.setenv(name, value)
    run = Run(steps=100)  # the environment wins over a program's defaults
    assert run.under_drill and run.steps == 8 and run.save_every == 4 and run.role == "resumed"
    assert run.ckpt_dir == str(tmp_path / "ckpt") and run.resume == str(tmp_path / "ckpt" / "step_4")
    assert [s for s in range(1, 9) if run.should_save(s)] == [4, 8]
    run.log(5, loss=0.25, lr=1e-3, tokens=32)
    os.makedirs(tmp_path / "ckpt" / "step_8")
    (tmp_path / "ckpt" / "step_8" / "model.pt").write_bytes(b"x")
    run.checkpoint(8, tmp_path / "ckpt" / "step_8")
    lines = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert lines[0] == {"step": 5, "loss": 0.25, "lr": 1e-3, "tokens": 32}
    assert lines[1] == {"event": "checkpoint", "step": 8, "path": str(tmp_path / "ckpt" / "step_8")}
    with pytest.raises(ValueError, match="loss"):
        run.log(6, loss="high")
    with pytest.raises(ckptcheck.UsageError, match="pass loss="):
        run.log(7)  # a line without a loss is one the drill refuses: said at the call
    with pytest.raises(ValueError, match="does not exist"):
        run.checkpoint(9, tmp_path / "nowhere")


def test_a_fresh_start_has_no_resume(tmp_path, clean_env):
    for name, value in (("CKPTCHECK_CKPT_DIR", str(tmp_path)), ("CKPTCHECK_STEPS", "2"),
                        ("CKPTCHECK_SAVE_EVERY", "1"), ("CKPTCHECK_METRICS", str(tmp_path / "m"))):
        clean_env.setenv(name, value)
    assert Run().resume is None


@pytest.mark.parametrize("missing,bad", [("CKPTCHECK_STEPS", None), (None, ("CKPTCHECK_SAVE_EVERY", "four"))])
def test_a_missing_or_malformed_variable_is_named(tmp_path, clean_env, missing, bad):
    values = {"CKPTCHECK_CKPT_DIR": str(tmp_path), "CKPTCHECK_STEPS": "2", "CKPTCHECK_SAVE_EVERY": "1",
              "CKPTCHECK_METRICS": str(tmp_path / "m")}
    values.pop(missing, None)
    if bad:
        values[bad[0]] = bad[1]
    for name, value in values.items():
        clean_env.setenv(name, value)
    with pytest.raises(ckptcheck.UsageError, match=missing or bad[0]):
        Run()


def test_outside_a_drill_the_program_gives_the_values_and_nothing_is_logged(tmp_path, clean_env):
    run = Run(ckpt_dir=tmp_path, steps=10, save_every=5)
    assert not run.under_drill and run.resume is None and run.role is None and run.metrics is None
    assert run.steps == 10 and run.should_save(5) and not run.should_save(3)
    run.log(1, loss=1.0)  # no metrics file: nothing written, nothing raised
    (tmp_path / "a.pt").write_bytes(b"x")
    run.checkpoint(5, tmp_path / "a.pt")
    assert sorted(os.listdir(tmp_path)) == ["a.pt"]
    bare = Run()
    with pytest.raises(ckptcheck.UsageError, match="CKPTCHECK_STEPS"):
        bare.steps
    with pytest.raises(ValueError, match="save_every"):
        Run(save_every=0)
