/*
 * cli/usage.c -- the help texts of `radixkv` (rkv_cli_usage, args.h): one
 * text per topic, assembled from shared pieces so that `radixkv help`,
 * `radixkv replay --help` and `radixkv sweep --help` never disagree.
 */
#include "cli/args.h"

static const char text_overview[] =
"usage: radixkv replay [options] [--] [TRACE]\n"
"       radixkv sweep  [options] [--] [TRACE]\n"
"       radixkv help [replay|sweep]   (also: radixkv COMMAND --help)\n"
"       radixkv --version\n"
"\n";

static const char text_replay[] =
"replay  Replays a Mooncake-format JSONL trace (one object per line:\n"
"        timestamp ms, input_length, output_length, hash_ids of 512-token\n"
"        blocks) through the prefix cache. TRACE '-' reads standard input;\n"
"        a TRACE ending in .gz (or any gzip stream) is decompressed with\n"
"        zlib. Without TRACE: the embedded Mooncake conversation trace\n"
"        (12,031 requests, Apache-2.0). Block id h expands to 512\n"
"        deterministic tokens (token 0 = h & 0x7fffffff, token j =\n"
"        splitmix64(h*512 + j) & 0x7fffffff), cut to input_length. A line\n"
"        holds at most 1 MiB (1048576 bytes).\n"
"        In sched order (the default) the report also gives the cache-alone\n"
"        hit rate (--order file) beside the scheduler's, and says whether\n"
"        the simulated GPU kept up with the arrivals.\n";

static const char text_sweep[] =
"sweep   Runs the replay at several capacities (and policies) and prints a\n"
"        table; writes an SVG plot of hit rate and TTFT vs capacity.\n";

static const char text_common[] =
"\n"
"Workload:\n"
"  --workload trace|agentic|fewshot  default trace (TRACE or embedded)\n"
"  --seed N                 seed of a synthetic workload (default 1)\n"
"  --sessions N             agentic: sessions (default 48)\n"
"  --requests N             fewshot: requests (default 2000)\n"
"  --limit N                replay only the first N requests\n"
"\n"
"Cache and scheduler:\n"
"  --page-size P            tokens per block (default 16)\n"
"  --eviction NAME          lru (the only policy so far)\n"
"  --host-capacity-tokens N a host-memory tier below the device pool, in\n"
"                           tokens (0 = none, the default): a page evicted\n"
"                           from the device moves there and a later hit\n"
"                           loads it back\n"
"  --disk-capacity-tokens N a disk tier (0 = none): below the device when\n"
"                           no host tier is given (host and disk together\n"
"                           are not supported yet)\n"
"  --write-policy P         back (default: copy down on eviction), through\n"
"                           (copy down at insert), selective[:K] (copy down\n"
"                           once a page was hit K times, default 2)\n"
"  --max-batch-tokens N     new tokens per step (default 8192)\n"
"  --max-running N          running requests (default 256)\n"
"  --dedup-min-tokens N     in-batch prefix de-duplication threshold (256)\n"
"  --max-wait-ms X          bounded policy: wait bound (default 10000)\n"
"  --time-scale auto|X      multiply arrival times by X (2 halves the request\n"
"                           rate). auto (default): the smallest scale >= 1 at\n"
"                           which the simulated GPU's estimated work (prefill\n"
"                           FLOPs of every prompt, uncached, plus the KV reads\n"
"                           of decoding) fills at most 70 % of the arrival\n"
"                           span -- a load it sustains. The Mooncake trace\n"
"                           came from a cluster: at scale 1 it overloads one\n"
"                           simulated GPU and TTFT becomes queueing. The\n"
"                           report states the scale used. Arrival times\n"
"                           count from the first arrival; a scaled span\n"
"                           beyond 2^40 ms is refused (clock precision).\n"
"\n"
"Simulated GPU (sched order). No kernel runs; each step's time is a roofline:\n"
"  step = overhead + max(FLOPs / (peak * mfu), bytes / (bandwidth * mbu))\n"
"  FLOPs = 2 * params * new tokens + 4 * layers * hidden * (keys attended\n"
"          by the new tokens, causal)\n"
"  bytes = params * weight bytes + KV bytes read by decoding requests\n"
"          (2 * layers * kv_heads * head_dim * KV bytes per context token)\n"
"  so a prefill is compute-bound (time per uncomputed token = weight FLOPs\n"
"  + attention FLOPs over its context at mfu of peak) and a decode step is\n"
"  memory-bound ((weights + KV of all decoding requests) / achieved\n"
"  bandwidth). Defaults: an 8B Llama-3-like model on one H100 SXM.\n"
"  --model-layers N (32)  --model-hidden N (4096)  --model-kv-heads N (8)\n"
"  --model-head-dim N (128)  --model-params X (8.03e9)\n"
"  --weight-bytes X (2, bf16)  --kv-bytes X (2, bf16)\n"
"  --gpu-tflops X (989)  --gpu-bandwidth-tbs X (3.35)  --gpu-memory-gb X (80)\n"
"  --mfu X (0.5)  --mbu X (0.8)  --step-overhead-ms X (0.1)\n"
"  Default capacity = (0.9 * memory - weights) / KV bytes per token.\n"
"  The fake engine emits output token k of a request as a deterministic\n"
"  function of the request, so an agentic turn that repeats its previous\n"
"  turn's output hits it; a request finishes after output_length tokens.\n"
"  Agentic turns are sent a think time after their previous turn finished.\n"
"  TTFT = first token - arrival; latency = finish - arrival; percentiles\n"
"  interpolate linearly between order statistics.\n"
"\n"
"Tiers, scheduler side (sched order; the tier capacities and write policy\n"
"are the tree's options): a waiting request whose prefix continues in host\n"
"or disk pages counts them as cached, less their load time, when ordered;\n"
"it gets a load and waits for it (only it); the load's copy time is charged\n"
"into the step that carries it (the step takes max(compute, copies)), so\n"
"into its TTFT. The report splits hits into device / host / disk.\n"
"  --pcie-gbps X (50)       host <-> device GB/s per direction (PCIe 5 x16)\n"
"  --disk-gbps X (6)        disk GB/s (NVMe); disk -> device runs at the\n"
"                           slower of the two\n"
"  --swap                   a preempted request's computed pages go to the\n"
"                           host tier when reloading them costs less than\n"
"                           recomputing them, and come back on resume (needs\n"
"                           a host tier)\n"
"\n"
"Fleet (sched order; each instance a GPU with its own cache and scheduler,\n"
"on one simulated clock):\n"
"  --instances N            simulated instances (1..64; sweep: a list, default\n"
"                           1,2,4,8). The auto time scale is divided by N:\n"
"                           the same load per instance at every N\n"
"  --route LIST             kv|round-robin|random|least-loaded (default kv,\n"
"                           round-robin with more than one instance). kv asks\n"
"                           the router index (include/radixkv_router.h), fed\n"
"                           each instance's KV events after every step and\n"
"                           its load (running requests, queued prompt\n"
"                           tokens); random is seeded by --seed.\n"
"  Reports per instance count and route: hit rate, TTFT p50/p99 and load\n"
"  balance (max / mean over instances of the queued prompt tokens averaged\n"
"  over arrivals; 1.00 is even). With a fleet, sweep varies only instances\n"
"  and routes, at the default capacity and policy (no lists, no plot).\n"
"\n"
"Output:\n"
"  --json                   stdout is one JSON object: the results, every\n"
"                           option in effect and the version; null where\n"
"                           there is no data\n"
"  --no-progress            no progress display (it only shows when stderr\n"
"                           is a terminal)\n"
"  --check N                verify every structure's invariants every N\n"
"                           requests/steps (slow; for debugging)\n"
"  --help, -h               this subcommand's help;  --version\n"
"\n"
"Numbers are decimal: 16, 1e6, 2.5e5 (not 0x10, not ' 16'). '--' ends the\n"
"options (a TRACE named '-x' follows it).\n";

