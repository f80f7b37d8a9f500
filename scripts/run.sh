#!/usr/bin/env bash
# Installs what is needed, builds, and runs the main job: `opconform run`, the conformance run of
# the bundled reference registry (every op, every dtype, every check, in worker processes). The
# reports land in ./opconform-report/ (report.md, report.html, report.json, junit.xml).
# Arguments are passed to `opconform run` (try --help).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset default
cmake --build --preset default --target opconform
./build/default/harness/opconform run "$@"
