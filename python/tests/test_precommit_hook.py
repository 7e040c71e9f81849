"""The `ckptcheck-verify` pre-commit hook (.pre-commit-hooks.yaml, scripts/precommit-verify.sh), run by
Debian's pre-commit in a scratch repository of models that names a hooks repository by path: nothing
is fetched. The hooks repository is a scratch commit of this checkout's .pre-commit-hooks.yaml and
the script it runs (pre-commit clones a path repository at a commit, and the working tree's hook
definition is what is under test)."""
import os
import shutil
import subprocess

import pytest

from conftest import CKPTCHECK_BIN, DATA, SOURCE_DIR

PRE_COMMIT = shutil.which("pre-commit", path="/usr/bin")
MALICIOUS_PT = os.path.join(DATA, "pytorch", "malicious_os_system.pt")
# A raw protocol-2 pickle that calls posix.system("true") when loaded: no torch.save zip around it.
RAW_PICKLE = b"\x80\x02cposix\nsystem\nq\x00X\x04\x00\x00\x00trueq\x01\x85q\x02Rq\x03."
NOT_FOUND = ("ckptcheck-verify: 'ckptcheck' not found: install the ckptcheck package or set "
             "CKPTCHECK=/path/to/ckptcheck")


def git(cwd, *args, env=None, check=True):
    r = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=120)
    if check:
        assert r.returncode == 0, r.stdout + r.stderr
    return r


def scratch_env(tmp_path, **extra):
    env = dict(os.environ, HOME=str(tmp_path), PRE_COMMIT_HOME=str(tmp_path / "cache"),
               GIT_CONFIG_NOSYSTEM="1", CKPTCHECK=CKPTCHECK_BIN, CKPTCHECK_NO_PROGRESS="1",
               GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@invalid", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@invalid", PATH="/usr/bin:/bin")
    env.pop("GIT_DIR", None)
    env.update(extra)
    return env


def hooks_repo(tmp_path, env):
    """A scratch commit of the hook definition and its script; returns (path, commit)."""
    hooks = tmp_path / "hooks"
    (hooks / "scripts").mkdir(parents=True)
    shutil.copy(os.path.join(SOURCE_DIR, ".pre-commit-hooks.yaml"), hooks)
    shutil.copy(os.path.join(SOURCE_DIR, "scripts", "precommit-verify.sh"), hooks / "scripts")  # keeps +x
    git(hooks, "init", "-q", env=env)
    git(hooks, "add", ".", env=env)
    git(hooks, "commit", "-qm", "hooks", env=env)
    return hooks, git(hooks, "rev-parse", "HEAD", env=env).stdout.strip()


def write_config(models, hooks, rev, args=None):
    config = "repos:\n- repo: %s\n  rev: %s\n  hooks:\n  - id: ckptcheck-verify\n" % (hooks, rev)
    if args is not None:
        config += "    args: [%s]\n" % ", ".join(args)
    (models / ".pre-commit-config.yaml").write_text(config)


