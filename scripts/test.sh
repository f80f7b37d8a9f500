#!/usr/bin/env bash
# Installs what is needed, builds everything, and runs every test (ctest): first the default
# build, then the same tests under AddressSanitizer, UndefinedBehaviorSanitizer and
# LeakSanitizer (the asan preset), then every libFuzzer target for 20 s from its seed corpus and
# its kept reproducers once (the fuzz preset, clang-14; only the fuzz targets are built, about
# 2 minutes, and their tests take about 2 more). GPU tests skip with their reason on machines
# without a GPU. OPCONFORM_SKIP_ASAN=1 skips the asan part, OPCONFORM_SKIP_FUZZ=1 the fuzz part.
# Time (CI: 2 cores, goal under 30 minutes): the g++ presets link with gold and the clang ones
# with lld (Note [The linker]), the sanitizer presets keep line tables only (-g1: 10% less compile time than -g, the same stack traces), the ASan
# pass checks each reference case on 6 samples (the default build on 50), and each fuzz target's
# smoke test fuzzes 20 s. Each phase's time is printed at the end (also when a phase fails), so
# a CI log says where the time went.
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
phase configure-default cmake --preset default
phase build-default cmake --build --preset default -j "$jobs"
phase test-default ctest --preset default -j "$jobs"
if [[ "${OPCONFORM_SKIP_ASAN:-0}" != 1 ]]; then
  phase configure-asan cmake --preset asan
  phase build-asan cmake --build --preset asan -j "$jobs"
  phase test-asan ctest --preset asan -j "$jobs"
fi
if [[ "${OPCONFORM_SKIP_FUZZ:-0}" != 1 ]]; then
  phase configure-fuzz cmake --preset fuzz
  phase build-fuzz cmake --build --preset fuzz -j "$jobs" --target fuzz
  phase test-fuzz ctest --preset fuzz -j "$jobs"
fi
