#!/usr/bin/env bash
# Installs what is needed, builds everything, and runs every test (ctest): first the default
# build, then the same tests under AddressSanitizer, UndefinedBehaviorSanitizer and
# LeakSanitizer (the asan preset). GPU tests skip with their reason on machines without a GPU.
# OPCONFORM_SKIP_ASAN=1 runs the default build only.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs="$(nproc)"
cmake --preset default
cmake --build --preset default -j "$jobs"
ctest --preset default -j "$jobs"
if [[ "${OPCONFORM_SKIP_ASAN:-0}" != 1 ]]; then
  cmake --preset asan
  cmake --build --preset asan -j "$jobs"
  ctest --preset asan -j "$jobs"
fi
