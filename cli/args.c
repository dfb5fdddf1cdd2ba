/*
 * cli/args.c -- the `radixkv` command line (see args.h): the option table,
 * getopt_long parsing, strict values, suggestions, and the JSON record of
 * the options in effect (the help texts are usage.c's).
 *
 * Invariant: every option of every subcommand is in one table, tagged with
 * the subcommands it belongs to, so parsing can tell "unknown" from "not
 * for this subcommand". Nothing here prints (except to the FILE given) or
 * exits.
 */
#include "cli/args.h"

#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "sim/costmodel.h"
#include "cli/escape.h"

const char *rkv_cli_cmd_name(enum rkv_cli_cmd cmd)
{
    return cmd == RKV_CMD_SWEEP ? "sweep" : "replay";
}

/* ---- the option table ---------------------------------------------------- */

enum {
    OPT_HELP = 'h',
    OPT_WORKLOAD = 256, OPT_SEED, OPT_SESSIONS, OPT_REQUESTS, OPT_LIMIT,
    OPT_ORDER, OPT_CAPACITY, OPT_PAGE_SIZE, OPT_EVICTION, OPT_POLICY,
    OPT_MAX_BATCH, OPT_MAX_RUNNING, OPT_DEDUP, OPT_MAX_WAIT, OPT_TIME_SCALE,
    OPT_CHECK, OPT_LAYERS, OPT_HIDDEN, OPT_KV_HEADS, OPT_HEAD_DIM, OPT_PARAMS,
    OPT_WEIGHT_BYTES, OPT_KV_BYTES, OPT_TFLOPS, OPT_BANDWIDTH, OPT_MEMORY,
    OPT_MFU, OPT_MBU, OPT_OVERHEAD, OPT_JSON, OPT_NO_PROGRESS, OPT_VERSION,
    OPT_CAPACITIES, OPT_POLICIES, OPT_SVG, OPT_INSTANCES, OPT_ROUTE,
    /* retention */
    OPT_EVICT_POLICY, OPT_RETENTION, OPT_PIN_TTL, OPT_PIN_CAP,
    OPT_TRACE_FORMAT, OPT_BLOCK_TOKENS, OPT_TOOL_SHARE,
    /* tiers */
    OPT_HOST_CAP, OPT_DISK_CAP, OPT_WRITE_POLICY,
    /* the fleet's router */
    OPT_QUEUE_WEIGHT, OPT_RUNNING_WEIGHT, OPT_MEDIUM_WEIGHTS, OPT_TEMPERATURE,
    OPT_EVENT_LAG, OPT_LOAD_PERIOD
};

/* tiers, scheduler side: link bandwidths, swap, the sweep over
 * host capacity */
enum { OPT_PCIE_GBPS = 512, OPT_DISK_GBPS, OPT_SWAP, OPT_HOST_CAPACITIES,
       OPT_DROP_PINNED };
/* session signals (retention v2) */
enum { OPT_SESSION_SIGNALS = 600 };
/* the real disk path (tiers v2) */
enum { OPT_DISK_PATH = 620, OPT_DISK_RECORD_BYTES, OPT_PREFETCH };
/* model presets (MLA) and quantized KV in the simulated GPU */
enum { OPT_MODEL = 640, OPT_KV_DTYPE, OPT_KV_GROUP };

#define FOR_R 1u
#define FOR_S 2u
#define FOR_B 3u

typedef struct optdef {
    const char *name;
    int has_arg;
    int id;
    unsigned cmds;
} optdef;

static const optdef optdefs[] = {
    {"help", no_argument, OPT_HELP, FOR_B},
    {"version", no_argument, OPT_VERSION, FOR_B},
    {"workload", required_argument, OPT_WORKLOAD, FOR_B},
    {"seed", required_argument, OPT_SEED, FOR_B},
    {"sessions", required_argument, OPT_SESSIONS, FOR_B},
    {"requests", required_argument, OPT_REQUESTS, FOR_B},
    {"limit", required_argument, OPT_LIMIT, FOR_B},
    {"order", required_argument, OPT_ORDER, FOR_B},
    {"capacity-tokens", required_argument, OPT_CAPACITY, FOR_R},
    {"host-capacity-tokens", required_argument, OPT_HOST_CAP, FOR_B},
    {"disk-capacity-tokens", required_argument, OPT_DISK_CAP, FOR_B},
    {"write-policy", required_argument, OPT_WRITE_POLICY, FOR_B},
    {"page-size", required_argument, OPT_PAGE_SIZE, FOR_B},
    {"eviction", required_argument, OPT_EVICTION, FOR_B},
    {"policy", required_argument, OPT_POLICY, FOR_R},
    {"max-batch-tokens", required_argument, OPT_MAX_BATCH, FOR_B},
    {"max-running", required_argument, OPT_MAX_RUNNING, FOR_B},
    {"dedup-min-tokens", required_argument, OPT_DEDUP, FOR_B},
    {"max-wait-ms", required_argument, OPT_MAX_WAIT, FOR_B},
    {"time-scale", required_argument, OPT_TIME_SCALE, FOR_B},
    {"check", required_argument, OPT_CHECK, FOR_B},
    {"model", required_argument, OPT_MODEL, FOR_B},
    {"model-layers", required_argument, OPT_LAYERS, FOR_B},
    {"model-hidden", required_argument, OPT_HIDDEN, FOR_B},
    {"model-kv-heads", required_argument, OPT_KV_HEADS, FOR_B},
    {"model-head-dim", required_argument, OPT_HEAD_DIM, FOR_B},
    {"model-params", required_argument, OPT_PARAMS, FOR_B},
    {"weight-bytes", required_argument, OPT_WEIGHT_BYTES, FOR_B},
    {"kv-bytes", required_argument, OPT_KV_BYTES, FOR_B},
    {"kv-dtype", required_argument, OPT_KV_DTYPE, FOR_B},
    {"kv-quant-group", required_argument, OPT_KV_GROUP, FOR_B},
    {"gpu-tflops", required_argument, OPT_TFLOPS, FOR_B},
    {"gpu-bandwidth-tbs", required_argument, OPT_BANDWIDTH, FOR_B},
    {"gpu-memory-gb", required_argument, OPT_MEMORY, FOR_B},
    {"mfu", required_argument, OPT_MFU, FOR_B},
    {"mbu", required_argument, OPT_MBU, FOR_B},
    {"step-overhead-ms", required_argument, OPT_OVERHEAD, FOR_B},
    {"pcie-gbps", required_argument, OPT_PCIE_GBPS, FOR_B},
    {"disk-gbps", required_argument, OPT_DISK_GBPS, FOR_B},
    {"swap", no_argument, OPT_SWAP, FOR_B},
    {"prefetch", required_argument, OPT_PREFETCH, FOR_B},
    {"host-capacities", required_argument, OPT_HOST_CAPACITIES, FOR_S},
    {"json", no_argument, OPT_JSON, FOR_B},
    {"no-progress", no_argument, OPT_NO_PROGRESS, FOR_B},
    {"capacities", required_argument, OPT_CAPACITIES, FOR_S},
    {"policies", required_argument, OPT_POLICIES, FOR_S},
    {"svg", required_argument, OPT_SVG, FOR_S},
    {"instances", required_argument, OPT_INSTANCES, FOR_B},
    {"route", required_argument, OPT_ROUTE, FOR_B},
    {"queue-weight", required_argument, OPT_QUEUE_WEIGHT, FOR_B},
    {"running-weight", required_argument, OPT_RUNNING_WEIGHT, FOR_B},
    {"medium-weights", required_argument, OPT_MEDIUM_WEIGHTS, FOR_B},
    {"temperature", required_argument, OPT_TEMPERATURE, FOR_B},
    {"event-lag-ms", required_argument, OPT_EVENT_LAG, FOR_B},
    {"load-period-ms", required_argument, OPT_LOAD_PERIOD, FOR_B},
    /* retention */
    {"evict-policy", required_argument, OPT_EVICT_POLICY, FOR_B},
    {"retention", required_argument, OPT_RETENTION, FOR_B},
    {"pin-ttl-ms", required_argument, OPT_PIN_TTL, FOR_B},
    {"pin-cap-pct", required_argument, OPT_PIN_CAP, FOR_B},
    {"drop-pinned", no_argument, OPT_DROP_PINNED, FOR_B},
    {"session-signals", required_argument, OPT_SESSION_SIGNALS, FOR_B},
    {"disk-path", required_argument, OPT_DISK_PATH, FOR_R},
    {"disk-record-bytes", required_argument, OPT_DISK_RECORD_BYTES, FOR_R},
    {"trace-format", required_argument, OPT_TRACE_FORMAT, FOR_B},
    {"block-tokens", required_argument, OPT_BLOCK_TOKENS, FOR_B},
    {"tool-share", required_argument, OPT_TOOL_SHARE, FOR_B},
};
#define NUM_OPTS (sizeof optdefs / sizeof optdefs[0])

