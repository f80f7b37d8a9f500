#!/usr/bin/env bash
# The GPU test run in two steps, because the machine that builds (this one: CUDA toolkit, no GPU)
# is not the one that has the GPU:
#
#   scripts/test-gpu.sh pack [BUNDLE]   # here: build with CUDA, pack a self-contained bundle
#   BUNDLE/run.sh                      # there: every cuda-labelled test + the CUDA plugin checks
#
# The bundle (default build/gpu-bundle, ~40 MB) holds the cuda-labelled test binaries, the
# opconform program, the CUDA plugins and fixtures (stripped), the shared libraries they need
# that a GPU machine lacks (tcmalloc, seccomp, ...), and run.py. The CUDA runtime, cuBLAS and
# cuDNN come from the GPU machine: run.py looks in /usr/local/cuda*/lib64 and in the nvidia-*
# wheels of its Python (pip's torch brings them); the NVIDIA driver (libcuda) must be there.
# run.py prints a ctest-style summary and exits 1 when a test or a check fails.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[[ $# -ge 1 ]] || usage
case "$1" in
  pack) ;;
  run) shift; exec /usr/bin/env python3 "${1:?scripts/test-gpu.sh run BUNDLE}/run.py" "${@:2}" ;;
  -h|--help) usage ;;
  *) usage ;;
esac
bundle=${2:-build/gpu-bundle}
build=${OPCONFORM_GPU_BUILD_DIR:-build/default}

[[ -x /usr/local/cuda/bin/nvcc ]] || { echo "test-gpu.sh: no CUDA toolkit at /usr/local/cuda (nvcc)" >&2; exit 1; }
configure_log=$(cmake --preset default)
grep -q 'opconform: CUDA ON' <<<"$configure_log" ||
  { echo "test-gpu.sh: the default preset did not configure CUDA (see cmake --preset default)" >&2; exit 1; }
cmake --build "$build"

rm -rf "$bundle"
mkdir -p "$bundle/lib"
exec /usr/bin/python3 scripts/gpu_bundle.py pack --build "$build" --root "$root" --bundle "$bundle"
