#!/usr/bin/env bash
# Installs what is needed, builds everything, and runs every test (ctest). GPU tests skip with
# their reason on machines without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset default
cmake --build --preset default
ctest --preset default -j "$(nproc)"