static const optdef *opt_by_id(int id)
{
    for (size_t i = 0; i < NUM_OPTS; i++)
        if (optdefs[i].id == id)
            return &optdefs[i];
    return NULL;
}

/* ---- errors and suggestions ------------------------------------------------ */

typedef struct arg_error {
    char *buf;
    size_t cap;
    int failed;
} arg_error;

static void arg_fail(arg_error *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void arg_fail(arg_error *e, const char *fmt, ...)
{
    if (e->failed)
        return; /* the first problem is the one reported */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->buf, e->cap, fmt, ap);
    va_end(ap);
    e->failed = 1;
}

static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64)
        return (size_t)-1;
    size_t row[65];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* The closest of names[0..n) to s, if close enough to be a typo. */
static const char *closest(const char *s, const char *const *names, size_t n)
{
    const char *best = NULL;
    size_t bd = (size_t)-1;
    for (size_t i = 0; i < n; i++) {
        size_t d = edit_distance(s, names[i]);
        if (d < bd) {
            bd = d;
            best = names[i];
        }
    }
    size_t len = strlen(s);
    size_t limit = len / 3 > 2 ? len / 3 : 2;
    return bd <= limit ? best : NULL;
}

static const char *closest_option(const char *name)
{
    const char *names[NUM_OPTS];
    for (size_t i = 0; i < NUM_OPTS; i++)
        names[i] = optdefs[i].name;
    return closest(name, names, NUM_OPTS);
}

/* "--name" of an argv element "--name=value" / "-name" into buf. */
static const char *bare_name(const char *arg, char *buf, size_t cap)
{
    while (*arg == '-')
        arg++;
    size_t n = strcspn(arg, "=");
    if (n >= cap)
        n = cap - 1;
    memcpy(buf, arg, n);
    buf[n] = '\0';
    return buf;
}

static void unknown_option(arg_error *e, const char *arg)
{
    char name[80];
    bare_name(arg, name, sizeof name);
    /* an ambiguous abbreviation? */
    size_t len = strlen(name), matches = 0;
    char list[400] = "";
    for (size_t i = 0; len && i < NUM_OPTS; i++) {
        if (strncmp(optdefs[i].name, name, len) == 0) {
            size_t l = strlen(list);
            snprintf(list + l, sizeof list - l, "%s--%s", matches ? ", " : "",
                     optdefs[i].name);
            matches++;
        }
    }
    if (matches > 1 && arg[0] == '-' && arg[1] == '-') {
        arg_fail(e, "option '%s' is ambiguous (%s)", arg, list);
        return;
    }
    const char *s = closest_option(name);
    if (s)
        arg_fail(e, "unknown option '%s'; did you mean '--%s'?", arg, s);
    else
        arg_fail(e, "unknown option '%s'", arg);
}

static void wrong_command(arg_error *e, const optdef *d, enum rkv_cli_cmd cmd)
{
    const char *other = cmd == RKV_CMD_REPLAY ? "sweep" : "replay";
    const char *hint = "";
    switch (d->id) {
    case OPT_CAPACITIES: hint = " (replay takes one: --capacity-tokens)"; break;
    case OPT_POLICIES: hint = " (replay takes one: --policy)"; break;
    case OPT_CAPACITY: hint = " (sweep takes a list: --capacities)"; break;
    case OPT_POLICY: hint = " (sweep takes a list: --policies)"; break;
    default: break;
    }
    arg_fail(e, "--%s is an option of '%s', not of '%s'%s", d->name, other,
             rkv_cli_cmd_name(cmd), hint);
}

/* ---- strict values -------------------------------------------------------------- */

/* Plain decimal: digits (no leading zero unless alone), optional '.'
 * digits, optional exponent. Nothing else: no sign, space, hex, inf. */
