"""`pip install --no-build-isolation .` (pyproject.toml, python/build_backend/ckptcheck_build.py) into a
venv of Debian's Python with its site packages visible (torch), offline, then used from outside the
tree, then `pip uninstall` leaves nothing behind (issue 68). The backend is pointed at the tree's own
build (CKPTCHECK_BUILD_DIR), configured for the same Python, so the test does not compile twice."""
import os
import subprocess
import sys

from conftest import DATA, SOURCE_DIR

BUILD_DIR = os.path.dirname(os.environ.get("CKPTCHECK_BIN", os.path.join(SOURCE_DIR, "build", "ckptcheck")))


def run(args, **kw):
    r = subprocess.run(args, capture_output=True, text=True, timeout=600, **kw)
    assert r.returncode == 0, " ".join(args) + "\n" + r.stdout[-4000:] + r.stderr[-4000:]
    return r


def test_pip_installs_the_package_into_a_venv_and_uninstalls_it(tmp_path):
    venv = tmp_path / "venv"
    run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", "--without-pip", str(venv)])
    python = str(venv / "bin" / "python")
    env = dict(os.environ, CKPTCHECK_BUILD_DIR=BUILD_DIR, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH", None)  # the tree's build/python must not be what gets imported
    run([python, "-m", "pip", "install", "--no-build-isolation", "--no-index", SOURCE_DIR], env=env)
    site = run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], env=env).stdout.strip()
    assert os.path.isdir(os.path.join(site, "ckptcheck")), os.listdir(site)
    probe = ("import ckptcheck, sys; print(ckptcheck.__file__); "
             "r = ckptcheck.verify(sys.argv[1], weights_only=True); print(r.ok)")
    out = run([python, "-c", probe, os.path.join(DATA, "pytorch", "model_state.pt")], env=env,
              cwd=str(tmp_path)).stdout.split()
    assert out[0].startswith(site), out  # imported from the venv, not from the tree
    assert out[1] == "True", out
    run([python, "-m", "pip", "uninstall", "-y", "ckptcheck"], env=env)
    assert not os.path.exists(os.path.join(site, "ckptcheck")), os.listdir(os.path.join(site, "ckptcheck"))
    assert not [d for d in os.listdir(site) if d.startswith("ckptcheck")], os.listdir(site)
