/*
 * cli/main.c -- the `radixkv` command: argument parsing, reports, progress.
 *
 *   radixkv replay [TRACE] [options]   replay a trace or synthetic workload
 *   radixkv sweep  [TRACE] [options]   the replay over capacities/policies
 *   radixkv help                       usage (also --help, -h)
 *
 * Exit status: 0 success, 1 a runtime failure (unreadable or malformed
 * trace, replay error), 2 a usage error (unknown option or bad value).
 * All real work lives in rkv_cli (trace*.c, workload.c, replay*.c,
 * report.c, sweep.c, svg.c, costmodel.c); this file only turns flags into
 * configs, draws the progress bar and picks the report.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/costmodel.h"
#include "cli/replay.h"
#include "cli/report.h"
#include "cli/sweep.h"
#include "cli/trace.h"
#include "cli/workload.h"
#include "radixkv.h"

#define MAX_LIST 64

static const char usage_text[] =
"usage: radixkv replay [TRACE] [options]\n"
"       radixkv sweep  [TRACE] [options]\n"
"       radixkv help\n"
"\n"
"replay  Replays a Mooncake-format JSONL trace (one object per line:\n"
"        timestamp ms, input_length, output_length, hash_ids of 512-token\n"
"        blocks) through the prefix cache. Without TRACE: the embedded\n"
"        Mooncake conversation trace (12,031 requests, Apache-2.0). Block id\n"
"        h expands to 512 deterministic tokens (token 0 = h & 0x7fffffff,\n"
"        token j = splitmix64(h*512 + j) & 0x7fffffff), cut to input_length.\n"
"        A line holds at most 1 MiB (1048576 bytes).\n"
"sweep   Runs the replay at several capacities (and policies) and prints a\n"
"        table; writes an SVG plot of hit rate and TTFT vs capacity.\n"
"\n"
"Workload:\n"
"  --workload trace|agentic|fewshot  default trace (TRACE or embedded)\n"
"  --seed N                 seed of a synthetic workload (default 1)\n"
"  --sessions N             agentic: sessions (default 48)\n"
"  --requests N             fewshot: requests (default 2000)\n"
"  --limit N                replay only the first N requests\n"
"\n"
"Cache and scheduler:\n"
"  --order file|sched       file: the cache alone, requests in file order,\n"
"                           each matched then its prompt inserted, no\n"
"                           outputs cached; sched (default): arrivals at\n"
"                           their timestamps through the scheduler, on the\n"
"                           simulated GPU below\n"
"  --capacity-tokens N      KV capacity in tokens (1e6 style or 'unbounded');\n"
"                           default: what the GPU holds beside the model\n"
"  --page-size P            tokens per block (default 16)\n"
"  --eviction NAME          lru (the only policy so far)\n"
"  --policy NAME            fcfs|lpm|dfs|priority|bounded (default lpm)\n"
"  --max-batch-tokens N     new tokens per step (default 8192)\n"
"  --max-running N          running requests (default 256)\n"
"  --dedup-min-tokens N     in-batch prefix de-duplication threshold (256)\n"
"  --max-wait-ms X          bounded policy: wait bound (default 10000)\n"
"  --time-scale X           multiply arrival times by X (default 1; 2 halves\n"
"                           the request rate). The Mooncake trace came from a\n"
"                           cluster: at scale 1 it overloads one simulated\n"
"                           GPU (queues grow for the whole hour); try 4\n"
"\n"
"Simulated GPU (sched mode). No kernel runs; each step's time is a roofline:\n"
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
"Output:\n"
"  --json                   stdout is one JSON object\n"
"  --no-progress            no progress bar (it only shows when stderr is\n"
"                           a terminal)\n"
"  --check N                verify every structure's invariants every N\n"
"                           requests/steps (slow; for debugging)\n"
"\n"
"sweep options:\n"
"  --capacities LIST        e.g. 2.5e5,1e6,3e6,1e7,unbounded\n"
"                           (default 1e5,3e5,1e6,3e6,1e7)\n"
"  --policies LIST          e.g. fcfs,lpm (default fcfs,lpm)\n"
"  --order file|sched|both  file: hit rate only (fast); default both\n"
"  --svg FILE               plot file (default sweep.svg)\n"
"\n"
"Reports: hit rate, prefill tokens saved, TTFT and end-to-end latency\n"
"p50/p90/p99, simulated throughput, preemptions, peak blocks, scheduler\n"
"time per step. Exit status: 0 ok, 1 failure (e.g. a malformed trace line,\n"
"reported as radixkv: TRACE:LINE: what), 2 usage error.\n";

static void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void usage_error(const char *fmt, ...)
{
    va_list ap;
    fputs("radixkv: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\nTry 'radixkv help'.\n", stderr);
    exit(2);
}

static int fail(const char *what)
{
    fprintf(stderr, "radixkv: %s\n", what);
    return 1;
}

/* ---- value parsing ------------------------------------------------------- */

