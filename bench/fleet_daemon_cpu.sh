#!/usr/bin/env bash
# bench/fleet_daemon_cpu.sh BUILD_DIR [INSTANCES] [QUERIES] [CLIENT_BUILD_DIR]
# -- the router daemon's CPU time per route query against the in-process
# query on the same index, over a real NATS server, on this machine.
#
# nats-server on a free loopback port, BUILD_DIR's `radixkv router` with
# --metrics-port, one radixkv-fleet-instance process (CLIENT_BUILD_DIR's,
# default BUILD_DIR's) standing in for INSTANCES (8) instances
# (--instances) caching PROMPTS (200) synthetic prompts each (28 pages: a
# shared system prompt, one of 8 topics, a private tail) and heartbeating
# every HB_MS (500; the router's heartbeat timeout is 6 x that); once the
# index is still, QUERIES (5000) route queries by page hashes over NATS
# request/reply (radixkv-fleet-instance --query; one client, then four at
# once, QUERIES in all), QUERIES/5 over POST /v1/route with one
# connection per request ("Connection: close"; a Python client), and QUERIES/5 on one
# kept-alive connection (the same client, connecting again whenever the
# server closes); then the same NATS queries to a stand-in router without
# an index (--echo on a delivery thread, --echo-loop on fleet/nats_loop.h:
# the transport alone). The daemon's CPU time is the sum of
# its threads' schedstat run time (ns) over each phase, less its idle rate
# (heartbeats) measured over 3 s before; the in-process part is
# radixkv_router_route_cpu_seconds_total (thread CPU time inside the
# router's route calls, estimated from 1 call in 16 timed; ROUTE_CPU_SAMPLE=1
# times every call, ROUTE_CPU_SAMPLE=N 1 in N: --route-cpu-sample, a
# daemon that has it) over the same phase. Prints both per query and
# their ratio, and, counted (the load cannot blur them), the process's
# system calls (perf stat's raw_syscalls tracepoint, when perf is there)
# and voluntary and involuntary context switches per query (NO_PERF=1: no
# perf stat, whose tracepoint adds CPU to every system call, so the CPU
# columns are the daemon's alone), and last the cost of a wake-up on one
# CPU and across two (bench/fleet_wake_cost.c, when cc is there). The
# queries are BUILD_DIR's clients. PERF_DIR: see prof_start. Needs
# nats-server, curl and python3. Everything it starts is stopped at the end. (JetStream: the
# router keeps a stream.)
set -euo pipefail
# PIN_CPU=LIST: everything (nats-server, the daemon, the clients) on those
# CPUs only (taskset), e.g. PIN_CPU=0: every wake-up then on the waker's
# CPU, none crossing to an idle one (on the shared 2-core VM a pipe round
# trip across CPUs costs each thread 20-31 us of CPU, 1 us on one CPU:
# bench/fleet_wake_cost.c, bench/RESULTS.md)
if [ -n "${PIN_CPU:-}" ] && [ -z "${RKV_PINNED:-}" ]; then
  RKV_PINNED=1 exec taskset -c "$PIN_CPU" "$0" "$@"
fi
B=${1:?usage: bench/fleet_daemon_cpu.sh BUILD_DIR [INSTANCES] [QUERIES] [CLIENT_BUILD_DIR]}
NI=${2:-8}
N=${3:-5000}
C=${4:-$B}
HB_MS=${HB_MS:-500}
PROMPTS=${PROMPTS:-200}
. "$(dirname "$0")/fleet_bench_env.sh"
"$B/radixkv" router --server "$U" --model bench --metrics-port "$MP" --page-size 16 \
    --heartbeat-timeout-ms $((6 * HB_MS)) ${ROUTE_CPU_SAMPLE:+--route-cpu-sample "$ROUTE_CPU_SAMPLE"} \
    2>"$D/router.log" &
RP=$!
pids=($RP "${pids[@]}")
sleep 1
"$C/radixkv-fleet-instance" --server "$U" --model bench --instance 1 --seed 1 \
    --instances "$NI" --blocks 1024 --heartbeat-ms "$HB_MS" --topics 8 --rate 0 \
    --count "$PROMPTS" >"$D/instances.out" &