static int strict_decimal(const char *s)
{
    const char *p = s;
    if (!(*p >= '0' && *p <= '9'))
        return 0;
    if (*p == '0' && p[1] >= '0' && p[1] <= '9')
        return 0;
    while (*p >= '0' && *p <= '9')
        p++;
    if (*p == '.') {
        p++;
        if (!(*p >= '0' && *p <= '9'))
            return 0;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (!(*p >= '0' && *p <= '9'))
            return 0;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    return *p == '\0';
}

/* What parse_count made of a value. */
enum { COUNT_OK, COUNT_SYNTAX, COUNT_FRACTION, COUNT_HUGE };

static int digit_at(const char *ip, size_t il, const char *fp, size_t i)
{
    return (i < il ? ip[i] : fp[i - il]) - '0';
}

/* A count: digits, or a decimal like 1e6 / 2.5e5 / 1e19 that is a whole
 * number, read exactly from its digits (a double would round 2^53 + 1 and
 * refuse what lies between 9e18 and 2^64). */
static int parse_count(const char *s, uint64_t *out)
{
    static const char digits[] = "0123456789";
    if (!s || !strict_decimal(s))
        return COUNT_SYNTAX;
    const char *ip = s, *fp = s;
    size_t il = strspn(ip, digits), fl = 0;
    const char *p = ip + il;
    if (*p == '.') {
        fp = p + 1;
        fl = strspn(fp, digits);
        p = fp + fl;
    }
    int64_t e = 0; /* the exponent, saturated far beyond any 64-bit count */
    if (*p == 'e' || *p == 'E') {
        p++;
        int neg = *p == '-';
        if (*p == '+' || *p == '-')
            p++;
        for (; *p; p++)
            if (e < INT64_C(1) << 40)
                e = e * 10 + (*p - '0');
        if (neg)
            e = -e;
    }
    /* the significant digits first .. last of int digits then fraction */
    size_t n = il + fl, first = 0, last = n;
    while (first < n && digit_at(ip, il, fp, first) == 0)
        first++;
    if (first == n) {
        *out = 0;
        return COUNT_OK;
    }
    while (digit_at(ip, il, fp, last - 1) == 0)
        last--;
    /* value = digits[first, last) * 10^k */
    int64_t k = e - (int64_t)fl + (int64_t)(n - last);
    if (k < 0)
        return COUNT_FRACTION; /* its last significant digit is a fraction */
    if ((int64_t)(last - first) + k > 20)
        return COUNT_HUGE;
    uint64_t v = 0;
    for (size_t i = first; i < last; i++) {
        unsigned d = (unsigned)digit_at(ip, il, fp, i);
        if (v > (UINT64_MAX - d) / 10)
            return COUNT_HUGE;
        v = v * 10 + d;
    }
    for (int64_t i = 0; i < k; i++) {
        if (v > UINT64_MAX / 10)
            return COUNT_HUGE;
        v *= 10;
    }
    *out = v;
    return COUNT_OK;
}

/* A count in lo..hi; alt (or NULL) names a word also accepted. */
static uint64_t need_count_or(arg_error *e, const char *flag, const char *v,
                              uint64_t lo, uint64_t hi, const char *alt)
{
    uint64_t x = 0;
    int r = parse_count(v, &x);
    const char *why = r == COUNT_FRACTION ? " (not a whole number)"
                      : r == COUNT_HUGE || (r == COUNT_OK && x > hi)
                          ? " (too large)"
                      : r == COUNT_OK && x < lo ? " (too small)"
                                                : "";
    if (r != COUNT_OK || x < lo || x > hi) {
        arg_fail(e, "--%s: expected a whole number in %llu..%llu%s%s, got "
                    "'%s'%s", flag, (unsigned long long)lo,
                 (unsigned long long)hi, alt ? " or " : "", alt ? alt : "", v,
                 why);
        return lo;
    }
    return x;
}

static uint64_t need_count(arg_error *e, const char *flag, const char *v,
                           uint64_t lo, uint64_t hi)
{
    return need_count_or(e, flag, v, lo, hi, NULL);
}

/* x in the fewest digits that read back as x, so a stated bound is the
 * bound compared against. */
static void fmt_real(char *buf, size_t cap, double x)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, x);
        if (strtod(buf, NULL) == x)
            return;
    }
}

/* A number in [lo, hi] (lo, hi finite), compared after rounding to the
 * nearest double: an underflow (1e-400) is the 0 or tiny value strtod
 * returns, in range when lo allows it. alt as for need_count_or. */
static double need_real_or(arg_error *e, const char *flag, const char *v, double lo,
                           double hi, const char *alt)
{
    char *end = NULL;
    double d = strict_decimal(v) ? strtod(v, &end) : NAN;
    if (!strict_decimal(v) || *end || !isfinite(d) || d < lo || d > hi) {
        char l[32], h[32];
        fmt_real(l, sizeof l, lo);
        fmt_real(h, sizeof h, hi);
        arg_fail(e, "--%s: expected a number in [%s, %s]%s%s, got '%s'", flag,
                 l, h, alt ? " or " : "", alt ? alt : "", v);
        return lo;
    }
    return d;
}

static double need_real(arg_error *e, const char *flag, const char *v, double lo,
                        double hi)
{
    return need_real_or(e, flag, v, lo, hi, NULL);
}

/* Fails with the usual "--flag: expected <names>, got 'v'" unless v parsed. */
static void need_name(arg_error *e, int parsed, const char *flag, const char *names,
                      const char *v)
{
    if (!parsed)
        arg_fail(e, "--%s: expected %s, got '%s'", flag, names, v);
}

static uint64_t need_capacity(arg_error *e, const char *flag, const char *v)
{
    if (!strcmp(v, "unbounded"))
        return RKV_REPLAY_UNBOUNDED;
    return need_count_or(e, flag, v, 1, (uint64_t)1 << 50, "'unbounded'");
}

static rkv_policy need_policy(arg_error *e, const char *flag, const char *v)
{
    rkv_policy p = RKV_POLICY_LPM;
    if (rkv_policy_from_name(v, &p) != RKV_OK)
        arg_fail(e, "--%s: unknown policy '%s' (fcfs, lpm, dfs, priority, "
                    "bounded)", flag, v);
    return p;
}

/* --write-policy back | through | selective[:k] (k >= 1, default 2). */
static void need_write_policy(arg_error *e, const char *v, rkv_replay_config *rc)
{
    if (!strcmp(v, "back")) {
        rc->write_policy = RKV_WRITE_BACK;
    } else if (!strcmp(v, "through")) {
        rc->write_policy = RKV_WRITE_THROUGH;
    } else if (!strncmp(v, "selective", 9) && (v[9] == '\0' || v[9] == ':')) {
        rc->write_policy = RKV_WRITE_SELECTIVE;
        rc->selective_hits = 2;
        if (v[9] == ':') {
            uint64_t k = 0;
            if (parse_count(v + 10, &k) != COUNT_OK || k < 1 ||
                k > UINT32_MAX)
                arg_fail(e, "--write-policy: selective:K needs a whole "
                            "number K in 1..%u, got '%s'", UINT32_MAX, v);
            else
                rc->selective_hits = (uint32_t)k;
        }
    } else {
        arg_fail(e, "--write-policy: expected back, through or "
                    "selective[:K], got '%s'", v);
    }
}

/* --prefetch off | best-effort | wait | timeout:MS (MS of the simulated
 * clock, >= 0). */
