"""The in-tree PEP 517 backend of `pip install --no-build-isolation .` (pyproject.toml).

It builds the extension ckptcheck._native with CMake for the Python that runs pip (its
sys.executable is CMake's Python3_EXECUTABLE), then packs a wheel of the package: the pure-Python
modules of python/ckptcheck/ and the extension, with a RECORD so `pip uninstall` removes every file.
Nothing is downloaded: `requires = []`, and the C++ dependencies are Debian's (scripts/install-deps.sh).

The CMake build directory is build/pip-<python tag> in the source tree (reused by the next install);
CKPTCHECK_BUILD_DIR names another one, for instance the tree's own `build` when it was configured for
the same Python (how the test suite installs into a venv without building twice).
"""
import base64
import hashlib
import os
import subprocess
import sys
import sysconfig
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAME = "ckptcheck"


def _version():
    for line in open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8"):
        if line.startswith("version = "):
            return line.split('"')[1]
    raise RuntimeError("pyproject.toml has no version")


def _tags():
    impl = "cp%d%d" % sys.version_info[:2]
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return impl, impl, platform


def _build_dir():
    given = os.environ.get("CKPTCHECK_BUILD_DIR")
    if given:
        return os.path.abspath(given)
    return os.path.join(ROOT, "build", "pip-cp%d%d" % sys.version_info[:2])


def _run(args):
    print("ckptcheck_build:", " ".join(args), flush=True)
    subprocess.run(args, check=True, cwd=ROOT)


def _build_extension():
    build = _build_dir()
    if not os.path.isfile(os.path.join(build, "CMakeCache.txt")):
        generator = ["-G", "Ninja"] if subprocess.run(["sh", "-c", "command -v ninja"],
                                                       capture_output=True).returncode == 0 else []
        _run(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
              "-DPython3_EXECUTABLE=" + sys.executable] + generator)
    _run(["cmake", "--build", build, "--target", "ckptcheck_python"])
    package = os.path.join(build, "python", NAME)
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    extension = os.path.join(package, "_native" + suffix)
    if not os.path.isfile(extension):
        found = [f for f in os.listdir(package) if f.startswith("_native.")] if os.path.isdir(package) else []
        raise RuntimeError("ckptcheck_build: %s was not built for this Python (%s); the build dir %s holds %s: "
                           "set CKPTCHECK_BUILD_DIR to a build configured with -DPython3_EXECUTABLE=%s"
                           % ("_native" + suffix, sys.executable, build, found or "none", sys.executable))
    return extension


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (arcname, digest, len(data))


def _metadata():
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: Proves a training run can be stopped "
            "and resumed\nRequires-Python: >=3.9\n" % (NAME, _version()))


# ---- PEP 517 hooks ------------------------------------------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    dist_info = "%s-%s.dist-info" % (NAME, _version())
    os.makedirs(os.path.join(metadata_directory, dist_info), exist_ok=True)
    with open(os.path.join(metadata_directory, dist_info, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    return dist_info


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    extension = _build_extension()
    impl, abi, platform = _tags()
    version = _version()
    wheel_name = "%s-%s-%s-%s-%s.whl" % (NAME, version, impl, abi, platform)
    dist_info = "%s-%s.dist-info" % (NAME, version)
    files = []
    source = os.path.join(ROOT, "python", NAME)
    for name in sorted(os.listdir(source)):
        if name.endswith((".py", ".pyi")) or name == "py.typed":
            files.append(("%s/%s" % (NAME, name), open(os.path.join(source, name), "rb").read()))
    files.append(("%s/%s" % (NAME, os.path.basename(extension)), open(extension, "rb").read()))
    files.append(("%s/METADATA" % dist_info, _metadata().encode()))
    wheel = "Wheel-Version: 1.0\nGenerator: ckptcheck_build\nRoot-Is-Purelib: false\nTag: %s-%s-%s\n" % (
        impl, abi, platform)
    files.append(("%s/WHEEL" % dist_info, wheel.encode()))
    record = [_record_line(arc, data) for arc, data in files] + ["%s/RECORD,," % dist_info]
    files.append(("%s/RECORD" % dist_info, ("\n".join(record) + "\n").encode()))
    path = os.path.join(wheel_directory, wheel_name)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for arcname, data in files:
            info = zipfile.ZipInfo(arcname, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if arcname.endswith(".so") else 0o644) << 16
            z.writestr(info, data, zipfile.ZIP_DEFLATED)
    return wheel_name


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_sdist(sdist_directory, config_settings=None):
    raise RuntimeError("ckptcheck_build: no sdist; install from the source tree (pip install --no-build-isolation .)")
