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
  libssl-dev openssl
  libcli11-dev libgtest-dev libbenchmark-dev
  nlohmann-json3-dev libyaml-cpp-dev
  python3-h5py python3-torch python3-numpy
  chromium
  slurmctld slurmd slurm-client munge  # real Slurm for the multi-node drill and verify tests
  openmpi-bin libopenmpi-dev  # verify --distributed gathers through MPI
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