static void need_prefetch(arg_error *e, const char *v, rkv_sched_config *sc)
{
    if (!strcmp(v, "off")) {
        sc->prefetch = RKV_PREFETCH_OFF;
    } else if (!strcmp(v, "best-effort")) {
        sc->prefetch = RKV_PREFETCH_BEST_EFFORT;
    } else if (!strcmp(v, "wait")) {
        sc->prefetch = RKV_PREFETCH_WAIT;
    } else if (!strncmp(v, "timeout:", 8)) {
        sc->prefetch = RKV_PREFETCH_TIMEOUT;
        sc->prefetch_timeout_ms = need_real(e, "prefetch timeout:MS", v + 8, 0, 1e12);
    } else {
        arg_fail(e, "--prefetch: expected off, best-effort, wait or "
                    "timeout:MS, got '%s'", v);
    }
}

/* Splits a comma list (copied into buf) into items; an empty item
 * (",,", a leading or trailing comma, or an empty list) is refused. */
static size_t split_list(arg_error *e, const char *flag, const char *s, char *buf,
                         size_t cap, char **items)
{
    size_t len = strlen(s);
    if (len >= cap) {
        arg_fail(e, "--%s: list too long", flag);
        return 0;
    }
    memcpy(buf, s, len + 1);
    size_t n = 0;
    char *p = buf;
    for (;;) {
        char *comma = strchr(p, ',');
        if (comma)
            *comma = '\0';
        if (*p == '\0') {
            arg_fail(e, "--%s: empty item %zu in '%s'", flag, n + 1, s);
            return 0;
        }
        if (n == RKV_CLI_MAX_LIST) {
            arg_fail(e, "--%s: more than %d items", flag, RKV_CLI_MAX_LIST);
            return 0;
        }
        items[n++] = p;
        if (!comma)
            break;
        p = comma + 1;
    }
    return n;
}

/* ---- parsing ------------------------------------------------------------------------- */

static const char *const command_names[] = {"replay", "sweep", "help",
                                            "version"};

static void defaults(rkv_cli_options *o)
{
    memset(o, 0, sizeof *o);
    o->seed = 1;
    o->progress = 1;
    o->svg = "sweep.svg";
    o->time_scale_auto = 1; /* a load the simulated GPU sustains */
    o->tool_share = -1;
    rkv_router_config_init(&o->router);     /* the agentic generator's default */
    rkv_replay_config_init(&o->rc);
    o->rc.sched.policy = RKV_POLICY_LPM;
}

static int topic_of(const char *s, enum rkv_cli_topic *t)
{
    if (!strcmp(s, "replay"))
        *t = RKV_TOPIC_REPLAY;
    else if (!strcmp(s, "sweep"))
        *t = RKV_TOPIC_SWEEP;
    else
        return 0;
    return 1;
}

/* --model NAME (or --model=NAME) sets every model field first, so the
 * --model-* options adjust a preset wherever they stand; the last --model
 * wins. Scanning stops at "--" (what follows is not an option). */
static void model_preset(arg_error *e, rkv_cli_options *o, int argc, char **argv)
{
    const char *name = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--"))
            break;
        if (!strcmp(argv[i], "--model") && i + 1 < argc)
            name = argv[++i];
        else if (!strncmp(argv[i], "--model=", 8))
            name = argv[i] + 8;
    }
    if (name == NULL)
        return;
    if (rkv_cost_model_preset(&o->rc.cost, name) != RKV_OK)
        arg_fail(e, "--model: no model '%s' (%s)", name, rkv_cost_model_preset_names());
    else
        o->model = name;
}

/* One option's value into o. */
/* A router weight: any one given means the router was configured by hand. */
static double router_weight(arg_error *e, rkv_cli_options *o, const char *flag,
                            const char *v)
{
    o->router_set = 1;
    return need_real(e, flag, v, 0, 1e12);
}