/* A count: digits, or a number like 1e6 / 2.5e5 that is a whole number. */
static int parse_count(const char *s, uint64_t *out)
{
    if (!s || !*s || *s == '-' || *s == '+')
        return 0;
    char *end;
    errno = 0;
    if (strspn(s, "0123456789") == strlen(s)) {
        unsigned long long v = strtoull(s, &end, 10);
        if (errno || *end)
            return 0;
        *out = v;
        return 1;
    }
    double d = strtod(s, &end);
    if (errno || *end || !isfinite(d) || d < 0 || d != floor(d) || d > 9e18)
        return 0;
    *out = (uint64_t)d;
    return 1;
}

static uint64_t need_count(const char *flag, const char *v, uint64_t lo,
                           uint64_t hi)
{
    uint64_t x;
    if (!parse_count(v, &x) || x < lo || x > hi)
        usage_error("%s: expected a whole number in %llu..%llu, got '%s'",
                    flag, (unsigned long long)lo, (unsigned long long)hi, v);
    return x;
}

static double need_real(const char *flag, const char *v, double lo, double hi)
{
    char *end;
    errno = 0;
    double d = v && *v ? strtod(v, &end) : NAN;
    if (!v || !*v || errno || *end || !isfinite(d) || d < lo || d > hi)
        usage_error("%s: expected a number in [%g, %g], got '%s'", flag, lo,
                    hi, v ? v : "");
    return d;
}

static uint64_t need_capacity(const char *flag, const char *v)
{
    if (!strcmp(v, "unbounded") || !strcmp(v, "inf"))
        return RKV_REPLAY_UNBOUNDED;
    return need_count(flag, v, 1, (uint64_t)1 << 50);
}

static rkv_policy need_policy(const char *flag, const char *v)
{
    rkv_policy p;
    if (rkv_policy_from_name(v, &p) != RKV_OK)
        usage_error("%s: unknown policy '%s' (fcfs, lpm, dfs, priority, "
                    "bounded)", flag, v);
    return p;
}

/* Splits a comma list into items (modifies s). */
static size_t split_list(const char *flag, char *s, char **items)
{
    size_t n = 0;
    for (char *tok = strtok(s, ","); tok; tok = strtok(NULL, ",")) {
        if (n == MAX_LIST)
            usage_error("%s: more than %d items", flag, MAX_LIST);
        items[n++] = tok;
    }
    if (n == 0)
        usage_error("%s: empty list", flag);
    return n;
}

/* ---- options --------------------------------------------------------------- */

enum order { ORDER_SCHED, ORDER_FILE, ORDER_BOTH };
enum wl_kind { WL_TRACE, WL_AGENTIC, WL_FEWSHOT };

typedef struct options {
    int sweep;
    const char *trace;
    enum wl_kind workload;
    uint64_t seed;
    uint64_t sessions, requests;
    int sessions_set, requests_set;
    uint64_t limit;
    enum order order;
    int order_set;
    int capacity_set;
    int json;
    int progress;
    rkv_replay_config rc;
    uint64_t capacities[MAX_LIST];
    size_t num_capacities;
    rkv_policy policies[MAX_LIST];
    size_t num_policies;
    const char *svg;
} options;

