#!/usr/bin/env bash
# Installs every Debian package that the build, the tests, the demo and the bench need.
# Idempotent: when every package is already present it only runs dpkg-query and exits (< 1 s).
set -euo pipefail

packages=(
  cmake ninja-build g++ make ccache pkg-config python3 clang-format
  dpkg-dev file  # make package: CPack's .deb takes Depends from dpkg-shlibdeps, which needs file
  clang libclang-rt-dev  # libFuzzer and sanitizer runtimes (make fuzz): only a Recommends of clang
  libtorch-dev libgloo-dev
  libhdf5-dev hdf5-tools
  libzstd-dev zstd
  zlib1g-dev  # inflates torch.jit.save code members (CRC-32 check)
  libssl-dev openssl
  libcli11-dev libgtest-dev libbenchmark-dev
  nlohmann-json3-dev libyaml-cpp-dev
  python3-h5py python3-torch python3-numpy
  chromium
  slurmctld slurmd slurm-client munge  # real Slurm for the multi-node drill and verify tests
  openmpi-bin libopenmpi-dev  # verify --distributed gathers through MPI
  pybind11-dev python3-dev python3-pytest pre-commit  # the Python package (Python.h), its tests, its pre-commit hook
  python3-pip python3-venv  # `pip install .` of the package (pyproject.toml), tested in a venv
  libsimdjson-dev  # the manifest parser for checkpoints of many chunks
  fuse3 libfuse3-dev  # the fault file system (ckptcheck-faultfs) under the drill's storage faults
)

# A fast BLAS for LibTorch, for speed only. Debian's libtorch calls whichever libblas.so.3 the
# alternatives system points at, and without an optimised one that is the reference BLAS: perf put
# 31 % of the built-in pilot's CPU time in its sgemm_. With OpenBLAS's serial build (no threads of its
# own, so reruns stay bit-identical) a pilot drill takes 2.7 s of user CPU instead of 6.2, and what
# `pilot` measures is what an optimised BLAS does. A machine that cannot install it keeps working.
speed_packages=(libopenblas0-serial)

# The packages of "$@" that are not installed (one dpkg-query for all of them).
missing_of() {
  local installed
  installed=$(dpkg-query -W -f='${Package} ${Status}\n' "$@" 2>/dev/null | awk '/install ok installed$/ {print $1}' || true)
  for p in "$@"; do
    grep -qx "$p" <<<"$installed" || echo "$p"
  done
}
mapfile -t missing < <(missing_of "${packages[@]}")
mapfile -t missing_speed < <(missing_of "${speed_packages[@]}")

if [ ${#missing[@]} -eq 0 ] && [ ${#missing_speed[@]} -eq 0 ]; then
  exit 0
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
updated=0
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}" >&2
  "${sudo_cmd[@]}" apt-get update -qq
  updated=1
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ ${#missing_speed[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing_speed[*]} (a fast BLAS for LibTorch)" >&2
  if ! { { [ $updated = 1 ] || "${sudo_cmd[@]}" apt-get update -qq; } &&
         "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing_speed[@]}" >/dev/null; }; then
    echo "install-deps: could not install ${missing_speed[*]}; LibTorch keeps the reference BLAS" \
         "(drills and pilots of the built-in workload take about twice the CPU)" >&2
  fi
fi