static void apply(arg_error *e, rkv_cli_options *o, const optdef *d, const char *v,
                  const char **caps, const char **pols, int *order_set)
{
    const char *f = d->name;
    rkv_cost_model *m = &o->rc.cost;
    switch (d->id) {
    case OPT_WORKLOAD:
        if (!strcmp(v, "trace"))
            o->workload = RKV_WL_TRACE;
        else if (!strcmp(v, "agentic"))
            o->workload = RKV_WL_AGENTIC;
        else if (!strcmp(v, "fewshot"))
            o->workload = RKV_WL_FEWSHOT;
        else
            arg_fail(e, "--workload: expected trace, agentic or fewshot, got "
                        "'%s'", v);
        break;
    case OPT_SEED: o->seed = need_count(e, f, v, 0, UINT64_MAX); break;
    case OPT_SESSIONS: o->sessions = need_count(e, f, v, 1, 1000000); break;
    case OPT_REQUESTS: o->requests = need_count(e, f, v, 1, 10000000); break;
    case OPT_LIMIT: o->limit = need_count(e, f, v, 1, UINT64_MAX); break;
    case OPT_ORDER:
        *order_set = 1;
        if (!strcmp(v, "file"))
            o->order = RKV_ORDER_FILE;
        else if (!strcmp(v, "sched"))
            o->order = RKV_ORDER_SCHED;
        else if (!strcmp(v, "both") && o->cmd == RKV_CMD_SWEEP)
            o->order = RKV_ORDER_BOTH;
        else
            arg_fail(e, "--order: expected file or sched%s, got '%s'",
                     o->cmd == RKV_CMD_SWEEP ? " or both" : "", v);
        break;
    case OPT_CAPACITY:
        o->rc.capacity_tokens = need_capacity(e, f, v);
        o->capacity_set = 1;
        break;
    case OPT_PAGE_SIZE:
        o->rc.page_size = (uint32_t)need_count(e, f, v, 1, RKV_MAX_PAGE_SIZE);
        break;
    case OPT_EVICTION: /* the older name of --evict-policy */
    case OPT_EVICT_POLICY:
        if (rkv_evict_policy_from_name(v, &o->rc.evict_policy) != RKV_OK)
            arg_fail(e, "--%s: %s", f, rkv_last_error());
        break;
    case OPT_RETENTION:
        need_name(e, rkv_replay_retention_parse(v, &o->rc.retention), "retention",
                  "none, hints, priority, ttl, ttl-oracle or ttl-session", v);
        break;
    case OPT_SESSION_SIGNALS:
        if (!strcmp(v, "none"))
            o->rc.session_signals = 0;
        else if (!strcmp(v, "end"))
            o->rc.session_signals = RKV_SIGNAL_END;
        else if (!strcmp(v, "wait"))
            o->rc.session_signals = RKV_SIGNAL_WAIT;
        else if (!strcmp(v, "both"))
            o->rc.session_signals = RKV_SIGNAL_END | RKV_SIGNAL_WAIT;
        else
            arg_fail(e, "--session-signals: expected none, end, wait or "
                        "both, got '%.64s'", v);
        break;
    case OPT_PIN_TTL:
        o->rc.retention_ttl_ms = need_count(e, f, v, 1, (uint64_t)1 << 40);
        break;
    case OPT_PIN_CAP:
        o->rc.max_pinned_pct = (uint32_t)need_count(e, f, v, 0, 100);
        break;
    case OPT_TRACE_FORMAT:
        need_name(e, rkv_trace_format_parse(v, &o->trace_format), "trace-format",
                  "auto, mooncake or bailian", v);
        break;
    case OPT_TOOL_SHARE: o->tool_share = need_real(e, f, v, 0, 1); break;
    case OPT_BLOCK_TOKENS:
        o->block_tokens = (uint32_t)need_count(e, f, v, 1,
                                               RKV_TRACE_BLOCK_TOKENS);
        break;
    case OPT_HOST_CAP:
        o->rc.host_capacity_tokens = need_count(e, f, v, 0, UINT64_MAX);
        break;
    case OPT_DISK_CAP:
        o->rc.disk_capacity_tokens = need_count(e, f, v, 0, UINT64_MAX);
        break;
    case OPT_WRITE_POLICY: need_write_policy(e, v, &o->rc); break;
    case OPT_POLICY: o->rc.sched.policy = need_policy(e, f, v); break;
    case OPT_MAX_BATCH:
        o->rc.sched.max_batch_tokens = (uint32_t)need_count(e, f, v, 1, UINT32_MAX);
        break;
    case OPT_MAX_RUNNING:
        o->rc.sched.max_running = (uint32_t)need_count(e, f, v, 1, UINT32_MAX);
        break;
    case OPT_DEDUP:
        o->rc.sched.dedup_min_tokens = (uint32_t)need_count(e, f, v, 0, UINT32_MAX);
        break;
    case OPT_MAX_WAIT: o->rc.sched.max_wait_ms = need_real(e, f, v, 0, 1e12); break;
    case OPT_TIME_SCALE:
        if (!strcmp(v, "auto")) {
            o->time_scale_auto = 1;
        } else {
            o->time_scale_auto = 0;
            o->rc.time_scale = need_real_or(e, f, v, 0, 1e6, "'auto'");
        }
        break;
    case OPT_CHECK: o->rc.check_every = (uint32_t)need_count(e, f, v, 0, UINT32_MAX); break;
    case OPT_MODEL: break; /* applied before the other options: model_preset */
    case OPT_LAYERS: m->layers = (uint32_t)need_count(e, f, v, 1, 100000); break;
    case OPT_HIDDEN: m->hidden = (uint32_t)need_count(e, f, v, 1, 10000000); break;
    case OPT_KV_HEADS: m->kv_heads = (uint32_t)need_count(e, f, v, 1, 100000); break;
    case OPT_HEAD_DIM: m->head_dim = (uint32_t)need_count(e, f, v, 1, 100000); break;
    case OPT_PARAMS: m->params = need_real(e, f, v, 1, 1e15); break;
    case OPT_WEIGHT_BYTES: m->weight_bytes = need_real(e, f, v, 0.01, 64); break;
    case OPT_KV_BYTES:
        m->kv_dtype_bytes = need_real(e, f, v, 0.01, 64);
        o->kv_bytes_set = 1;
        break;
    case OPT_KV_DTYPE:
        need_name(e, rkv_cost_kv_dtype_parse(v, &m->kv_dtype), "kv-dtype",
                  "bf16, fp8, fp8-e5m2, int8 or int4", v);
        break;
    case OPT_KV_GROUP: m->kv_quant_group = (uint32_t)need_count(e, f, v, 2, 4096); break;
    case OPT_TFLOPS: m->peak_tflops = need_real(e, f, v, 1e-3, 1e9); break;
    case OPT_BANDWIDTH: m->bandwidth_tbs = need_real(e, f, v, 1e-6, 1e6); break;
    case OPT_MEMORY: m->memory_gb = need_real(e, f, v, 0, 1e9); break;
    case OPT_MFU: m->mfu = need_real(e, f, v, 1e-6, 1); break;
    case OPT_MBU: m->mbu = need_real(e, f, v, 1e-6, 1); break;
    case OPT_OVERHEAD: m->overhead_ms = need_real(e, f, v, 0, 1e6); break;
    case OPT_PCIE_GBPS: m->pcie_gbps = need_real(e, f, v, 1e-6, 1e6); break;
    case OPT_DISK_GBPS: m->disk_gbps = need_real(e, f, v, 1e-6, 1e6); break;
    case OPT_SWAP: o->rc.swap = 1; break;
    case OPT_PREFETCH: need_prefetch(e, v, &o->rc.sched); break;
    case OPT_DROP_PINNED: o->rc.drop_pinned = 1; break;
    case OPT_DISK_PATH:
        if (v[0] == '\0')
            arg_fail(e, "--disk-path: empty path");
        o->rc.disk_path = v;
        break;
    case OPT_DISK_RECORD_BYTES:
        o->rc.disk_record_bytes = (uint32_t)need_count(e, f, v, 1, 1u << 24);
        break;
    case OPT_HOST_CAPACITIES: o->host_caps_arg = v; break;
    case OPT_JSON: o->json = 1; break;
    case OPT_NO_PROGRESS: o->progress = 0; break;
    case OPT_CAPACITIES: *caps = v; break;
    case OPT_POLICIES: *pols = v; break;
    case OPT_INSTANCES: o->instances_arg = v; o->fleet = 1; break;
    case OPT_ROUTE: o->routes_arg = v; o->fleet = 1; break;
    case OPT_QUEUE_WEIGHT: o->router.queue_weight = router_weight(e, o, f, v); break;
    case OPT_RUNNING_WEIGHT: o->router.running_weight = router_weight(e, o, f, v); break;
    case OPT_MEDIUM_WEIGHTS: {
        char buf[128], *items[RKV_CLI_MAX_LIST];
        size_t n = split_list(e, "medium-weights", v, buf, sizeof buf, items);
        if (n != RKV_MEDIUM_COUNT)
            arg_fail(e, "--medium-weights: expected device,host,disk (three "
                        "numbers), got '%s'", v);
        for (size_t k = 0; k < n && k < RKV_MEDIUM_COUNT; k++)
            o->router.medium_weight[k] = router_weight(e, o, f, items[k]);
        o->router_set = 1;
        break;
    }
    case OPT_TEMPERATURE: o->router.temperature = router_weight(e, o, f, v); break;
    case OPT_EVENT_LAG: o->event_lag_ms = need_real(e, f, v, 0, 1e9); break;
    case OPT_LOAD_PERIOD: o->load_period_ms = need_real(e, f, v, 0, 1e9); break;
    case OPT_SVG:
        if (!*v)
            arg_fail(e, "--svg needs a file name");
        o->svg = v;
        break;
    default: break;
    }
}