/* Matches "--name VALUE" or "--name=VALUE"; advances *i past the value. */
static const char *opt_value(int argc, char **argv, int *i, const char *name)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0)
        return NULL;
    if (a[n] == '=')
        return a + n + 1;
    if (a[n] != '\0')
        return NULL;
    if (*i + 1 >= argc)
        usage_error("%s needs a value", name);
    return argv[++*i];
}

static void parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->seed = 1;
    o->progress = 1;
    o->svg = "sweep.svg";
    rkv_replay_config_init(&o->rc);
    o->rc.sched.policy = RKV_POLICY_LPM;
    static char caps_default[] = "1e5,3e5,1e6,3e6,1e7";
    char *caps_list = NULL, *pol_list = NULL;

    if (argc < 2)
        usage_error("missing command (replay, sweep or help)");
    const char *cmd = argv[1];
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        fputs(usage_text, stdout);
        exit(0);
    }
    if (!strcmp(cmd, "sweep"))
        o->sweep = 1;
    else if (strcmp(cmd, "replay"))
        usage_error("unknown command '%s' (replay, sweep or help)", cmd);

    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage_text, stdout);
            exit(0);
        }
        if (a[0] != '-' || !strcmp(a, "-")) {
            if (o->trace)
                usage_error("more than one TRACE ('%s' and '%s')", o->trace, a);
            o->trace = a;
        } else if (!strcmp(a, "--json")) {
            o->json = 1;
        } else if (!strcmp(a, "--no-progress")) {
            o->progress = 0;
        } else if ((v = opt_value(argc, argv, &i, "--workload"))) {
            if (!strcmp(v, "trace"))
                o->workload = WL_TRACE;
            else if (!strcmp(v, "agentic"))
                o->workload = WL_AGENTIC;
            else if (!strcmp(v, "fewshot"))
                o->workload = WL_FEWSHOT;
            else
                usage_error("--workload: expected trace, agentic or fewshot, "
                            "got '%s'", v);
        } else if ((v = opt_value(argc, argv, &i, "--seed"))) {
            o->seed = need_count("--seed", v, 0, UINT64_MAX);
        } else if ((v = opt_value(argc, argv, &i, "--sessions"))) {
            o->sessions = need_count("--sessions", v, 1, 1000000);
            o->sessions_set = 1;
        } else if ((v = opt_value(argc, argv, &i, "--requests"))) {
            o->requests = need_count("--requests", v, 1, 10000000);
            o->requests_set = 1;
        } else if ((v = opt_value(argc, argv, &i, "--limit"))) {
            o->limit = need_count("--limit", v, 1, UINT64_MAX);
        } else if ((v = opt_value(argc, argv, &i, "--order"))) {
            if (!strcmp(v, "file"))
                o->order = ORDER_FILE;
            else if (!strcmp(v, "sched"))
                o->order = ORDER_SCHED;
            else if (!strcmp(v, "both") && o->sweep)
                o->order = ORDER_BOTH;
            else
                usage_error("--order: expected file or sched%s, got '%s'",
                            o->sweep ? " or both" : "", v);
            o->order_set = 1;
        } else if ((v = opt_value(argc, argv, &i, "--capacity-tokens"))) {
            o->rc.capacity_tokens = need_capacity("--capacity-tokens", v);
            o->capacity_set = 1;
        } else if ((v = opt_value(argc, argv, &i, "--page-size"))) {
            o->rc.page_size =
                (uint32_t)need_count("--page-size", v, 1, RKV_MAX_PAGE_SIZE);
        } else if ((v = opt_value(argc, argv, &i, "--eviction"))) {
            if (strcmp(v, "lru"))
                usage_error("--eviction: unknown policy '%s' (only 'lru' is "
                            "implemented)", v);
        } else if ((v = opt_value(argc, argv, &i, "--policy"))) {
            o->rc.sched.policy = need_policy("--policy", v);
        } else if ((v = opt_value(argc, argv, &i, "--max-batch-tokens"))) {
            o->rc.sched.max_batch_tokens =
                (uint32_t)need_count("--max-batch-tokens", v, 1, UINT32_MAX);
        } else if ((v = opt_value(argc, argv, &i, "--max-running"))) {
            o->rc.sched.max_running =
                (uint32_t)need_count("--max-running", v, 1, UINT32_MAX);
        } else if ((v = opt_value(argc, argv, &i, "--dedup-min-tokens"))) {
            o->rc.sched.dedup_min_tokens =
                (uint32_t)need_count("--dedup-min-tokens", v, 0, UINT32_MAX);
        } else if ((v = opt_value(argc, argv, &i, "--max-wait-ms"))) {
            o->rc.sched.max_wait_ms = need_real("--max-wait-ms", v, 0, 1e12);
        } else if ((v = opt_value(argc, argv, &i, "--time-scale"))) {
            o->rc.time_scale = need_real("--time-scale", v, 0, 1e6);
        } else if ((v = opt_value(argc, argv, &i, "--check"))) {
            o->rc.check_every = (uint32_t)need_count("--check", v, 0, UINT32_MAX);
        } else if ((v = opt_value(argc, argv, &i, "--model-layers"))) {
            o->rc.cost.layers = (uint32_t)need_count("--model-layers", v, 1, 100000);
        } else if ((v = opt_value(argc, argv, &i, "--model-hidden"))) {
            o->rc.cost.hidden = (uint32_t)need_count("--model-hidden", v, 1, 10000000);
        } else if ((v = opt_value(argc, argv, &i, "--model-kv-heads"))) {
            o->rc.cost.kv_heads = (uint32_t)need_count("--model-kv-heads", v, 1, 100000);
        } else if ((v = opt_value(argc, argv, &i, "--model-head-dim"))) {
            o->rc.cost.head_dim = (uint32_t)need_count("--model-head-dim", v, 1, 100000);
        } else if ((v = opt_value(argc, argv, &i, "--model-params"))) {
            o->rc.cost.params = need_real("--model-params", v, 1, 1e15);
        } else if ((v = opt_value(argc, argv, &i, "--weight-bytes"))) {
            o->rc.cost.weight_bytes = need_real("--weight-bytes", v, 0.01, 64);
        } else if ((v = opt_value(argc, argv, &i, "--kv-bytes"))) {
            o->rc.cost.kv_dtype_bytes = need_real("--kv-bytes", v, 0.01, 64);
        } else if ((v = opt_value(argc, argv, &i, "--gpu-tflops"))) {
            o->rc.cost.peak_tflops = need_real("--gpu-tflops", v, 1e-3, 1e9);
        } else if ((v = opt_value(argc, argv, &i, "--gpu-bandwidth-tbs"))) {
            o->rc.cost.bandwidth_tbs =
                need_real("--gpu-bandwidth-tbs", v, 1e-6, 1e6);
        } else if ((v = opt_value(argc, argv, &i, "--gpu-memory-gb"))) {
            o->rc.cost.memory_gb = need_real("--gpu-memory-gb", v, 0, 1e9);
        } else if ((v = opt_value(argc, argv, &i, "--mfu"))) {
            o->rc.cost.mfu = need_real("--mfu", v, 1e-6, 1);
        } else if ((v = opt_value(argc, argv, &i, "--mbu"))) {
            o->rc.cost.mbu = need_real("--mbu", v, 1e-6, 1);
        } else if ((v = opt_value(argc, argv, &i, "--step-overhead-ms"))) {
            o->rc.cost.overhead_ms = need_real("--step-overhead-ms", v, 0, 1e6);
        } else if (o->sweep && (v = opt_value(argc, argv, &i, "--capacities"))) {
            caps_list = (char *)v;
        } else if (o->sweep && (v = opt_value(argc, argv, &i, "--policies"))) {
            pol_list = (char *)v;
        } else if (o->sweep && (v = opt_value(argc, argv, &i, "--svg"))) {
            if (!*v)
                usage_error("--svg needs a file name");
            o->svg = v;
        } else {
            usage_error("unknown option '%s'", a);
        }
    }
    if (o->trace && o->workload != WL_TRACE)
        usage_error("a TRACE file and --workload %s exclude each other",
                    o->workload == WL_AGENTIC ? "agentic" : "fewshot");
    if (o->sessions_set && o->workload != WL_AGENTIC)
        usage_error("--sessions applies to --workload agentic");
    if (o->requests_set && o->workload != WL_FEWSHOT)
        usage_error("--requests applies to --workload fewshot");
    if (o->sweep && o->capacity_set)
        usage_error("--capacity-tokens: sweep takes a list, --capacities");
    if (o->sweep) {
        if (!o->order_set)
            o->order = ORDER_BOTH;
        o->num_capacities = 0;
        char *items[MAX_LIST];
        size_t n = split_list("--capacities", caps_list ? caps_list : caps_default,
                              items);
        for (size_t k = 0; k < n; k++)
            o->capacities[o->num_capacities++] =
                need_capacity("--capacities", items[k]);
        char pol_default[] = "fcfs,lpm";
        n = split_list("--policies", pol_list ? pol_list : pol_default, items);
        for (size_t k = 0; k < n; k++)
            o->policies[o->num_policies++] = need_policy("--policies", items[k]);
    }
    if (!o->capacity_set && !o->sweep &&
        rkv_cost_default_capacity_tokens(&o->rc.cost) == 0)
        usage_error("the model's weights do not fit in --gpu-memory-gb; give "
                    "--capacity-tokens");
    if (!o->capacity_set)
        o->rc.capacity_tokens = rkv_cost_default_capacity_tokens(&o->rc.cost);
}

