#!/usr/bin/env bash
# The README's demo command: installs the Debian packages, builds capsweep, starts
# capsweep-llmsim (127.0.0.1:8000) and capsweepd (127.0.0.1:8080, a fresh database), submits
# config/sweeps/demo.json, follows its progress and prints the verdict and the steps.
# Both servers are stopped on exit. Usage: deploy/demo.sh [SPEC.json]
set -euo pipefail
cd "$(dirname "$0")/.."
spec=${1:-config/sweeps/demo.json}

bash deploy/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target capsweepd capsweep capsweep-llmsim -j "$(nproc 2>/dev/null || echo 2)" >/dev/null

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

for port in 8000 8080; do
  if curl -s -o /dev/null "http://127.0.0.1:$port/"; then
    echo "demo: port $port on 127.0.0.1 is in use; stop what listens there and retry" >&2
    exit 1
  fi
done

./build/release/tests/llmsim/capsweep-llmsim --listen 127.0.0.1:8000 >"$work/llmsim.log" 2>&1 &
pids+=($!)
./build/release/service/capsweepd --listen 127.0.0.1:8080 --db "$work/capsweep.db" >"$work/capsweepd.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  if curl -sf -o /dev/null http://127.0.0.1:8080/healthz && curl -sf -o /dev/null http://127.0.0.1:8000/health; then break; fi
  sleep 0.1
done

echo "demo: capsweep-llmsim on 127.0.0.1:8000 (64 sequences, 8 + 0.25 x running ms per iteration), capsweepd on 127.0.0.1:8080"
start=$(date +%s)
status=0
./build/release/client/capsweep --server http://127.0.0.1:8080 submit "$spec" --wait || status=$?
echo
echo "demo: the sweep took $(( $(date +%s) - start )) s; capsweep exit code $status"
exit "$status"
