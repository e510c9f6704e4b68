#!/usr/bin/env bash
# The README's test command: installs the Debian packages, configures, builds and runs
# every test. Usage: deploy/test.sh [PRESET]   (release by default; asan for sanitizers)
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-release}

bash deploy/install-deps.sh
jobs=$(nproc 2>/dev/null || echo 2)

bash deploy/check-format.sh

start=$(date +%s)
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "$jobs"
echo "build: $(( $(date +%s) - start )) s"
ctest --preset "$preset" -j "$jobs"