/* ---- progress bar ---------------------------------------------------------- */

typedef struct progress {
    uint64_t start_ns;
    uint64_t last_ns;
    int shown;
    const char *label;
    char buf[160];
} progress;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void progress_fn(void *ctx, size_t done, size_t total)
{
    progress *p = ctx;
    uint64_t t = now_ns();
    /* Only long replays get a bar: nothing in the first half second, then
     * at most ten updates per second. */
    if (t - p->start_ns < 500000000ULL && done < total)
        return;
    if (t - p->last_ns < 100000000ULL && done < total)
        return;
    if (!p->shown && done >= total)
        return;
    p->last_ns = t;
    p->shown = 1;
    int width = 40;
    int fill = total ? (int)((double)done / (double)total * width) : width;
    char bar[64];
    for (int k = 0; k < width; k++)
        bar[k] = k < fill ? '#' : '.';
    bar[width] = '\0';
    fprintf(stderr, "\r%s[%s] %5.1f%% %zu/%zu requests  %.1f s ",
            p->label ? p->label : "", bar,
            total ? 100.0 * (double)done / (double)total : 100.0, done, total,
            (double)(t - p->start_ns) * 1e-9);
    fflush(stderr);
}

static void progress_reset(progress *p, const char *label)
{
    if (p->shown)
        fputs("\r\033[K", stderr);
    p->start_ns = p->last_ns = now_ns();
    p->shown = 0;
    p->label = label;
}

