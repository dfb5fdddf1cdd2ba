/*
 * cli/main.c -- the `radixkv` command: argument parsing, reports, progress.
 *
 *   radixkv replay [options] [TRACE]   replay a trace or synthetic workload
 *   radixkv sweep  [options] [TRACE]   the replay over capacities/policies
 *   radixkv router [options]           the fleet router daemon over NATS
 *                                      (fleet/router_daemon.h; radixkv-router)
 *   radixkv bridge [options]           a vLLM/SGLang worker's KV events into
 *                                      the fleet (fleet/bridge_daemon.h)
 *   radixkv help [COMMAND]             usage (also --help, -h); --version;
 *                                      help router / help bridge: theirs
 *
 * Exit status: 0 success, 1 a runtime failure (unreadable or malformed
 * trace, replay error, a failed write to stdout -- /dev/full, a closed
 * stdout, a closed pipe: SIGPIPE is ignored so the write fails with EPIPE
 * and is reported --, a run in which every request was refused), 2 a usage
 * error (unknown option or bad value).
 * All real work lives in rkv_cli (args.c parses the command line;
 * trace*.c, workload.c, replay*.c, report.c, sweep.c, svg.c, costmodel.c);
 * this file only runs what was asked, shows progress (cli/progress.c) when
 * stderr is a terminal, and picks the report.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/args.h"
#include "sim/costmodel.h"
#include "sim/load.h"
#include "cli/progress.h"
#include "sim/replay.h"
#include "cli/report.h"
#include "cli/report_fleet.h"
#include "cli/sweep.h"
#include "sim/trace.h"
#include "sim/workload.h"
#include "radixkv.h"
#ifdef RKV_HAVE_NATS
#include "fleet/router_daemon.h"
#ifdef RKV_HAVE_BRIDGE
#include "fleet/bridge_daemon.h"
#endif
#endif

static void usage_error(enum rkv_cli_topic topic, const char *msg)
{
    fprintf(stderr, "radixkv: %s\n", msg);
    if (topic == RKV_TOPIC_REPLAY)
        fputs("Try 'radixkv replay --help'.\n", stderr);
    else if (topic == RKV_TOPIC_SWEEP)
        fputs("Try 'radixkv sweep --help'.\n", stderr);
    else
        fputs("Try 'radixkv help'.\n", stderr);
}

static int fail(const char *what)
{
    fprintf(stderr, "radixkv: %s\n", what);
    return 1;
}

/* ---- progress (cli/progress.c draws it; here: the clock) ----------------- */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void progress_fn(void *ctx, size_t done, size_t total)
{
    rkv_progress_update(ctx, done, total, now_ns());
}

static void sweep_run_fn(void *ctx, size_t run, size_t runs, const char *label)
{
    (void)runs;
    rkv_progress_run(ctx, run, label, now_ns());
}

/* ---- stdout --------------------------------------------------------------------- */

/* Every subcommand ends here: output that did not reach stdout is a
 * failure, never a silent success. */
static int finish_stdout(int rc)
{
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        int e = errno ? errno : EIO;
        fprintf(stderr, "radixkv: writing to standard output failed: %s\n",
                strerror(e));
        return 1;
    }
    return rc;
}

/* ---- workload --------------------------------------------------------------------- */