/* --instances and --route: lists (replay: one instance count), the
 * scheduler replay only; sweep's fleet grid replaces its capacity x
 * policy grid. */
static void finish_fleet(arg_error *e, rkv_cli_options *o, const char *caps,
                         const char *pols, int order_set)
{
    char buf[4096];
    char *items[RKV_CLI_MAX_LIST];
    int sweep = o->cmd == RKV_CMD_SWEEP;
    if (order_set && o->order != RKV_ORDER_SCHED)
        arg_fail(e, "--instances and --route simulate a fleet of schedulers: "
                    "they need --order sched");
    o->order = RKV_ORDER_SCHED;
    if (sweep && (caps || pols))
        arg_fail(e, "--%s does not combine with --instances/--route (a fleet "
                    "sweep varies instances and routes at one capacity and "
                    "policy)", caps ? "capacities" : "policies");
    const char *inst = o->instances_arg ? o->instances_arg
                                        : (sweep ? "1,2,4,8" : "1");
    size_t n = split_list(e, "instances", inst, buf, sizeof buf, items);
    if (!sweep && n > 1)
        arg_fail(e, "--instances: replay takes one count, got '%s' (sweep "
                    "takes a list)", inst);
    for (size_t k = 0; k < n; k++)
        o->instances[o->num_instances++] = (uint32_t)need_count(
            e, "instances", items[k], 1, RKV_FLEET_MAX_INSTANCES);
    int many = 0;
    for (size_t k = 0; k < o->num_instances; k++)
        many |= o->instances[k] > 1;
    const char *routes = o->routes_arg ? o->routes_arg
                                       : (many ? "kv,round-robin" : "kv");
    n = split_list(e, "route", routes, buf, sizeof buf, items);
    for (size_t k = 0; k < n; k++) {
        enum rkv_route r = RKV_ROUTE_KV;
        if (!rkv_route_parse(items[k], &r))
            arg_fail(e, "--route: expected kv, round-robin, random or "
                        "least-loaded, got '%s'", items[k]);
        for (size_t j = 0; j < o->num_routes; j++)
            if (o->routes[j] == r)
                arg_fail(e, "--route: '%s' is listed twice", items[k]);
        o->routes[o->num_routes++] = r;
    }
}

/* sweep --host-capacities: the rows are host-tier capacities at one
 * device capacity (one --capacities item, or the simulated GPU's; with
 * --instances/--route a fleet replay per point, at the simulated GPU's
 * capacity per instance). */
static void finish_host_caps(arg_error *e, rkv_cli_options *o, const char *caps)
{
    char buf[4096];
    char *items[RKV_CLI_MAX_LIST];
    if (o->fleet) {
        /* a fleet per point: the device capacity per instance is the
         * fleet sweep's (the simulated GPU's); --capacities was refused
         * with --instances already */
        o->num_capacities = 1;
        o->capacities[0] = o->capacity_set
                               ? o->rc.capacity_tokens
                               : rkv_cost_default_capacity_tokens(&o->rc.cost);
        if (o->capacities[0] == 0)
            arg_fail(e, "the model's weights do not fit in --gpu-memory-gb; "
                        "give --capacity-tokens");
        caps = NULL;
    } else if (caps && o->num_capacities != 1)
        arg_fail(e, "--host-capacities sweeps the host tier at one device "
                    "capacity: give --capacities one value, got '%s'", caps);
    if (!caps && !o->fleet) {
        o->capacities[0] = rkv_cost_default_capacity_tokens(&o->rc.cost);
        o->num_capacities = 1;
        if (o->capacities[0] == 0)
            arg_fail(e, "the model's weights do not fit in --gpu-memory-gb; "
                        "give --capacities");
    }
    size_t n = split_list(e, "host-capacities", o->host_caps_arg, buf,
                          sizeof buf, items);
    for (size_t k = 0; k < n; k++)
        o->host_capacities[o->num_host_capacities++] =
            need_count(e, "host-capacities", items[k], 1, (uint64_t)1 << 50);
}

static void finish(arg_error *e, rkv_cli_options *o, const char *caps,
                   const char *pols, int order_set, char *const *pos,
                   int npos)
{
    if (npos > 1)
        arg_fail(e, "more than one TRACE ('%s' and '%s')", pos[0], pos[1]);
    if (npos == 1)
        o->trace = pos[0];
    if (o->trace && o->workload != RKV_WL_TRACE)
        arg_fail(e, "a TRACE file and --workload %s exclude each other",
                 o->workload == RKV_WL_AGENTIC ? "agentic" : "fewshot");
    if (o->sessions && o->workload != RKV_WL_AGENTIC)
        arg_fail(e, "--sessions applies to --workload agentic");
    if (o->requests && o->workload != RKV_WL_FEWSHOT)
        arg_fail(e, "--requests applies to --workload fewshot");
    if (o->tool_share >= 0 && o->workload != RKV_WL_AGENTIC)
        arg_fail(e, "--tool-share applies to --workload agentic");
    if ((o->trace_format || o->block_tokens) && o->workload != RKV_WL_TRACE)
        arg_fail(e, "--%s applies to --workload trace",
                 o->trace_format ? "trace-format" : "block-tokens");
    if (o->cmd == RKV_CMD_SWEEP && !o->fleet) {
        if (!order_set)
            o->order = RKV_ORDER_BOTH;
        char buf[4096];
        char *items[RKV_CLI_MAX_LIST];
        size_t n = split_list(e, "capacities", caps ? caps : "1e5,3e5,1e6,3e6,1e7",
                              buf, sizeof buf, items);
        for (size_t k = 0; k < n; k++)
            o->capacities[o->num_capacities++] =
                need_capacity(e, "capacities", items[k]);
        n = split_list(e, "policies", pols ? pols : "fcfs,lpm", buf, sizeof buf,
                       items);
        for (size_t k = 0; k < n; k++)
            o->policies[o->num_policies++] = need_policy(e, "policies", items[k]);
    }
    if (o->fleet)
        finish_fleet(e, o, caps, pols, order_set);
    else if (o->router_set || o->event_lag_ms > 0 || o->load_period_ms > 0)
        arg_fail(e, "the router's weights, --temperature, --event-lag-ms and "
                    "--load-period-ms need a fleet (--instances, --route kv)");
    if (o->host_caps_arg)
        finish_host_caps(e, o, caps);
    /* one file, one store: a fleet's instances would share it */
    if (o->rc.disk_path && (o->rc.disk_capacity_tokens == 0 || o->fleet))
        arg_fail(e, "--disk-path needs --disk-capacity-tokens and one "
                    "instance (a fleet's instances cannot share the file)");
    if (o->rc.disk_record_bytes && !o->rc.disk_path)
        arg_fail(e, "--disk-record-bytes applies to --disk-path");
    if (o->kv_bytes_set && o->rc.cost.kv_dtype != RKV_DTYPE_BF16)
        arg_fail(e, "--kv-bytes and --kv-dtype %s exclude each other (the "
                    "dtype sets the bytes, scales included)",
                 rkv_cost_kv_dtype_name(o->rc.cost.kv_dtype));
    if (rkv_cost_model_validate(&o->rc.cost) != RKV_OK)
        arg_fail(e, "%s", rkv_last_error());
    if (!o->capacity_set) {
        uint64_t c = rkv_cost_default_capacity_tokens(&o->rc.cost);
        if (c == 0 && o->cmd == RKV_CMD_REPLAY)
            arg_fail(e, "the model's weights do not fit in --gpu-memory-gb; "
                        "give --capacity-tokens");
        o->rc.capacity_tokens = c;
    }
}