/* Sweep: one bar per replay of the grid, labelled with its place. */
static void sweep_run_fn(void *ctx, size_t run, size_t runs, const char *label)
{
    progress *p = ctx;
    progress_reset(p, NULL);
    snprintf(p->buf, sizeof p->buf, "%zu/%zu %s ", run + 1, runs, label);
    p->label = p->buf;
}

/* ---- main ---------------------------------------------------------------------- */

static int load_workload(const options *o, rkv_workload *wl)
{
    rkv_status st;
    rkv_workload_init(wl);
    if (o->workload == WL_AGENTIC) {
        rkv_agentic_config c;
        rkv_agentic_config_init(&c);
        if (o->sessions_set)
            c.sessions = (uint32_t)o->sessions;
        st = rkv_workload_agentic(wl, &c, o->seed);
    } else if (o->workload == WL_FEWSHOT) {
        rkv_fewshot_config c;
        rkv_fewshot_config_init(&c);
        if (o->requests_set)
            c.requests = (uint32_t)o->requests;
        st = rkv_workload_fewshot(wl, &c, o->seed);
    } else {
        rkv_trace_reader *r = NULL;
        st = o->trace ? rkv_trace_reader_open_path(o->trace, &r)
                      : rkv_trace_reader_open_embedded(&r);
        if (st == RKV_OK)
            st = rkv_workload_load_trace(wl, r, (size_t)o->limit);
        rkv_trace_reader_close(r);
    }
    if (st != RKV_OK)
        return fail(rkv_last_error());
    if (o->limit && wl->num_reqs > o->limit) {
        /* Synthetic workloads: keep the first N arrivals. Parents precede
         * children, so the prefix is self-contained. */
        wl->num_reqs = (size_t)o->limit;
        wl->prompt_tokens = wl->output_tokens = 0;
        for (size_t i = 0; i < wl->num_reqs; i++) {
            wl->prompt_tokens += wl->reqs[i].input_length;
            wl->output_tokens += wl->reqs[i].output_length;
        }
    }
    if (wl->num_reqs == 0) {
        rkv_workload_free(wl);
        return fail("the workload has no requests");
    }
    return 0;
}