static int load_workload(const rkv_cli_options *o, rkv_workload *wl)
{
    rkv_status st;
    rkv_workload_init(wl);
    if (o->workload == RKV_WL_AGENTIC) {
        rkv_agentic_config c;
        rkv_agentic_config_init(&c);
        if (o->sessions)
            c.sessions = (uint32_t)o->sessions;
        if (o->tool_share >= 0)
            c.chat_share = 1.0 - o->tool_share;
        st = rkv_workload_agentic(wl, &c, o->seed);
    } else if (o->workload == RKV_WL_FEWSHOT) {
        rkv_fewshot_config c;
        rkv_fewshot_config_init(&c);
        if (o->requests)
            c.requests = (uint32_t)o->requests;
        st = rkv_workload_fewshot(wl, &c, o->seed);
    } else {
        rkv_trace_reader *r = NULL;
        st = o->trace ? rkv_trace_reader_open_path(o->trace, &r)
                      : rkv_trace_reader_open_embedded(&r);
        if (st == RKV_OK)
            st = rkv_trace_reader_set_format(r, o->trace_format,
                                             o->block_tokens);
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

/* ---- the SVG file ------------------------------------------------------------------- */

/* The plot goes to a temporary file beside the target, created before the
 * sweep runs (so an unwritable path fails in a second, not after the
 * work), then renamed over the target: a failed run never leaves a
 * truncated plot behind. */
typedef struct svg_out {
    char *tmp;      /* the temporary file's path                         */
    FILE *f;
} svg_out;

static int svg_open(const char *path, svg_out *s)
{
    memset(s, 0, sizeof s[0]);
    struct stat sb;
    size_t len = strlen(path);
    if ((len && path[len - 1] == '/') ||
        (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))) {
        fprintf(stderr, "radixkv: %s: cannot write the plot there: it names "
                        "a directory\n", path);
        return 1;
    }
    /* POSIX dirname/basename may write into their argument: copies */
    char *d = strdup(path), *b = strdup(path);
    if (!d || !b || asprintf(&s->tmp, "%s/.%s.XXXXXX", dirname(d),
                             basename(b)) < 0) {
        free(d);
        free(b);
        s->tmp = NULL;
        return fail("out of memory");
    }
    free(d);
    free(b);
    int fd = mkstemp(s->tmp);
    if (fd < 0) {
        fprintf(stderr, "radixkv: %s: cannot write the plot there: %s\n", path,
                strerror(errno));
        free(s->tmp);
        s->tmp = NULL;
        return 1;
    }
    s->f = fdopen(fd, "w");
    if (!s->f) {
        close(fd);
        unlink(s->tmp);
        free(s->tmp);
        s->tmp = NULL;
        return fail("out of memory");
    }
    return 0;
}

static void svg_abandon(svg_out *s)
{
    if (s->f)
        fclose(s->f);
    if (s->tmp) {
        unlink(s->tmp);
        free(s->tmp);
    }
    memset(s, 0, sizeof s[0]);
}

/* Writes the plot and puts it in place; *where gets its absolute path
 * (malloc'd) for the report. */
static int svg_commit(svg_out *s, const char *path, const rkv_workload *wl,
                      const rkv_sweep_config *sc, const rkv_sweep_result *sr,
                      char **where)
{
    char *title = NULL;
    if (asprintf(&title, "radixkv sweep: %s (%zu requests)", wl->name,
                 wl->num_reqs) < 0)
        title = NULL;
    /* mode 0644 like a plain fopen'd file (mkstemp made it 0600) */
    mode_t mask = umask(0);
    umask(mask);
    fchmod(fileno(s->f), 0666 & ~mask);
    rkv_status st = rkv_sweep_write_svg(s->f, title ? title : "radixkv sweep",
                                        sc, sr);
    free(title);
    int bad = st != RKV_OK || fflush(s->f) != 0 || ferror(s->f);
    int e = errno;
    if (fclose(s->f) != 0)
        bad = 1;
    s->f = NULL;
    if (bad || rename(s->tmp, path) != 0) {
        fprintf(stderr, "radixkv: %s: writing the plot failed: %s\n", path,
                strerror(bad ? (e ? e : EIO) : errno));
        svg_abandon(s);
        return 1;
    }
    free(s->tmp);
    s->tmp = NULL;
    char *abs = realpath(path, NULL);
    *where = abs ? abs : strdup(path);
    return 0;
}

/* ---- the subcommands ---------------------------------------------------------------- */

static int all_refused(const rkv_replay_result *r)
{
    return r->sched_mode && r->requests == 0 && r->rejected_requests > 0;
}

static int refused_message(const rkv_replay_result *r, const char *where)
{
    fprintf(stderr, "radixkv: %severy request (%llu) was refused: each needs "
                    "more KV blocks than the whole pool (%llu tokens) holds; "
                    "give a larger capacity\n",
            where, (unsigned long long)r->rejected_requests,
            (unsigned long long)(r->capacity_blocks * r->page_size));
    return 1;
}

/* The cache-alone replay, run on a second thread beside the scheduler's
 * (separate objects; the workload is only read). */
typedef struct alone_job {
    const rkv_workload *wl;
    rkv_replay_config cfg;
    rkv_replay_result res;
    rkv_status st;
    char msg[1024];
} alone_job;

static void *alone_main(void *arg)
{
    alone_job *j = arg;
    j->st = rkv_replay_file_order(j->wl, &j->cfg, &j->res);
    if (j->st != RKV_OK)
        snprintf(j->msg, sizeof j->msg, "%s", rkv_last_error());
    return NULL;
}

static int run_replay(rkv_cli_options *o, const rkv_workload *wl,
                      const rkv_load_estimate *load, rkv_progress *pr)
{
    rkv_replay_result res;
    rkv_status st;
    int have_alone = 0;
    alone_job job;
    if (o->order == RKV_ORDER_FILE) {
        st = rkv_replay_file_order(wl, &o->rc, &res);
    } else {
        /* The cache alone, beside it: the same capacity and page size. */
        memset(&job, 0, sizeof job);
        job.wl = wl;
        job.cfg = o->rc;
        job.cfg.progress = NULL;
        job.cfg.per_request = NULL;
        job.cfg.disk_path = NULL; /* the file is the scheduler replay's */
        pthread_t th;
        int threaded = pthread_create(&th, NULL, alone_main, &job) == 0;
        st = rkv_replay_sched(wl, &o->rc, &res);
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", rkv_last_error());
        if (threaded)
            pthread_join(th, NULL);
        else
            alone_main(&job);
        if (st != RKV_OK) {
            rkv_progress_clear(pr);
            return fail(msg);
        }
        st = job.st;
        if (st != RKV_OK) {
            rkv_progress_clear(pr);
            return fail(job.msg);
        }
        have_alone = 1;
    }
    rkv_progress_clear(pr);
    if (st != RKV_OK)
        return fail(rkv_last_error());
    rkv_report_ctx ctx = {o, have_alone ? &job.res : NULL,
                          o->order == RKV_ORDER_FILE ? NULL : load};
    if (o->json)
        rkv_report_json(stdout, &o->rc, wl, &res, &ctx);
    else
        rkv_report_text(stdout, &o->rc, wl, &res, &ctx);
    return all_refused(&res) ? refused_message(&res, "") : 0;
}

static int run_sweep_grid(rkv_cli_options *o, const rkv_workload *wl,
                          const rkv_sweep_fleet *fleet, size_t nfleet,
                          rkv_progress *pr)
{
    svg_out svg;
    if (svg_open(o->svg, &svg))
        return 1;
    rkv_sweep_config sc = {.base = o->rc,
                           .capacities = o->capacities,
                           .num_capacities = o->num_capacities,
                           .host_capacities = o->host_capacities,
                           .num_host_capacities = o->num_host_capacities,
                           .policies = o->policies,
                           .num_policies = o->num_policies,
                           .file_order = o->order != RKV_ORDER_SCHED,
                           .sched = o->order != RKV_ORDER_FILE,
                           .fleet = fleet,
                           .num_fleet = nfleet,
                           .fleet_seed = o->seed,
                           .fleet_router = &o->router,
                           .fleet_event_lag_ms = o->event_lag_ms,
                           .fleet_load_period_ms = o->load_period_ms};
    if (o->rc.progress) {
        sc.on_run = sweep_run_fn;
        sc.on_run_ctx = pr;
        /* each row's device capacity: a host sweep's rows share one */
        size_t rows = sc.num_host_capacities ? sc.num_host_capacities
                                             : sc.num_capacities;
        uint64_t row_cap[RKV_CLI_MAX_LIST];
        if (rows > RKV_CLI_MAX_LIST)
            rows = RKV_CLI_MAX_LIST;
        for (size_t r = 0; r < rows; r++)
            row_cap[r] = sc.capacities[sc.num_host_capacities ? 0 : r];
        rkv_progress_plan(pr, rows, sc.file_order,
                          sc.sched ? (nfleet ? nfleet : sc.num_policies) : 0,
                          row_cap, rkv_cost_default_capacity_tokens(&o->rc.cost));
    }
    rkv_sweep_result sr;
    memset(&sr, 0, sizeof sr);
    rkv_status st = rkv_sweep_run(wl, &sc, &sr);
    rkv_progress_clear(pr);
    if (st != RKV_OK) {
        svg_abandon(&svg);
        return fail(rkv_last_error());
    }
    char *where = NULL;
    int rc = svg_commit(&svg, o->svg, wl, &sc, &sr, &where);
    if (o->json)
        rkv_sweep_print_json(stdout, wl, &sc, &sr, o, where);
    else {
        if (sc.sched && nfleet)
            printf("fleet replays at time scale %s per instance count, "
                   "policy %s\n", o->time_scale_auto ? "auto / instances"
                                                     : "as given",
                   rkv_policy_name(o->rc.sched.policy));
        else if (sc.sched)
            printf("sched replays at time scale %g%s\n", o->rc.time_scale,
                   o->time_scale_auto ? " (auto: a load the simulated GPU "
                                        "sustains, see --help)"
                                      : "");
        rkv_sweep_print_table(stdout, &sc, &sr);
    }
    if (where && !o->json)
        printf("plot written to %s\n", where);
    free(where);
    /* every scheduler replay of the grid refused everything: nothing ran */
    size_t cells = sr.num_policies * sr.num_capacities, refused = 0;
    for (size_t i = 0; i < cells; i++)
        refused += all_refused(&sr.sched[i]);
    if (rc == 0 && cells && refused == cells)
        rc = refused_message(&sr.sched[0], "at every capacity, ");
    rkv_sweep_result_free(&sr);
    return rc;
}

static int run_sweep(rkv_cli_options *o, const rkv_workload *wl,
                     const rkv_load_estimate *load, rkv_progress *pr)
{
    /* --host-capacities with --instances/--route: a fleet per point, its
     * columns instance count x route at the same load per instance as
     * run_fleet's (auto time scale / instances) */
    size_t nfleet = o->fleet ? o->num_instances * o->num_routes : 0;
    rkv_sweep_fleet *fleet = NULL;
    if (nfleet) {
        fleet = calloc(nfleet, sizeof *fleet);
        if (!fleet)
            return fail("out of memory");
        for (size_t i = 0, k = 0; i < o->num_instances; i++)
            for (size_t j = 0; j < o->num_routes; j++, k++) {
                fleet[k].instances = o->instances[i];
                fleet[k].route = o->routes[j];
                fleet[k].time_scale = o->time_scale_auto
                                          ? load->auto_scale / o->instances[i]
                                          : o->rc.time_scale;
            }
    }
    int rc = run_sweep_grid(o, wl, fleet, nfleet, pr);
    free(fleet);
    return rc;
}

/* --instances / --route: one fleet replay per instance count x route,
 * each at the same load per instance (auto time scale / instances). */
static int run_fleet(rkv_cli_options *o, const rkv_workload *wl,
                     const rkv_load_estimate *load, rkv_progress *pr)
{
    size_t n = o->num_instances * o->num_routes, k = 0;
    rkv_fleet_run *runs = calloc(n, sizeof *runs);
    if (!runs)
        return fail("out of memory");
    for (size_t i = 0; i < o->num_instances; i++) {
        for (size_t j = 0; j < o->num_routes; j++, k++) {
            rkv_replay_config rc = o->rc;
            rc.time_scale = o->time_scale_auto
                                ? load->auto_scale / o->instances[i]
                                : o->rc.time_scale;
            rkv_fleet_config fc;
            memset(&fc, 0, sizeof fc);
            fc.instances = o->instances[i];
            fc.route = o->routes[j];
            fc.seed = o->seed;
            fc.router = &o->router;
            fc.event_lag_ms = o->event_lag_ms;
            fc.load_period_ms = o->load_period_ms;
            runs[k].time_scale = rc.time_scale;
            rkv_status st = rkv_replay_fleet(wl, &rc, &fc, &runs[k].r);
            if (st != RKV_OK) {
                rkv_progress_clear(pr);
                free(runs);
                return fail(rkv_last_error());
            }
        }
    }
    rkv_progress_clear(pr);
    if (o->json)
        rkv_fleet_report_json(stdout, o, wl, runs, n);
    else
        rkv_fleet_report_text(stdout, o, wl, runs, n);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        if (all_refused(&runs[i].r.total))
            rc = refused_message(&runs[i].r.total, "");
    free(runs);
    return rc;
}

/* The daemons reached as `radixkv router|bridge ...`: each has its own options
 * and loop; entry is NULL where this build left it out, and `without` says why. */
typedef struct {
    const char *name, *prog, *without;
    int (*entry)(const char *prog, int argc, char **argv);
} subcommand;

static const subcommand subcommands[] = {
#ifdef RKV_HAVE_NATS
    {"router", "radixkv router", NULL, rkv_router_daemon_main},
#else
    {"router", NULL, "NATS (no libnats-dev, or -DRKV_NATS=OFF)", NULL},
#endif
#ifdef RKV_HAVE_BRIDGE
    {"bridge", "radixkv bridge", NULL, rkv_bridge_daemon_main},
#else
    {"bridge", NULL, "libzmq or NATS (no libzmq3-dev or libnats-dev)", NULL},
#endif
};

static const subcommand *find_subcommand(const char *name)
{
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        if (strcmp(name, subcommands[i].name) == 0)
            return &subcommands[i];
    return NULL;
}

static int run_subcommand(const subcommand *c, int argc, char **argv)
{
    if (c->entry)
        return c->entry(c->prog, argc, argv);
    fprintf(stderr, "radixkv: this radixkv was built without %s: the %s is "
                    "not available\n", c->without, c->name);
    return 1;
}

int main(int argc, char **argv)
{
    /* `radixkv help router|bridge`: the daemon's own help, word for word
     * what `radixkv router --help` prints (or its "not built in"), since
     * the usage line sends people there. */
    if (argc == 3 && strcmp(argv[1], "help") == 0 && find_subcommand(argv[2])) {
        char help[] = "--help";
        char *sub[] = {argv[2], help, NULL};
        return run_subcommand(find_subcommand(argv[2]), 2, sub);
    }
    const subcommand *c = argc >= 2 ? find_subcommand(argv[1]) : NULL;
    if (c)
        return run_subcommand(c, argc - 1, argv + 1);
    /* A closed pipe must be a reported write error, not a silent death. */
    signal(SIGPIPE, SIG_IGN);
    /* A closed stdout: say so now, before a file we open takes its
     * descriptor and receives the report. */
    if (fcntl(1, F_GETFD) < 0) {
        fprintf(stderr, "radixkv: writing to standard output failed: %s "
                        "(it is closed)\n", strerror(errno));
        return 1;
    }
    rkv_cli_options o;
    char msg[1024];
    switch (rkv_cli_parse(argc, argv, &o, msg, sizeof msg)) {
    case RKV_ACT_USAGE_ERROR:
        usage_error(o.help_topic, msg);
        return 2;
    case RKV_ACT_HELP:
        rkv_cli_usage(stdout, o.help_topic);
        return finish_stdout(0);
    case RKV_ACT_VERSION:
        printf("radixkv %s\n", rkv_version());
        return finish_stdout(0);
    case RKV_ACT_RUN:
        break;
    }
    rkv_progress pr;
    rkv_progress_init(&pr, stderr, now_ns());
    if (o.progress && isatty(2)) {
        o.rc.progress = progress_fn;
        o.rc.progress_ctx = &pr;
    }
    rkv_workload wl;
    if (load_workload(&o, &wl))
        return 1;
    rkv_load_estimate load;
    if (rkv_load_estimate_of(&wl, &o.rc, &load) != RKV_OK) {
        rkv_workload_free(&wl);
        return fail(rkv_last_error());
    }
    if (o.time_scale_auto)
        o.rc.time_scale = load.auto_scale;
    int rc = o.fleet && !o.num_host_capacities ? run_fleet(&o, &wl, &load, &pr)
             : o.cmd == RKV_CMD_REPLAY ? run_replay(&o, &wl, &load, &pr)
                                       : run_sweep(&o, &wl, &load, &pr);
    rkv_workload_free(&wl);
    return finish_stdout(rc);
}
