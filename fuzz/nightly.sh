#!/usr/bin/env bash
# The nightly fuzzing run: every fuzz target for a time budget in parallel libFuzzer jobs, the
# new crashes minimised, and a summary in the harness's report formats (report.json, junit.xml,
# report.md with a table of exec/s, coverage and corpus per target, report.html).
#
#   fuzz/nightly.sh [--budget SECONDS] [--jobs N] [--build-dir DIR] [--out DIR] [TARGET...]
#
#   --budget     seconds per target (env OPCONFORM_FUZZ_BUDGET; default 600)
#   --jobs       libFuzzer -jobs and -workers per target (env OPCONFORM_FUZZ_JOBS; default: nproc)
#   --build-dir  the fuzz preset's build, made beforehand (default build/fuzz):
#                  cmake --preset fuzz && cmake --build --preset fuzz --target fuzz
#   --out        where everything goes (default fuzz-nightly): corpus/<target> (kept and grown
#                from night to night, seeded from fuzz/corpus), crashes/<target> (this run's crash
#                files, each minimised beside it as <file>.min), logs/<target>, report/
#   TARGET...    a subset (schema dlpack ...); default: every target
#
# Exit status: 0 when no target crashed, 1 when one did (or did not run), 2 on a usage error.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
budget="${OPCONFORM_FUZZ_BUDGET:-600}"
jobs="${OPCONFORM_FUZZ_JOBS:-$(nproc)}"
build="$here/../build/fuzz"
out="fuzz-nightly"
targets=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --budget) budget="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --build-dir) build="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    -*) echo "nightly.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if [[ ${#targets[@]} -eq 0 ]]; then
  for f in "$here"/*_fuzz.cpp; do
    name="$(basename "$f" _fuzz.cpp)"
    targets+=("$name")
  done
fi
bin="$build/fuzz"
[[ -x "$bin/fuzz_summary" ]] || { echo "nightly.sh: $bin/fuzz_summary is missing: build the fuzz preset first" >&2; exit 2; }
mkdir -p "$out"
out="$(cd "$out" && pwd)"
started="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
start_s="$(date +%s)"

for t in "${targets[@]}"; do
  binary="$bin/${t}_fuzz"
  corpus="$out/corpus/$t" crashes="$out/crashes/$t" logs="$out/logs/$t"
  rm -rf "$crashes" "$logs"
  mkdir -p "$corpus" "$crashes" "$logs"
  cp -n "$here/corpus/$t"/* "$corpus/" 2>/dev/null || true
  if [[ ! -x "$binary" ]]; then
    echo "nightly.sh: $binary is missing; $t is reported as not run" >&2
    continue
  fi
  dict=()
  [[ -f "$here/$t.dict" ]] && dict=("-dict=$here/$t.dict")
  echo "== $t: ${budget}s, $jobs job(s)"
  # -jobs writes each job's output to fuzz-<N>.log in the working directory: the logs folder.
  (cd "$logs" && "$binary" "${dict[@]}" -jobs="$jobs" -workers="$jobs" -max_total_time="$budget" -timeout=25 \
      -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$crashes/" "$corpus" >runner.txt 2>&1) || true
  # Minimise what crashed (timeouts and out-of-memory inputs would take a budget of their own).
  for f in "$crashes"/crash-* "$crashes"/leak-*; do
    [[ -f "$f" ]] || continue
    echo "   minimising $(basename "$f")"
    "$binary" -minimize_crash=1 -max_total_time=60 -timeout=25 -rss_limit_mb=2048 -exact_artifact_path="$f.min" "$f" \
      >"$logs/minimise-$(basename "$f").txt" 2>&1 || true
  done
done

status=0
"$bin/fuzz_summary" --out "$out" --budget "$budget" --jobs "$jobs" --started "$started" \
  --seconds "$(( $(date +%s) - start_s ))" --command "fuzz/nightly.sh --budget $budget --jobs $jobs" \
  --bin-dir "$bin" "${targets[@]}" || status=$?
exit "$status"
