#!/usr/bin/env bash
# What ctest runs for one fuzz target (fuzz/CMakeLists.txt):
#   run_target.sh smoke  BINARY NAME SECONDS WORKDIR   fuzz for SECONDS from a copy of the seeds
#   run_target.sh replay BINARY NAME 0 WORKDIR         run every kept reproducer and seed once
# New corpus inputs and crash files go to WORKDIR/NAME (the build tree), never into fuzz/.
set -euo pipefail
mode="$1" binary="$2" name="$3" seconds="$4" work="$5"
here="$(cd "$(dirname "$0")" && pwd)"
seeds="$here/corpus/$name"
regressions="$here/regressions/$name"
dict=()
[[ -f "$here/$name.dict" ]] && dict=("-dict=$here/$name.dict")

case "$mode" in
  smoke)
    dir="$work/$name"
    rm -rf "$dir"
    mkdir -p "$dir/corpus" "$dir/crashes"
    cp "$seeds"/* "$dir/corpus/"
    # -timeout: an input slower than 10 s is a finding (a hang); -rss_limit_mb: the CI machine's share.
    if ! "$binary" "${dict[@]}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$dir/crashes/" "$dir/corpus"; then
      echo "fuzz target '$name' found a problem; reproducer(s):" >&2
      ls "$dir"/crashes/* >&2 || true
      echo "Replay one with: $binary <file>. Once fixed, keep it in fuzz/regressions/$name/." >&2
      exit 1
    fi
    ;;
  replay)
    # Files as arguments: libFuzzer runs each once and writes nothing.
    files=()
    for f in "$regressions"/* "$seeds"/*; do
      [[ -f "$f" ]] && files+=("$f")
    done
    "$binary" -timeout=10 -rss_limit_mb=2048 "${files[@]}"
    ;;
  *)
    echo "usage: run_target.sh smoke|replay BINARY NAME SECONDS WORKDIR" >&2
    exit 2
    ;;
esac
