#!/usr/bin/env bash
# The README's demo command: installs the Debian packages, builds capsweep and runs the demo.
set -euo pipefail
cd "$(dirname "$0")/.."

bash deploy/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target capsweep-core-demo -j "$(nproc 2>/dev/null || echo 2)" >/dev/null
./build/release/tests/demo/capsweep-core-demo "$@"
