#!/usr/bin/env bash
# Builds the ATen adapter against the PyTorch of this machine's Python (build-standalone.sh) and
# checks it on CPU with a given opconform: the 2.x column of docs/aten-differences.md, run on a
# machine that has pip's PyTorch (the GPU machine) and an opconform built elsewhere (the GPU
# bundle, scripts/test-gpu.sh pack).
#
#   adapters/aten/check-standalone.sh OPCONFORM REPORT_DIR [DLPACK_INCLUDE_DIR] [-- CHECK_ARGS...]
#
# The plugin is written next to the reports (REPORT_DIR/libopconform_aten_standalone_plugin.so);
# CHECK_ARGS go to `opconform check` (default: -j 12).
set -uo pipefail
opconform=${1:?usage: check-standalone.sh OPCONFORM REPORT_DIR [DLPACK_INCLUDE_DIR] [-- CHECK_ARGS...]}
reports=${2:?usage: check-standalone.sh OPCONFORM REPORT_DIR [DLPACK_INCLUDE_DIR] [-- CHECK_ARGS...]}
shift 2
dlpack=/usr/include
if [[ $# -gt 0 && $1 != -- ]]; then dlpack=$1; shift; fi
[[ ${1:-} == -- ]] && shift
args=("$@")
((${#args[@]})) || args=(-j 12)
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$reports"
plugin=$reports/libopconform_aten_standalone_plugin.so
t0=$SECONDS
"$here/build-standalone.sh" "$plugin" "$dlpack" || exit
echo "check-standalone.sh: built in $((SECONDS - t0)) s"
t0=$SECONDS
"$opconform" check --library "$plugin" --report-dir "$reports" --html '' --quiet "${args[@]}"
rc=$?
echo "check-standalone.sh: checked in $((SECONDS - t0)) s (exit $rc)"
exit "$rc"
