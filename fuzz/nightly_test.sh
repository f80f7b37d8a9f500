#!/usr/bin/env bash
# ctest's check of nightly.sh (fuzz_nightly_short): a budget of a few seconds per target, then
# the summary files must exist and name every target.
#   nightly_test.sh BUILD_DIR OUT_DIR TARGET...
set -euo pipefail
build="$1" out="$2"
shift 2
here="$(cd "$(dirname "$0")" && pwd)"
rm -rf "$out"
status=0
bash "$here/nightly.sh" --budget 3 --jobs 1 --build-dir "$build" --out "$out" "$@" || status=$?
# 1 means a target crashed: the smoke tests report that; here only the summary is judged.
[[ $status -le 1 ]] || { echo "nightly.sh failed with status $status" >&2; exit 1; }
for f in report.json report.md report.html junit.xml; do
  [[ -s "$out/report/$f" ]] || { echo "missing summary file $out/report/$f" >&2; exit 1; }
done
for t in "$@"; do
  for f in report.json report.md junit.xml; do
    grep -q "$t" "$out/report/$f" || { echo "$f does not name target $t" >&2; exit 1; }
  done
  grep -q "^| \`$t\` | passed\|^| \`$t\` | crashed\|^| \`$t\` | timed_out" "$out/report/report.md" ||
    { echo "report.md has no numbers for $t" >&2; exit 1; }
done
echo "nightly summary names every target: $*"
