#!/usr/bin/env bash
# Installs every Debian package opconform needs to build, test, fuzz and benchmark.
# Runs as root or through sudo; safe to run again (apt-get skips what is installed).
# CUDA is not installed here: the build uses /usr/local/cuda when it exists.
set -euo pipefail

packages=(
  build-essential g++-12 cmake ninja-build git pkg-config ca-certificates
  libgtest-dev libgmock-dev librapidcheck-dev libdlpack-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev libfmt-dev
  libseccomp-dev  # the workers' system-call filter (harness/src/worker_sandbox.cpp)
  libtcmalloc-minimal4  # the program's allocator (harness/CMakeLists.txt: Note [The program's allocator])
  clang-14 libclang-rt-14-dev
  binutils lld  # gold links the g++ presets, lld the clang ones (CMakeLists.txt: Note [The linker])
  zlib1g-dev  # the reference's OpInfo replay reads a gzip corpus
  chromium  # headless, for the HTML report test (reports/tests/html_chromium_test.cpp)
  libdnnl-dev  # oneDNN 2.6: the oneDNN adapter (adapters/onednn/)
  slurm-wlm munge  # a single-node Slurm cluster for the sharding test (harness/tests/slurm_test.cpp)
)
# libtorch is optional (the ATen adapter and the libtorch benchmark baseline);
# set OPCONFORM_NO_TORCH=1 to skip it on small machines.
if [[ "${OPCONFORM_NO_TORCH:-0}" != 1 ]]; then
  packages+=(libtorch-dev
    python3-torchvision  # its _C.so: the TORCH_LIBRARY adapter's example (adapters/torch_library/)
  )
fi

if [[ $(id -u) -eq 0 ]]; then
  SUDO=()
elif command -v sudo >/dev/null; then
  SUDO=(sudo)
else
  echo "install-deps.sh: run as root or install sudo" >&2
  exit 1
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${SUDO[@]}" apt-get update -qq
  "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps.sh: all packages present"
fi
