#!/usr/bin/env bash
# Installs what is needed, builds, and runs the main job: the conformance run of the bundled
# reference registry (every op, every dtype, every check). The report lands in
# ./opconform-report/reference.md. Until the opconform CLI lands (issue 6) the job is
# opconform_reference_check; arguments are passed to it (try --help).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset default
cmake --build --preset default --target opconform_reference_check
./build/default/reference/opconform_reference_check --report opconform-report/reference.md "$@"