pids=($! "${pids[@]}")
cpu_ns() { cat /proc/"$RP"/task/*/schedstat | awk '{s += $1} END {printf "%.0f\n", s}'; }
route_s() { curl -s "http://127.0.0.1:$MP/metrics" |
              awk '/^radixkv_router_route_cpu_seconds_total/ {print $2}'; }
now_ns() { date +%s%N; }
metric() { curl -s "http://127.0.0.1:$MP/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
# every prompt published, then the index still for a second
until grep -q "served" "$D/instances.out" 2>/dev/null; do sleep 0.5; done
prev=-1
while :; do
  cur=$(metric radixkv_router_events_applied_total)
  [ "$cur" = "$prev" ] && break
  prev=$cur; sleep 1
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg); instances live: $(metric radixkv_router_instances_live)," \
     "index entries: $(metric radixkv_router_index_entries)"
# counted beside the CPU time, as the load cannot blur them: the
# process's system calls (perf stat, when perf can count the tracepoint)
# and its threads' voluntary context switches (each a sleep and a wake-up)
ctx_sw() { cat /proc/"$1"/task/*/status | awk '/^voluntary_ctxt_switches/ {s += $2} END {print s}'; }
ctx_nv() { cat /proc/"$1"/task/*/status | awk '/^nonvoluntary_ctxt_switches/ {s += $2} END {print s}'; }
count_start() { # pid
  PERF_OUT=$D/perf.out
  rm -f "$PERF_OUT"
  PERF_PID=
  if [ -z "${NO_PERF:-}" ] && command -v perf >/dev/null; then
    perf stat -x, -e raw_syscalls:sys_enter -p "$1" -o "$PERF_OUT" >/dev/null 2>&1 &
    PERF_PID=$!
    sleep 0.3
  fi
  SW0=$(ctx_sw "$1") NV0=$(ctx_nv "$1")
}
count_stop() { # pid: sets COUNT_SC (system calls; -1: not counted), COUNT_SW, COUNT_NV
  local sw1 nv1 sc=-1
  sw1=$(ctx_sw "$1") nv1=$(ctx_nv "$1")
  if [ -n "$PERF_PID" ]; then
    kill -INT "$PERF_PID" 2>/dev/null || true
    wait "$PERF_PID" 2>/dev/null || true
    sc=$(awk -F, '/raw_syscalls/ && $1 ~ /^[0-9]+$/ {print $1}' "$PERF_OUT" 2>/dev/null)
    sc=${sc:--1}
  fi
  COUNT_SC=$sc
  COUNT_SW=$((sw1 - SW0))
  COUNT_NV=$((nv1 - NV0))
}
count_start "$RP"
c0=$(cpu_ns); t0=$(now_ns); sleep 3; c1=$(cpu_ns); t1=$(now_ns)
count_stop "$RP"
isc=$COUNT_SC isw=$COUNT_SW inv=$COUNT_NV
idle=$(python3 -c "print(($c1 - $c0) / ($t1 - $t0))")
idle_sc=$(python3 -c "print(max($isc, 0) / (($t1 - $t0) / 1e9))")
idle_sw=$(python3 -c "print($isw / (($t1 - $t0) / 1e9))")
idle_nv=$(python3 -c "print($inv / (($t1 - $t0) / 1e9))")
echo "idle: daemon CPU $(python3 -c "print('%.4f' % $idle)") s per s (heartbeats)"
# PERF_DIR=DIR: also a cpu-clock call-graph profile of the daemon over each
# phase, DIR/phaseK.data (perf report -i ...); the profiler's own cost
# lands in the phase's figures, so profile and measure in separate runs
NPHASE=0
prof_start() {
  PROF_PID=
  NPHASE=$((NPHASE + 1))
  if [ -n "${PERF_DIR:-}" ]; then
    mkdir -p "$PERF_DIR"
    perf record -q -e cpu-clock -g -p "$RP" -o "$PERF_DIR/phase$NPHASE.data" \
        >/dev/null 2>&1 &
    PROF_PID=$!
    sleep 0.5
  fi
}
prof_stop() {
  if [ -n "$PROF_PID" ]; then
    kill -INT "$PROF_PID" 2>/dev/null || true
    wait "$PROF_PID" 2>/dev/null || true
  fi
}
phase() { # name count command...
  local name=$1 count=$2; shift 2
  local c0 t0 r0 c1 t1 r1 sc sw
  prof_start
  count_start "$RP"
  c0=$(cpu_ns); t0=$(now_ns); r0=$(route_s)
  "$@"
  c1=$(cpu_ns); t1=$(now_ns); r1=$(route_s)
  count_stop "$RP"
  prof_stop
  sc=$COUNT_SC sw=$COUNT_SW nv=$COUNT_NV
  python3 - "$name" "$count" "$c0" "$c1" "$t0" "$t1" "$r0" "$r1" "$idle" "$sc" "$sw" \
      "$idle_sc" "$idle_sw" "$nv" "$idle_nv" <<'EOF'
import sys
name, n = sys.argv[1], int(sys.argv[2])
c0, c1, t0, t1 = (int(x) for x in sys.argv[3:7])
r0, r1, idle = float(sys.argv[7]), float(sys.argv[8]), float(sys.argv[9])
sc, sw, isc, isw, nv, inv = (float(x) for x in sys.argv[10:16])
secs = (t1 - t0) / 1e9
daemon = (c1 - c0 - idle * (t1 - t0)) / n / 1e3
route = (r1 - r0) / n * 1e6
print(f"{name}: {n} queries in {secs:.2f} s; daemon CPU {daemon:.2f} us per query "
      f"(idle rate taken out), in-process route {route:.2f} us per query, ratio {daemon / route:.1f}x")
calls = f"{(sc - isc * secs) / n:.2f} system calls" if sc >= 0 else "system calls not counted"
print(f"  per query, idle rates out: {calls}, {(sw - isw * secs) / n:.2f} voluntary, "
      f"{(nv - inv * secs) / n:.2f} involuntary context switches")
EOF
}
phase "NATS request/reply, page hashes" "$N" \
  "$B/radixkv-fleet-instance" --server "$U" --model bench --query --quiet --seed 1 \
      --topics 8 --count "$N"
par() { # clients count: that many query clients at once, count queries each
  local c=$1 n=$2 ps=()
  for k in $(seq 1 "$c"); do
    "$B/radixkv-fleet-instance" --server "$U" --model bench --query --quiet --seed "$k" \
        --topics 8 --count "$n" >/dev/null &
    ps+=($!)
  done
  wait "${ps[@]}"
}
phase "NATS request/reply, page hashes, 4 clients at once" "$N" par 4 $((N / 4))
NH=$((N / 5))
# the requests are made before the phase: only their sending is in it
python3 - "$NH" "$D/http" <<'EOF'
import pickle, sys
n, out = int(sys.argv[1]), sys.argv[2]
M = (1 << 64) - 1
def mix(x):
    x = (x + 0x9e3779b97f4a7c15) & M
    x = ((x ^ (x >> 30)) * 0xbf58476d1ce4e5b9) & M
    x = ((x ^ (x >> 27)) * 0x94d049bb133111eb) & M
    return x ^ (x >> 31)
def prompt(shared, seed, k, topics):  # fleet/instance_main.c's prompt()
    topic = mix(seed ^ k) % topics
    t = [mix(shared * 131 + i) % 32000 for i in range(256)]
    t += [mix(shared * 7919 + topic * 1000 + i) % 32000 for i in range(128)]
    t += [mix(seed * 104729 + k * 4096 + i) % 32000 for i in range(64)]
    return t
reqs = []
for k in range(n):
    body = ('{"token_ids": [%s]}' % ",".join(map(str, prompt(1, 1, k, 8)))).encode()
    reqs.append(b"POST /v1/route HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n" % len(body) + body)
with open(out, "wb") as f:
    pickle.dump(reqs, f)
EOF
phase "POST /v1/route, token ids" "$NH" python3 - "$MP" "$D/http" <<'EOF'
import pickle, socket, sys
port = int(sys.argv[1])
with open(sys.argv[2], "rb") as f:
    reqs = pickle.load(f)
closed = 0
for req in reqs:
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(req.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n", 1))
    data = b""
    while True:
        x = s.recv(65536)
        if not x:
            break
        data += x
    s.close()
    head = data.split(b"\r\n\r\n", 1)[0].split(b"\r\n")
    if b" 200 " not in head[0]:
        sys.exit("bad answer: %r" % data[:200])
    closed += b"connection: close" in (l.lower() for l in head[1:])
# this phase's line (the kept-alive phase prints its own): every request
# on a connection of its own, which the server closed after its answer
print("  (Connection: close: %d connections for %d requests, %d answers closing)"
      % (len(reqs), len(reqs), closed))
EOF
phase "POST /v1/route, token ids, kept-alive connection" "$NH" python3 - "$MP" "$D/http" <<'EOF'
import pickle, socket, sys
port = int(sys.argv[1])
with open(sys.argv[2], "rb") as f:
    reqs = pickle.load(f)
s, buf, connects = None, b"", 0
for req in reqs:
    if s is None:
        s, buf, connects = socket.create_connection(("127.0.0.1", port)), b"", connects + 1
    s.sendall(req)
    while b"\r\n\r\n" not in buf:
        x = s.recv(65536)
        if not x:
            sys.exit("closed before the answer")
        buf += x
    head, buf = buf.split(b"\r\n\r\n", 1)
    lines = head.split(b"\r\n")
    if b" 200 " not in lines[0]:
        sys.exit("bad answer: %r" % head[:200])
    hdr = dict((l.split(b":", 1)[0].strip().lower(), l.split(b":", 1)[1].strip())
               for l in lines[1:])
    n = int(hdr[b"content-length"])
    while len(buf) < n:
        x = s.recv(65536)
        if not x:
            sys.exit("closed inside the answer")
        buf += x
    buf = buf[n:]
    if hdr.get(b"connection", b"").lower() == b"close" or lines[0].startswith(b"HTTP/1.0"):
        s.close()
        s = None
print("  (kept alive: %d connections for %d requests)" % (connects, len(reqs)))
EOF
# The transport's floor: radixkv-fleet-instance --echo answers the same
# queries with a fixed reply (8 instances listed) on an asynchronous
# subscription's delivery thread (as the daemon did before
# fleet/nats_loop.h), --echo-loop on fleet/nats_loop.h (as the daemon now
# does), without an index: their CPU per query is the transport's alone
# on this machine. (CLIENT_BUILD_DIR's binary.)
sched_ns() { cat /proc/"$1"/task/*/schedstat | awk '{s += $1} END {printf "%.0f\n", s}'; }
for mode in echo echo-loop; do
  "$C/radixkv-fleet-instance" --server "$U" --model "$mode" --"$mode" >"$D/$mode.out" &
  EP=$!
  pids=($EP "${pids[@]}")
  until grep -q "echo ready" "$D/$mode.out" 2>/dev/null; do sleep 0.2; done
  for c in 1 4; do
    count_start "$EP"
    e0=$(sched_ns "$EP")
    ps=()
    for k in $(seq 1 "$c"); do
      "$C/radixkv-fleet-instance" --server "$U" --model "$mode" --query --quiet --seed "$k" \
          --topics 8 --count "$((N / c))" >/dev/null 2>&1 &
      ps+=($!)
    done
    wait "${ps[@]}"
    e1=$(sched_ns "$EP")
    count_stop "$EP"
    sc=$COUNT_SC sw=$COUNT_SW nv=$COUNT_NV
    python3 -c "print('NATS --$mode, $c client(s): %.2f us per query (the transport alone); per query %s, %.2f voluntary, %.2f involuntary context switches' % (($e1 - $e0) / $N / 1e3, '%.2f system calls' % ($sc / $N) if $sc >= 0 else 'system calls not counted', $sw / $N, $nv / $N))"
  done
  kill "$EP"
done
# The fixed cost of a sleep and a wake-up on this machine, on one CPU and
# across two (bench/fleet_wake_cost.c): the part of the daemon's CPU per
# query that is the machine's, not the daemon's
if command -v cc >/dev/null &&
   cc -O2 -pthread -o "$D/wake_cost" "$(dirname "$0")/fleet_wake_cost.c" 2>/dev/null; then
  "$D/wake_cost" 20000
fi