static const char text_replay_opts[] =
"\n"
"replay options:\n"
"  --order file|sched       file: the cache alone, requests in file order,\n"
"                           each matched then its prompt inserted, no\n"
"                           outputs cached; sched (default): arrivals at\n"
"                           their timestamps through the scheduler, on the\n"
"                           simulated GPU below\n"
"  --capacity-tokens N      KV capacity in tokens (1e6 style or 'unbounded');\n"
"                           default: what the GPU holds beside the model\n"
"  --policy NAME            fcfs|lpm|dfs|priority|bounded (default lpm)\n";

static const char text_sweep_opts[] =
"\n"
"sweep options:\n"
"  --capacities LIST        e.g. 2.5e5,1e6,3e6,1e7,unbounded\n"
"                           (default 1e5,3e5,1e6,3e6,1e7); capacities beyond\n"
"                           what the simulated GPU holds are marked\n"
"  --policies LIST          e.g. fcfs,lpm (default fcfs,lpm)\n"
"  --order file|sched|both  file: hit rate only (fast); default both\n"
"  --svg FILE               plot file (default sweep.svg); checked writable\n"
"                           before the work starts\n"
"  --host-capacities LIST   rows are host-tier capacities (tokens, e.g.\n"
"                           2.7e6,1e7,2.7e7) at one device capacity (one\n"
"                           --capacities value, default the GPU's)\n";

static const char text_tail[] =
"\n"
"Reports: hit rate, prefill tokens saved, TTFT and end-to-end latency\n"
"p50/p90/p99, simulated throughput, preemptions, peak blocks, scheduler\n"
"time per step. Exit status: 0 ok; 1 failure (e.g. a malformed trace line,\n"
"reported as radixkv: TRACE:LINE: what; a failed write to stdout; a run in\n"
"which every request was refused); 2 usage error.\n";

void rkv_cli_usage(FILE *f, enum rkv_cli_topic topic)
{
    fputs(text_overview, f);
    if (topic != RKV_TOPIC_SWEEP)
        fputs(text_replay, f);
    if (topic != RKV_TOPIC_REPLAY)
        fputs(text_sweep, f);
    fputs(text_common, f);
    if (topic != RKV_TOPIC_SWEEP)
        fputs(text_replay_opts, f);
    if (topic != RKV_TOPIC_REPLAY)
        fputs(text_sweep_opts, f);
    fputs(text_tail, f);
}
