/*
 * cli/main.c -- the `radixkv` command: argument parsing, reports, progress.
 *
 *   radixkv replay [options] [TRACE]   replay a trace or synthetic workload
 *   radixkv sweep  [options] [TRACE]   the replay over capacities/policies
 *   radixkv help [COMMAND]             usage (also --help, -h); --version
 *
 * Exit status: 0 success, 1 a runtime failure (unreadable or malformed
 * trace, replay error), 2 a usage error (unknown option or bad value).
 * All real work lives in rkv_cli (args.c parses the command line;
 * trace*.c, workload.c, replay*.c, report.c, sweep.c, svg.c, costmodel.c);
 * this file only runs what was asked, draws the progress bar and picks the
 * report.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/costmodel.h"
#include "cli/replay.h"
#include "cli/report.h"
#include "cli/sweep.h"
#include "cli/trace.h"
#include "cli/workload.h"
#include "radixkv.h"

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

static int load_workload(const rkv_cli_options *o, rkv_workload *wl)
{
    rkv_status st;
    rkv_workload_init(wl);
    if (o->workload == RKV_WL_AGENTIC) {
        rkv_agentic_config c;
        rkv_agentic_config_init(&c);
        if (o->sessions)
            c.sessions = (uint32_t)o->sessions;
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
    rkv_cli_options o;
    char msg[1024];
    switch (rkv_cli_parse(argc, argv, &o, msg, sizeof msg)) {
    case RKV_ACT_USAGE_ERROR:
        usage_error(o.help_topic, msg);
        return 2;
    case RKV_ACT_HELP:
        rkv_cli_usage(stdout, o.help_topic);
        return 0;
    case RKV_ACT_VERSION:
        printf("radixkv %s\n", rkv_version());
        return 0;
    case RKV_ACT_RUN:
        break;
    }
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
    if (o.cmd == RKV_CMD_REPLAY) {
        rkv_replay_result res;
        rkv_status st = o.order == RKV_ORDER_FILE ? rkv_replay_file_order(&wl, &o.rc, &res)
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
        sc.file_order = o.order != RKV_ORDER_SCHED;
        sc.sched = o.order != RKV_ORDER_FILE;
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
