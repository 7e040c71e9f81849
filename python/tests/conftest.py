"""Shared fixtures of the Python tests: the built CLI (to compare with), the source tree's test
data, and checkpoints written by Debian's PyTorch (/usr/bin/python3 has torch 1.13)."""
import json
import os
import subprocess
import sys

import pytest

SOURCE_DIR = os.environ.get("CKPTCHECK_SOURCE_DIR",
                            os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CKPTCHECK_BIN = os.environ.get("CKPTCHECK_BIN", os.path.join(SOURCE_DIR, "build", "ckptcheck"))
DATA = os.path.join(SOURCE_DIR, "tests", "data")


def cli(*args, check=None):
    """Runs the built `ckptcheck` as a user would; returns (exit code, stdout, stderr)."""
    env = dict(os.environ, CKPTCHECK_NO_PROGRESS="1")
    r = subprocess.run([CKPTCHECK_BIN, *args], capture_output=True, text=True, env=env, timeout=120)
    if check is not None:
        assert r.returncode == check, "ckptcheck %s exited %d:\n%s%s" % (" ".join(args), r.returncode, r.stdout,
                                                                          r.stderr)
    return r.returncode, r.stdout, r.stderr


def key_pair(tmp_path, name):
    """An Ed25519 key pair written by openssl: (private PEM, public PEM) under tmp_path."""
    key, pub = tmp_path / (name + ".pem"), tmp_path / (name + ".pub")
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", str(key)], check=True)
    subprocess.run(["openssl", "pkey", "-in", str(key), "-pubout", "-out", str(pub)], check=True)
    return key, pub


def without_timing(d):
    """A --json object without its wall time, which differs between two runs."""
    d = dict(d)
    d.pop("seconds", None)
    return d


def write_safetensors(path, nbytes):
    """A safetensors file of one U8 tensor `w` of `nbytes` zero bytes (sparse: written in no time)."""
    header = json.dumps({"w": {"dtype": "U8", "shape": [nbytes], "data_offsets": [0, nbytes]}}).encode()
    header += b" " * ((8 - len(header) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(header).to_bytes(8, "little") + header)
        f.truncate(8 + len(header) + nbytes)
    return path


@pytest.fixture(scope="session")
def torch_files(tmp_path_factory):
    """A model state dict and a whole training state saved by Debian's torch.save."""
    import torch

    d = tmp_path_factory.mktemp("torch")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    torch.save(model.state_dict(), d / "model.pt")
    opt = torch.optim.AdamW(model.parameters())
    model(torch.randn(4, 8)).sum().backward()
    opt.step()
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": 1}, d / "train.pt")
    return d
