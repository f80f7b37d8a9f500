#!/usr/bin/env bash
# Installs what is needed, builds, and runs the main job; the report lands in ./opconform-report/.
# Until the conformance harness lands (issue 6) the main job is the operator-model demo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset default
cmake --build --preset default --target opconform_demo
./build/default/examples/operator_model/opconform_demo --report opconform-report "$@"