enum rkv_cli_action rkv_cli_parse(int argc, char **argv, rkv_cli_options *o,
                                  char *errbuf, size_t errcap)
{
    arg_error e = {errbuf, errcap, 0};
    defaults(o);
    if (errcap)
        errbuf[0] = '\0';
    if (argc < 2) {
        arg_fail(&e, "missing command (replay, sweep or help)");
        return RKV_ACT_USAGE_ERROR;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        o->help_topic = RKV_TOPIC_ALL;
        if (argc > 3 || (argc == 3 && !topic_of(argv[2], &o->help_topic))) {
            arg_fail(&e, "help: expected 'replay', 'sweep', 'router' or 'bridge', "
                        "got '%s'", argv[2]);
            return RKV_ACT_USAGE_ERROR;
        }
        return RKV_ACT_HELP;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        if (argc > 2) {
            arg_fail(&e, "%s takes no arguments", cmd);
            return RKV_ACT_USAGE_ERROR;
        }
        return RKV_ACT_VERSION;
    }
    if (!strcmp(cmd, "replay"))
        o->cmd = RKV_CMD_REPLAY;
    else if (!strcmp(cmd, "sweep"))
        o->cmd = RKV_CMD_SWEEP;
    else {
        if (cmd[0] == '-') {
            unknown_option(&e, cmd);
            char tail[160];
            snprintf(tail, sizeof tail, "%s", e.buf);
            e.failed = 0;
            arg_fail(&e, "%s before the command (replay, sweep or help)", tail);
            return RKV_ACT_USAGE_ERROR;
        }
        const char *s = closest(cmd, command_names, 4);
        if (s)
            arg_fail(&e, "unknown command '%s'; did you mean '%s'?", cmd, s);
        else
            arg_fail(&e, "unknown command '%s' (replay, sweep or help)", cmd);
        return RKV_ACT_USAGE_ERROR;
    }
    o->help_topic = o->cmd == RKV_CMD_SWEEP ? RKV_TOPIC_SWEEP : RKV_TOPIC_REPLAY;

    struct option longopts[NUM_OPTS + 1];
    for (size_t i = 0; i < NUM_OPTS; i++)
        longopts[i] = (struct option){optdefs[i].name, optdefs[i].has_arg, NULL,
                                      optdefs[i].id};
    memset(&longopts[NUM_OPTS], 0, sizeof longopts[NUM_OPTS]);

    int sub_argc = argc - 1;
    char **sub_argv = argv + 1;
    const char *caps = NULL, *pols = NULL;
    int order_set = 0, help = 0, version = 0;
    model_preset(&e, o, sub_argc, sub_argv);
    optind = 0; /* glibc: full re-initialisation (tests parse repeatedly) */
    opterr = 0;
    for (;;) {
        int idx = -1;
        int c = getopt_long(sub_argc, sub_argv, ":h", longopts, &idx);
        if (c == -1)
            break;
        if (c == '?') {
            const char *arg = sub_argv[optind - 1];
            const optdef *d = optopt ? opt_by_id(optopt) : NULL;
            if (d && d->has_arg == no_argument)
                arg_fail(&e, "--%s takes no value (got '%s')", d->name, arg);
            else if (optopt && !d)
                arg_fail(&e, "unknown option '-%c'", optopt);
            else
                unknown_option(&e, arg);
            continue;
        }
        if (c == ':') {
            const optdef *d = opt_by_id(optopt);
            arg_fail(&e, "--%s needs a value", d ? d->name : "?");
            continue;
        }
        const optdef *d = opt_by_id(c);
        if (!d)
            continue;
        if (!(d->cmds & (o->cmd == RKV_CMD_SWEEP ? FOR_S : FOR_R))) {
            wrong_command(&e, d, o->cmd);
            continue;
        }
        if (d->id == OPT_HELP)
            help = 1;
        else if (d->id == OPT_VERSION)
            version = 1;
        else
            apply(&e, o, d, optarg ? optarg : "", &caps, &pols, &order_set);
    }
    if (help)
        return RKV_ACT_HELP;
    if (version)
        return RKV_ACT_VERSION;
    if (!e.failed)
        finish(&e, o, caps, pols, order_set, sub_argv + optind,
               sub_argc - optind);
    return e.failed ? RKV_ACT_USAGE_ERROR : RKV_ACT_RUN;
}

/* ---- the options in effect, as JSON --------------------------------------------- */

static void json_capacity(FILE *f, uint64_t c)
{
    if (c == RKV_REPLAY_UNBOUNDED)
        fputs("\"unbounded\"", f);
    else
        fprintf(f, "%llu", (unsigned long long)c);
}

static uint32_t agentic_sessions(void)
{
    rkv_agentic_config c;
    rkv_agentic_config_init(&c);
    return c.sessions;
}

static double agentic_chat_share(void)
{
    rkv_agentic_config c;
    rkv_agentic_config_init(&c);
    return c.chat_share;
}

