#!/usr/bin/env bash
# Installs what is needed, builds everything, and runs every test (ctest) once, under
# AddressSanitizer, UndefinedBehaviorSanitizer and LeakSanitizer (the asan preset: every module,
# the ATen adapter included), then every libFuzzer target for 20 s from its seed corpus and its
# kept reproducers once (the fuzz preset, clang-14; only the fuzz targets are built). GPU tests
# skip with their reason on machines without a GPU. OPCONFORM_TEST_PRESET=default runs the tests
# in the optimised build instead (what scripts/run.sh builds; faster to run, no sanitizers);
# OPCONFORM_SKIP_FUZZ=1 skips the fuzz part.
# Note [One build for the test suite]: CI has 2 cores and 30 minutes. Building and running the
# suite twice, optimised and under sanitizers, took 36 min here (build 740 s + 731 s, ctest
# 117 s + 279 s, fuzz 284 s); every test runs under the sanitizers, where it finds more, and the
# optimised build is the main job's (scripts/run.sh). The g++ presets link with gold and the
# clang ones with lld (Note [The linker]), sanitizer presets keep line tables only (-g1), the
# ASan pass checks each reference case on 6 samples (the main job on 50), and each fuzz target's
# smoke test fuzzes 20 s. Each phase's time is printed at the end (also when a phase fails).
# Measured on clean clones (2026-12-05, 2 cores): build-asan 652-925 s (652-695 s since the
# modules are shared libraries there: Note [Shared modules in the test build]), test-asan 334-392 s
# (108 test binaries), build-fuzz 184-216 s, test-fuzz 197-204 s (110 s of it the ClusterFuzzLite
# build test): 23 to 28 minutes; about 5 GB of disk for the two build folders.
set -euo pipefail
cd "$(dirname "$0")/.."

phases=()
started=$SECONDS
phase() {  # phase NAME COMMAND...: runs the command and records its wall time
  local name=$1 t=$SECONDS
  shift
  echo "== test.sh: $name"
  "$@" || { local rc=$?; phases+=("$name $((SECONDS - t)) s (failed: exit $rc)"); exit "$rc"; }
  phases+=("$name $((SECONDS - t)) s")
}
summary() {
  echo "== test.sh: phase times (total $((SECONDS - started)) s)"
  for p in "${phases[@]}"; do echo "   $p"; done
}
trap summary EXIT

phase install-deps bash scripts/install-deps.sh
jobs="$(nproc)"
preset="${OPCONFORM_TEST_PRESET:-asan}"
phase "configure-$preset" cmake --preset "$preset"
phase "build-$preset" cmake --build --preset "$preset" -j "$jobs"
phase "test-$preset" ctest --preset "$preset" -j "$jobs"
if [[ "${OPCONFORM_SKIP_FUZZ:-0}" != 1 ]]; then
  phase configure-fuzz cmake --preset fuzz
  phase build-fuzz cmake --build --preset fuzz -j "$jobs" --target fuzz
  phase test-fuzz ctest --preset fuzz -j "$jobs"
fi
