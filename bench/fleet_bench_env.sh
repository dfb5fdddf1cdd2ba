# bench/fleet_bench_env.sh -- sourced by the fleet bench scripts
# (bench/fleet_daemon_*.sh): a temporary directory D, free loopback ports P
# (NATS) and MP (the router's metrics and HTTP), U the NATS URL, and
# nats-server -js running on P with its store in D. Whatever the script
# adds to pids is stopped at exit, and D removed.
D=$(mktemp -d)
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
P=$(port); MP=$(port); U=nats://127.0.0.1:$P
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$D"
}
trap cleanup EXIT
nats-server -js -a 127.0.0.1 -p "$P" -sd "$D" >/dev/null 2>&1 & pids+=($!)
sleep 1