void rkv_cli_options_json(FILE *f, const rkv_cli_options *o)
{
    static const char *const orders[] = {"sched", "file", "both"};
    static const char *const wls[] = {"trace", "agentic", "fewshot"};
    const rkv_replay_config *rc = &o->rc;
    const rkv_cost_model *m = &rc->cost;
    fputs("\"options\":{\"trace\":", f);
    if (o->workload != RKV_WL_TRACE)
        fputs("null", f);
    else if (o->trace)
        rkv_json_string(f, o->trace);
    else
        fputs("\"<embedded>\"", f);
    fprintf(f, ",\"workload\":\"%s\",\"seed\":", wls[o->workload]);
    if (o->workload == RKV_WL_TRACE)
        fputs("null", f);
    else
        fprintf(f, "%llu", (unsigned long long)o->seed);
    fputs(",\"sessions\":", f);
    if (o->workload == RKV_WL_AGENTIC)
        fprintf(f, "%llu", (unsigned long long)(o->sessions ? o->sessions
                                                           : agentic_sessions()));
    else
        fputs("null", f);
    fputs(",\"tool_share\":", f);
    if (o->workload == RKV_WL_AGENTIC)
        fprintf(f, "%.15g", o->tool_share >= 0 ? o->tool_share
                                               : 1.0 - agentic_chat_share());
    else
        fputs("null", f);
    fputs(",\"requests\":", f);
    if (o->workload == RKV_WL_FEWSHOT)
        fprintf(f, "%llu", (unsigned long long)(o->requests ? o->requests : 2000));
    else
        fputs("null", f);
    fputs(",\"limit\":", f);
    if (o->limit)
        fprintf(f, "%llu", (unsigned long long)o->limit);
    else
        fputs("null", f);
    fprintf(f, ",\"order\":\"%s\"", orders[o->order]);
    if (o->cmd == RKV_CMD_REPLAY) {
        fputs(",\"capacity_tokens\":", f);
        json_capacity(f, rc->capacity_tokens);
        fprintf(f, ",\"policy\":\"%s\"", rkv_policy_name(rc->sched.policy));
    } else {
        fputs(",\"capacities\":[", f);
        for (size_t i = 0; i < o->num_capacities; i++) {
            if (i)
                fputc(',', f);
            json_capacity(f, o->capacities[i]);
        }
        fputs("],\"policies\":[", f);
        for (size_t i = 0; i < o->num_policies; i++)
            fprintf(f, "%s\"%s\"", i ? "," : "", rkv_policy_name(o->policies[i]));
        fputs("],\"svg\":", f);
        rkv_json_string(f, o->svg);
    }
    if (o->fleet) {
        fputs(",\"instances\":[", f);
        for (size_t i = 0; i < o->num_instances; i++)
            fprintf(f, "%s%u", i ? "," : "", o->instances[i]);
        fputs("],\"routes\":[", f);
        for (size_t i = 0; i < o->num_routes; i++)
            fprintf(f, "%s\"%s\"", i ? "," : "", rkv_route_name(o->routes[i]));
        const rkv_router_config *r = &o->router;
        fprintf(f, "],\"queue_weight\":%.15g,\"running_weight\":%.15g,"
                   "\"medium_weights\":[%.15g,%.15g,%.15g],\"temperature\":%.15g,"
                   "\"event_lag_ms\":%.15g,\"load_period_ms\":%.15g",
                r->queue_weight, r->running_weight, r->medium_weight[0],
                r->medium_weight[1], r->medium_weight[2], r->temperature,
                o->event_lag_ms, o->load_period_ms);
    }
    fprintf(f, ",\"page_size\":%u,\"eviction\":\"%s\",\"max_batch_tokens\":%u,"
               "\"max_running\":%u,\"dedup_min_tokens\":%u,\"max_wait_ms\":%.15g,"
               "\"time_scale\":%.15g,\"time_scale_auto\":%s,\"check\":%u,"
               "\"json\":%s,\"progress\":%s",
            rc->page_size, rkv_evict_policy_name(rc->evict_policy),
            rc->sched.max_batch_tokens, rc->sched.max_running,
            rc->sched.dedup_min_tokens, rc->sched.max_wait_ms, rc->time_scale,
            o->time_scale_auto ? "true" : "false", rc->check_every,
            o->json ? "true" : "false", o->progress ? "true" : "false");
    if (o->workload == RKV_WL_TRACE)
        fprintf(f, ",\"trace_format\":\"%s\",\"block_tokens\":%u",
                rkv_trace_format_name(o->trace_format), o->block_tokens);
    else
        fputs(",\"trace_format\":null,\"block_tokens\":null", f);
    fprintf(f, ",\"retention\":\"%s\",\"pin_ttl_ms\":%llu,\"pin_cap_pct\":%u,"
               "\"drop_pinned\":%s",
            rkv_replay_retention_name(rc->retention),
            (unsigned long long)rc->retention_ttl_ms, rc->max_pinned_pct,
            rc->drop_pinned ? "true" : "false");
    fputs(",\"model\":", f);
    if (o->model != NULL)
        fprintf(f, "\"%s\"", o->model); /* one of the preset names: no escaping */
    else
        fputs("null", f);
    fprintf(f, ",\"model_kv_lora_rank\":%u,\"model_qk_rope_dim\":%u,"
               "\"model_active_params\":%.15g",
            m->kv_lora_rank, m->qk_rope_dim, m->active_params);
    fprintf(f, ",\"model_layers\":%u,\"model_hidden\":%u,\"model_kv_heads\":%u,"
               "\"model_head_dim\":%u,\"model_params\":%.15g,\"weight_bytes\":%.15g,"
               "\"kv_bytes\":%.15g,\"gpu_tflops\":%.15g,\"gpu_bandwidth_tbs\":%.15g,"
               "\"gpu_memory_gb\":%.15g,\"mfu\":%.15g,\"mbu\":%.15g,"
               "\"step_overhead_ms\":%.15g",
            m->layers, m->hidden, m->kv_heads, m->head_dim, m->params,
            m->weight_bytes, m->kv_dtype_bytes, m->peak_tflops, m->bandwidth_tbs,
            m->memory_gb, m->mfu, m->mbu, m->overhead_ms);
    fprintf(f, ",\"kv_dtype\":\"%s\",\"kv_quant_group\":%u",
            rkv_cost_kv_dtype_name(m->kv_dtype), m->kv_quant_group);
    /* tiers, scheduler side */
    fprintf(f, ",\"pcie_gbps\":%.15g,\"disk_gbps\":%.15g,\"swap\":%s",
            m->pcie_gbps, m->disk_gbps, rc->swap ? "true" : "false");
    static const char *const pf[] = {"off", "best-effort", "wait", "timeout"};
    fprintf(f, ",\"prefetch\":\"%s\",\"prefetch_timeout_ms\":%.15g",
            pf[(unsigned)rc->sched.prefetch & 3u], rc->sched.prefetch_timeout_ms);
    if (o->num_host_capacities) {
        fputs(",\"host_capacities\":[", f);
        for (size_t i = 0; i < o->num_host_capacities; i++)
            fprintf(f, "%s%llu", i ? "," : "",
                    (unsigned long long)o->host_capacities[i]);
        fputc(']', f);
    }
    fputc('}', f);
}