def models_repo(tmp_path, env, args=None):
    """A repository of models whose commits run the hook (with these `args:`)."""
    hooks, rev = hooks_repo(tmp_path, env)
    models = tmp_path / "models"
    models.mkdir()
    git(models, "init", "-q", env=env)
    write_config(models, hooks, rev, args)
    r = subprocess.run([PRE_COMMIT, "install"], cwd=models, capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return models


def commit(models, env, message, *paths):
    """`git add PATHS` (all when none) and `git commit`: (exit code, stdout + stderr)."""
    git(models, "add", *(paths or (".",)), env=env)
    r = git(models, "commit", "-m", message, env=env, check=False)
    return r.returncode, r.stdout + r.stderr


def last_commit(models, env):
    return git(models, "log", "--format=%s", env=env, check=False).stdout.split("\n")[0]


def namespace_checkpoint(path):
    """A torch.save file whose only global outside the weights-only allowlist is argparse.Namespace."""
    import argparse

    import torch

    torch.save({"w": torch.zeros(3), "args": argparse.Namespace(lr=0.1)}, path)
    return path


@pytest.fixture(autouse=True)
def _pre_commit():
    assert PRE_COMMIT, "Debian's pre-commit is not installed: make deps installs it"


def test_a_clean_file_commits_and_a_code_running_pickle_is_refused(tmp_path):
    env = scratch_env(tmp_path)
    models = models_repo(tmp_path, env)

    shutil.copy(os.path.join(DATA, "pytorch", "model_state.pt"), models / "model.pt")
    rc, out = commit(models, env, "a clean model")
    assert rc == 0, out
    assert "ckptcheck verify" in out and "Passed" in out

    shutil.copy(MALICIOUS_PT, models / "evil.pt")
    rc, out = commit(models, env, "a code-running pickle", "evil.pt")
    assert rc != 0, out
    assert "Failed" in out and "evil.pt" in out and "pickle_global_refused" in out and "system" in out, out
    assert last_commit(models, env) == "a clean model"


@pytest.mark.parametrize("name", ["EVIL.PT", "model.pth.tar", "payload.pkl"])
def test_every_name_the_loaders_read_is_checked(tmp_path, name):
    env = scratch_env(tmp_path)
    models = models_repo(tmp_path, env)
    if name.endswith(".pkl"):
        (models / name).write_bytes(RAW_PICKLE)
    else:
        shutil.copy(MALICIOUS_PT, models / name)
    rc, out = commit(models, env, "a code-running pickle named " + name)
    assert rc != 0, out
    assert "Failed" in out and name in out and "system" in out, out
    if not name.endswith(".pkl"):
        assert "pickle_global_refused" in out, out
    assert last_commit(models, env) == ""


def test_args_allow_a_reviewed_global(tmp_path):
    env = scratch_env(tmp_path)
    models = models_repo(tmp_path, env)
    namespace_checkpoint(models / "run.ckpt")
    rc, out = commit(models, env, "a checkpoint with its argparse args")
    assert rc != 0 and "pickle_global_refused" in out and "argparse.Namespace" in out, out

    hooks = tmp_path / "hooks"
    rev = git(hooks, "rev-parse", "HEAD", env=env).stdout.strip()
    write_config(models, hooks, rev, ["--allow-global", "argparse.Namespace"])
    rc, out = commit(models, env, "reviewed: argparse.Namespace")
    assert rc == 0 and "Passed" in out, out

    # The allowance is for that global only: a code-running pickle is still refused, named.
    shutil.copy(MALICIOUS_PT, models / "evil.pt")
    rc, out = commit(models, env, "a code-running pickle", "evil.pt")
    assert rc != 0 and "pickle_global_refused" in out and "system" in out, out
    assert last_commit(models, env) == "reviewed: argparse.Namespace"


def test_args_allow_the_globals_a_reviewed_list_names(tmp_path):
    env = scratch_env(tmp_path)
    models = models_repo(tmp_path, env, ["--allow-globals-from", "reviewed-globals.txt"])
    (models / "reviewed-globals.txt").write_text("# reviewed by the team\nargparse.Namespace\n")
    namespace_checkpoint(models / "run.ckpt")
    rc, out = commit(models, env, "a checkpoint with its argparse args")
    assert rc == 0 and "Passed" in out, out


def test_no_ckptcheck_refuses_the_commit_with_one_line_saying_how_to_point_at_it(tmp_path):
    # PATH: /usr/bin less any installed ckptcheck (the .deb's), and CKPTCHECK unset.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in os.listdir("/usr/bin"):
        if not tool.startswith("ckptcheck"):
            os.symlink(os.path.join("/usr/bin", tool), bin_dir / tool)
    env = scratch_env(tmp_path)
    models = models_repo(tmp_path, env)
    env = scratch_env(tmp_path, PATH=str(bin_dir))
    del env["CKPTCHECK"]
    shutil.copy(os.path.join(DATA, "pytorch", "model_state.pt"), models / "model.pt")
    shutil.copy(os.path.join(DATA, "pytorch", "model_state.pt"), models / "other.pt")
    rc, out = commit(models, env, "two models, no ckptcheck")
    assert rc != 0 and "Failed" in out, out
    assert out.count(NOT_FOUND) == 1, out
    assert last_commit(models, env) == ""
