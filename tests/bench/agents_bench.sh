#!/usr/bin/env bash
# Load agents against capsweep-llmsim on loopback, side by side in one run: the same check
# (R req/s gamma arrivals for D s) sent by capsweepd's own engine and by N = 1, 2, 4
# capsweep-agent processes. Prints, per run: requests completed, p50/p99 TTFT, schedule lag
# p99 over the merged records, the largest clock error bound any agent reported, and the
# verdict. Figures are printed, not judged (docs/performance.md).
# Usage: agents_bench.sh BUILD_DIR [RATE] [SECONDS]
set -euo pipefail
build=$1 rate=${2:-200} seconds=${3:-10}
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
sim_port=$(free_port) api_port=$(free_port)
submit_token=bench-submit-0123456789abcdef agent_token=bench-agent-0123456789abcdef
"$build/tests/llmsim/capsweep-llmsim" --listen "127.0.0.1:$sim_port" --max-num-seqs 512 \
  --decode-base-ms 4 --decode-per-seq-ms 0 --prefill-ms-per-token 0 >"$work/sim.log" 2>&1 &
pids+=($!)
echo "{\"tokens\": [{\"token\": \"$submit_token\", \"role\": \"submit\"}, {\"token\": \"$agent_token\", \"role\": \"agent\"}]}" >"$work/cfg.json"
"$build/service/capsweepd" --listen "127.0.0.1:$api_port" --db "$work/db" --config "$work/cfg.json" >"$work/d.log" 2>&1 &
pids+=($!)
api="http://127.0.0.1:$api_port"
for _ in $(seq 100); do curl -sf "$api/healthz" >/dev/null && break; sleep 0.1; done

run() { # agents (0: capsweepd's own engine)
  local n=$1 spec id v
  spec=$(cat <<JSON
{"kind": "check", "target": {"base_url": "http://127.0.0.1:$sim_port", "api": "completions", "model": "sim-8b"},
 "workload": {"prompt_tokens": {"dist": "fixed", "value": 100}, "output_tokens": {"dist": "fixed", "value": 32}, "seed": 3},
 "arrival": {"process": "gamma", "burstiness": 0.5},
 "check": {"rate_rps": $rate, "duration_s": $seconds, "warmup_s": 1},
 "slo": {"ttft_ms": {"p95": 1000}, "max_error_rate": 0.01}$( [ "$n" -gt 0 ] && echo ", \"agents\": $n")}
JSON
)
  id=$(curl -sf -H "Authorization: Bearer $submit_token" -H 'Content-Type: application/json' -d "$spec" "$api/v1/sweeps" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
  local agents=()
  for ((i = 0; i < n; i++)); do
    CAPSWEEP_AGENT_TOKEN=$agent_token "$build/service/agent/capsweep-agent" --server "$api" --run "$id" --index "$i" \
      --give-up-s 120 >/dev/null 2>"$work/agent-$n-$i.log" &
    agents+=($!)
    pids+=($!)
  done
  for _ in $(seq $((seconds * 10 + 900))); do
    v=$(curl -sf -H "Authorization: Bearer $submit_token" "$api/v1/sweeps/$id" | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])')
    case $v in succeeded | failed | cancelled) break ;; esac
    sleep 0.1
  done
  for p in "${agents[@]}"; do wait "$p" || true; done
  curl -sf -H "Authorization: Bearer $submit_token" "$api/v1/sweeps/$id/steps" | python3 -c '
import json, sys
n = int(sys.argv[1])
d = json.load(sys.stdin)
steps = d if isinstance(d, list) else d["steps"]
s = steps[-1]["summary"]
a = s.get("agents") or {}
err = max([x["offset_error_ms"] for x in a.get("per_agent", [])], default=0.0)
who = "%d agents" % n if n else "capsweepd"
print("%10s  completed %6d  ttft p50 %7.2f p99 %7.2f ms  lag p99 %6.3f ms  clock error <= %.3f ms  valid %s  verdict %s" % (
    who, s["completed"], s["p50_ttft_ms"], s["p99_ttft_ms"], s["p99_schedule_lag_ms"], err, a.get("valid", True), steps[-1]["verdict"]))
' "$n"
}
echo "check: $rate req/s (gamma, burstiness 0.5) for $seconds s, llmsim 4 ms iterations, one machine"
for n in 0 1 2 4; do run "$n"; done
