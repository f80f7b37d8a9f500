#!/usr/bin/env bash
# ctest's fuzz_clusterfuzzlite_build (fuzz/CMakeLists.txt): runs .clusterfuzzlite/build.sh as
# OSS-Fuzz would (CC, CXX, CFLAGS, CXXFLAGS, LIB_FUZZING_ENGINE, OUT, WORK, SRC), checks that $OUT
# holds each target with its seed corpus zip, options and dictionary, then runs each target 100
# times on its unpacked seeds with the options of its .options file.
#   clusterfuzzlite_test.sh REPO CC CXX DIR      (DIR/work keeps the objects for the next run)
# Note [A cheap local OSS-Fuzz build]: OSS-Fuzz compiles at -O1 with ASan; on 2 cores that is
# 13 minutes for every target from scratch (the reference library alone is 16 CPU-minutes), so
# this test compiles at -O0 (about 6x cheaper, what the fuzz preset does) and, unless
# OPCONFORM_FUZZ_TARGETS says otherwise, leaves out `differential`, the one target that needs the
# reference library: five targets, about 2 minutes from scratch, seconds when DIR/work is warm.
set -euo pipefail
repo="$1" cc="$2" cxx="$3" dir="$4"
out="$dir/out" work="$dir/work" runs="$dir/runs"
rm -rf "$out" "$runs"
mkdir -p "$out" "$work" "$runs"
targets=(${OPCONFORM_FUZZ_TARGETS:-schema infer_schema dlpack plugin_value report_json})
flags="-O0 -fno-omit-frame-pointer -fsanitize=address,undefined -fsanitize=fuzzer-no-link"

start=$SECONDS
# SRC is the image's /src; here it holds no sources of dependencies, so the system's are used.
CC="$cc" CXX="$cxx" CFLAGS="$flags" CXXFLAGS="$flags" LIB_FUZZING_ENGINE=-fsanitize=fuzzer OUT="$out" WORK="$work" \
  SRC="$dir" OPCONFORM_FUZZ_TARGETS="${targets[*]}" bash "$repo/.clusterfuzzlite/build.sh"
echo "build.sh: $((SECONDS - start)) s"

failed=0
for t in "${targets[@]}"; do
  binary="$out/${t}_fuzz"
  for f in "$binary" "$binary.options" "${binary}_seed_corpus.zip"; do
    [[ -s "$f" ]] || { echo "FAIL $t: $f is missing" >&2; failed=1; continue 2; }
  done
  if [[ -f "$repo/fuzz/$t.dict" ]] && ! grep -qx "dict = ${t}_fuzz.dict" "$binary.options"; then
    echo "FAIL $t: $binary.options does not name its dictionary" >&2
    failed=1
  fi
  # The [libfuzzer] section as flags, as the infrastructure passes them (a dict next to the target).
  flags=()
  while IFS='=' read -r key value; do
    key="${key// /}" value="${value# }"
    [[ -z "$key" || "$key" == \[* ]] && continue
    [[ "$key" == dict ]] && value="$out/$value"
    [[ "$key" == dict && ! -f "$value" ]] && { echo "FAIL $t: $value is missing" >&2; failed=1; }
    flags+=("-$key=$value")
  done <"$binary.options"
  mkdir -p "$runs/$t/corpus"
  unzip -q "${binary}_seed_corpus.zip" -d "$runs/$t/corpus"
  t0=$SECONDS
  if (cd "$runs/$t" && "$binary" "${flags[@]}" -runs=100 -rss_limit_mb=2048 corpus >log.txt 2>&1); then
    echo "ok   $t: $(ls "$runs/$t/corpus" | wc -l) inputs, 100 runs, $((SECONDS - t0)) s"
  else
    echo "FAIL $t: exit status $? (log below)" >&2
    tail -n 30 "$runs/$t/log.txt" >&2
    failed=1
  fi
done
echo "total: $((SECONDS - start)) s"
exit "$failed"