int main(int argc, char **argv)
{
    options o;
    parse_args(argc, argv, &o);
    rkv_workload wl;
    if (load_workload(&o, &wl))
        return 1;

    progress pr;
    memset(&pr, 0, sizeof pr);
    if (o.progress && isatty(2)) {
        o.rc.progress = progress_fn;
        o.rc.progress_ctx = &pr;
    }
    progress_reset(&pr, "");
    int rc = 0;
    if (!o.sweep) {
        rkv_replay_result res;
        rkv_status st = o.order == ORDER_FILE ? rkv_replay_file_order(&wl, &o.rc, &res)
                                              : rkv_replay_sched(&wl, &o.rc, &res);
        progress_reset(&pr, "");
        if (st != RKV_OK) {
            rc = fail(rkv_last_error());
        } else if (o.json) {
            rkv_report_json(stdout, &o.rc, &wl, &res);
        } else {
            rkv_report_text(stdout, &o.rc, &wl, &res);
        }
    } else {
        rkv_sweep_config sc;
        memset(&sc, 0, sizeof sc);
        sc.base = o.rc;
        sc.capacities = o.capacities;
        sc.num_capacities = o.num_capacities;
        sc.policies = o.policies;
        sc.num_policies = o.num_policies;
        sc.file_order = o.order != ORDER_SCHED;
        sc.sched = o.order != ORDER_FILE;
        if (o.rc.progress) {
            sc.on_run = sweep_run_fn;
            sc.on_run_ctx = &pr;
        }
        rkv_sweep_result sr;
        memset(&sr, 0, sizeof sr);
        rkv_status st = rkv_sweep_run(&wl, &sc, &sr);
        progress_reset(&pr, "");
        if (st != RKV_OK) {
            rc = fail(rkv_last_error());
        } else {
            if (o.json)
                rkv_sweep_print_json(stdout, &wl, &sc, &sr);
            else
                rkv_sweep_print_table(stdout, &sc, &sr);
            char *title = NULL;
            if (asprintf(&title, "radixkv sweep: %s (%zu requests)", wl.name,
                         wl.num_reqs) < 0)
                title = NULL;
            FILE *f = fopen(o.svg, "w");
            if (!f) {
                fprintf(stderr, "radixkv: %s: %s\n", o.svg, strerror(errno));
                rc = 1;
            } else {
                st = rkv_sweep_write_svg(f, title ? title : "radixkv sweep",
                                         &sc, &sr);
                if (fclose(f) != 0 && st == RKV_OK)
                    st = RKV_ERR_IO;
                if (st != RKV_OK) {
                    fprintf(stderr, "radixkv: %s: writing failed\n", o.svg);
                    rc = 1;
                } else if (!o.json) {
                    printf("plot written to %s\n", o.svg);
                }
            }
            free(title);
        }
        rkv_sweep_result_free(&sr);
    }
    rkv_workload_free(&wl);
    return rc;
}
