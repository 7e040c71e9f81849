"""The `ckptcheck-verify` pre-commit hook (.pre-commit-hooks.yaml), run by Debian's pre-commit in a
scratch repository of models that names a hooks repository by path: nothing is fetched. The hooks
repository is a scratch commit of this checkout's .pre-commit-hooks.yaml (pre-commit clones a
path repository at a commit, and the working tree's hook definition is what is under test)."""
import os
import shutil
import subprocess

from conftest import CKPTCHECK_BIN, DATA, SOURCE_DIR

PRE_COMMIT = shutil.which("pre-commit", path="/usr/bin")


def git(cwd, *args, env=None, check=True):
    r = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=120)
    if check:
        assert r.returncode == 0, r.stdout + r.stderr
    return r


def test_a_clean_file_commits_and_a_code_running_pickle_is_refused(tmp_path):
    assert PRE_COMMIT, "Debian's pre-commit is not installed: make deps installs it"
    env = dict(os.environ, HOME=str(tmp_path), PRE_COMMIT_HOME=str(tmp_path / "cache"),
               GIT_CONFIG_NOSYSTEM="1", CKPTCHECK=CKPTCHECK_BIN, CKPTCHECK_NO_PROGRESS="1",
               GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@invalid", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@invalid", PATH="/usr/bin:/bin")
    env.pop("GIT_DIR", None)
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    shutil.copy(os.path.join(SOURCE_DIR, ".pre-commit-hooks.yaml"), hooks)
    git(hooks, "init", "-q", env=env)
    git(hooks, "add", ".", env=env)
    git(hooks, "commit", "-qm", "hooks", env=env)
    rev = git(hooks, "rev-parse", "HEAD", env=env).stdout.strip()

    models = tmp_path / "models"
    models.mkdir()
    git(models, "init", "-q", env=env)
    (models / ".pre-commit-config.yaml").write_text(
        "repos:\n- repo: %s\n  rev: %s\n  hooks:\n  - id: ckptcheck-verify\n" % (hooks, rev))
    r = subprocess.run([PRE_COMMIT, "install"], cwd=models, capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr

    shutil.copy(os.path.join(DATA, "pytorch", "model_state.pt"), models / "model.pt")
    git(models, "add", ".", env=env)
    clean = git(models, "commit", "-m", "a clean model", env=env, check=False)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "ckptcheck verify" in clean.stdout + clean.stderr and "Passed" in clean.stdout + clean.stderr

    shutil.copy(os.path.join(DATA, "pytorch", "malicious_os_system.pt"), models / "evil.pt")
    git(models, "add", "evil.pt", env=env)
    refused = git(models, "commit", "-m", "a code-running pickle", env=env, check=False)
    out = refused.stdout + refused.stderr
    assert refused.returncode != 0, out
    assert "Failed" in out and "evil.pt" in out and "pickle_global_refused" in out and "system" in out, out
    assert git(models, "log", "--format=%s", env=env).stdout.split("\n")[0] == "a clean model"
