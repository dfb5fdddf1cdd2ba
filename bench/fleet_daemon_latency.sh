#!/usr/bin/env bash
# bench/fleet_daemon_latency.sh BUILD_DIR [QUERIES] -- route query latency
# of the router daemon over a real NATS server, on this machine:
# nats-server -js on a free loopback port (temporary store), `radixkv
# router` with --metrics-port, two radixkv-fleet-instance processes caching
# 300 synthetic prompts each (28 pages, 24 shared), then QUERIES (2000)
# queries by page hashes and as many by token ids from a third client.
# Prints the client's round trip p50/p99 per form and the daemon's own
# handling time (dequeue to reply publish) from /metrics. Needs nats-server,
# curl and python3 (free ports). Everything it starts is stopped at the end.
set -euo pipefail
B=${1:?usage: bench/fleet_daemon_latency.sh BUILD_DIR [QUERIES]}
N=${2:-2000}
. "$(dirname "$0")/fleet_bench_env.sh"
"$B/radixkv" router --server "$U" --model bench --metrics-port "$MP" 2>"$D/router.log" &
pids=($! "${pids[@]}")
sleep 1
for i in 1 2; do
  "$B/radixkv-fleet-instance" --server "$U" --model bench --instance $i --seed $i \
      --rate 100 --count 300 >/dev/null &
  pids=($! "${pids[@]}")
done
sleep 5
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
"$B/radixkv-fleet-instance" --server "$U" --model bench --query --quiet --seed 1 --count "$N"
"$B/radixkv-fleet-instance" --server "$U" --model bench --query --quiet --by-tokens \
    --seed 1 --count "$N"
curl -s "http://127.0.0.1:$MP/metrics" | grep -E '^radixkv_router_(query_latency|queries_total|index_entries|instances_live)'
