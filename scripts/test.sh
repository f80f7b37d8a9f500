#!/usr/bin/env bash
# Installs what is needed, builds everything, and runs every test (ctest): first the default
# build, then the same tests under AddressSanitizer, UndefinedBehaviorSanitizer and
# LeakSanitizer (the asan preset), then every libFuzzer target for 20 s from its seed corpus and
# its kept reproducers once (the fuzz preset, clang-14; only the fuzz targets are built, about
# 2 minutes, and their tests take about 2 more). GPU tests skip with their reason on machines
# without a GPU. OPCONFORM_SKIP_ASAN=1 skips the asan part, OPCONFORM_SKIP_FUZZ=1 the fuzz part.
# Time (CI: 2 cores, goal under 30 minutes): every preset links with lld, the sanitizer presets
# keep line tables only (-g1: 10% less compile time than -g, the same stack traces), the ASan
# pass checks each reference case on 6 samples (the default build on 50), and each fuzz target's
# smoke test fuzzes 20 s.
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
if [[ "${OPCONFORM_SKIP_FUZZ:-0}" != 1 ]]; then
  cmake --preset fuzz
  cmake --build --preset fuzz -j "$jobs" --target fuzz
  ctest --preset fuzz -j "$jobs"
fi
