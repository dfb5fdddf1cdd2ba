/*
 * cli/sweep.c -- runs the replay over capacities x policies and reports
 * the grid (see sweep.h). Each cell is an independent replay from an empty
 * cache, so cells never influence each other.
 */
#include "cli/sweep.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/escape.h"
#include "cli/report.h"
#include "cli/svg.h"
#include "common/status.h"

void rkv_sweep_result_free(rkv_sweep_result *r)
{
    if (!r)
        return;
    free(r->capacity_tokens);
    free(r->file);
    free(r->sched);
    memset(r, 0, sizeof *r);
}

rkv_status rkv_sweep_run(const rkv_workload *wl, const rkv_sweep_config *cfg,
                         rkv_sweep_result *out)
{
    int fleet = cfg && cfg->num_fleet > 0;
    if (!wl || !cfg || !out || !cfg->capacities || cfg->num_capacities == 0 ||
        (cfg->sched && !fleet &&
         (!cfg->policies || cfg->num_policies == 0)))
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_sweep_run: need capacities (and policies "
                             "in scheduler mode)");
    if (fleet && (!cfg->fleet || !cfg->sched || cfg->file_order))
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_sweep_run: a fleet sweep runs the scheduler "
                             "replay only");
    size_t ncols = fleet ? cfg->num_fleet : cfg->num_policies;
    int host = cfg->num_host_capacities > 0;
    if (host && (cfg->num_capacities != 1 || !cfg->host_capacities))
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_sweep_run: a host-capacity sweep needs one "
                             "device capacity");
    size_t rows = host ? cfg->num_host_capacities : cfg->num_capacities;
    rkv_sweep_result r;
    memset(&r, 0, sizeof r);
    r.num_capacities = rows;
    r.num_policies = cfg->sched ? ncols : 0;
    r.capacity_tokens = calloc(rows, sizeof *r.capacity_tokens);
    if (cfg->file_order)
        r.file = calloc(rows, sizeof *r.file);
    if (cfg->sched)
        r.sched = calloc(rows * ncols, sizeof *r.sched);
    /* one fleet result at a time: its per-instance arrays are large */
    rkv_fleet_result *fr = fleet ? malloc(sizeof *fr) : NULL;
    if (!r.capacity_tokens || (cfg->file_order && !r.file) ||
        (cfg->sched && !r.sched) || (fleet && !fr)) {
        free(fr);
        rkv_sweep_result_free(&r);
        return rkv_set_error(RKV_ERR_NOMEM, "sweep: out of memory");
    }
    rkv_status st = RKV_OK;
    size_t run = 0;
    size_t runs = rows *
                  ((cfg->file_order ? 1 : 0) + (cfg->sched ? ncols : 0));
    char label[160];
    for (size_t c = 0; c < rows && st == RKV_OK; c++) {
        rkv_replay_config rc = cfg->base;
        rc.capacity_tokens = cfg->capacities[host ? 0 : c];
        if (host)
            rc.host_capacity_tokens = cfg->host_capacities[c];
        uint64_t shown = host ? rc.host_capacity_tokens : rc.capacity_tokens;
        char capname[40];
        if (shown == RKV_REPLAY_UNBOUNDED)
            snprintf(capname, sizeof capname, "unbounded");
        else {
            /* 1e6, 2.5e5 ... as a person writes them on the command line */
            double v = (double)shown;
            int e = (int)floor(log10(v));
            snprintf(capname, sizeof capname, "%s%.3ge%d", host ? "host " : "",
                     v / pow(10.0, e), e);
        }
        if (cfg->file_order) {
            if (cfg->on_run) {
                snprintf(label, sizeof label, "file, capacity %s", capname);
                cfg->on_run(cfg->on_run_ctx, run, runs, label);
            }
            run++;
            st = rkv_replay_file_order(wl, &rc, &r.file[c]);
            if (st != RKV_OK)
                break;
        }
        for (size_t p = 0; cfg->sched && p < ncols; p++) {
            char col[48];
            rkv_sweep_col_name(cfg, p, col, sizeof col);
            if (cfg->on_run) {
                snprintf(label, sizeof label, "sched %s, capacity %s", col,
                         capname);
                cfg->on_run(cfg->on_run_ctx, run, runs, label);
            }
            run++;
            rkv_replay_result *cell = &r.sched[c * ncols + p];
            if (fleet) {
                rkv_replay_config fc_rc = rc;
                fc_rc.time_scale = cfg->fleet[p].time_scale;
                rkv_fleet_config fc;
                memset(&fc, 0, sizeof fc);
                fc.instances = cfg->fleet[p].instances;
                fc.route = cfg->fleet[p].route;
                fc.seed = cfg->fleet_seed;
                fc.router = cfg->fleet_router;
                fc.event_lag_ms = cfg->fleet_event_lag_ms;
                fc.load_period_ms = cfg->fleet_load_period_ms;
                st = rkv_replay_fleet(wl, &fc_rc, &fc, fr);
                if (st == RKV_OK)
                    *cell = fr->total;
            } else {
                rc.sched.policy = cfg->policies[p];
                st = rkv_replay_sched(wl, &rc, cell);
            }
            if (st != RKV_OK)
                break;
        }
        if (st != RKV_OK)
            break;
        const rkv_replay_result *any =
            cfg->file_order ? &r.file[c] : &r.sched[c * ncols];
        r.capacity_tokens[c] =
            host ? (double)(rc.host_capacity_tokens / rc.page_size *
                            rc.page_size)
                 : (double)any->capacity_blocks * rc.page_size;
    }
    free(fr);
    if (st != RKV_OK) {
        rkv_sweep_result_free(&r);
        return st;
    }
    *out = r;
    return RKV_OK;
}

void rkv_sweep_col_name(const rkv_sweep_config *cfg, size_t p, char *buf,
                        size_t cap)
{
    if (cfg->num_fleet > 0)
        snprintf(buf, cap, "%s x%u", rkv_route_name(cfg->fleet[p].route),
                 cfg->fleet[p].instances);
    else
        snprintf(buf, cap, "%s", rkv_policy_name(cfg->policies[p]));
}

int rkv_sweep_beyond_gpu(const rkv_sweep_config *cfg, uint64_t capacity)
{
    if (capacity == RKV_REPLAY_UNBOUNDED)
        return 1;
    uint64_t gpu = rkv_cost_default_capacity_tokens(&cfg->base.cost);
    return capacity > gpu;
}

static void fmt_capacity(char *buf, size_t cap, uint64_t requested,
                         double effective, int beyond)
{
    if (requested == RKV_REPLAY_UNBOUNDED)
        snprintf(buf, cap, "unbounded%s", beyond ? "*" : "");
    else
        snprintf(buf, cap, "%.0f%s", effective, beyond ? "*" : "");
}

static void fmt_ms(char *buf, size_t cap, int have, double ms)
{
    if (!have)
        snprintf(buf, cap, "-");
    else
        rkv_fmt_duration(buf, cap, ms);
}

void rkv_sweep_print_table(FILE *f, const rkv_sweep_config *cfg,
                           const rkv_sweep_result *r)
{
    int host = cfg->num_host_capacities > 0;
    if (host)
        fprintf(f, "host tier at a device capacity of %llu tokens%s\n",
                (unsigned long long)cfg->capacities[0],
                cfg->num_fleet ? " per instance (a fleet replay per point; "
                                 "the host capacity is per instance too)"
                               : "");
    fprintf(f, "%15s", host ? "host capacity" : "capacity");
    if (r->file)
        fprintf(f, "  %10s", "file hit%");
    for (size_t p = 0; p < r->num_policies; p++) {
        char n[48];
        rkv_sweep_col_name(cfg, p, n, sizeof n);
        char h[64];
        snprintf(h, sizeof h, "%s hit%%", n);
        fprintf(f, "  %12s", h);
        snprintf(h, sizeof h, "%s ttft50", n);
        fprintf(f, "  %13s", h);
        snprintf(h, sizeof h, "%s ttft99", n);
        fprintf(f, "  %13s", h);
    }
    fputc('\n', f);
    int any_beyond = 0;
    for (size_t c = 0; c < r->num_capacities; c++) {
        char buf[40];
        int beyond = !host && rkv_sweep_beyond_gpu(cfg, cfg->capacities[c]);
        any_beyond |= beyond;
        fmt_capacity(buf, sizeof buf, host ? 0 : cfg->capacities[c],
                     r->capacity_tokens[c], beyond);
        fprintf(f, "%15s", buf);
        if (r->file)
            fprintf(f, "  %9.2f%%", 100.0 * r->file[c].hit_rate);
        for (size_t p = 0; p < r->num_policies; p++) {
            const rkv_replay_result *x = &r->sched[c * r->num_policies + p];
            char t50[32], t99[32];
            fmt_ms(t50, sizeof t50, x->requests > 0, x->ttft_ms.p50);
            fmt_ms(t99, sizeof t99, x->requests > 0, x->ttft_ms.p99);
            if (x->prompt_tokens)
                fprintf(f, "  %11.2f%%", 100.0 * x->hit_rate);
            else
                fprintf(f, "  %12s", "-");
            fprintf(f, "  %13s  %13s", t50, t99);
        }
        fputc('\n', f);
    }
    if (any_beyond)
        fprintf(f, "* beyond the simulated GPU's memory: it holds %llu KV tokens "
                   "beside the model (%g GB)\n",
                (unsigned long long)rkv_cost_default_capacity_tokens(&cfg->base.cost),
                cfg->base.cost.memory_gb);
    for (size_t c = 0; c < r->num_capacities && r->num_policies; c++) {
        const rkv_replay_result *x = &r->sched[c * r->num_policies];
        if (x->rejected_requests)
            fprintf(f, "note: at capacity %.0f, %llu requests larger than the "
                       "whole pool were refused in sched mode%s\n",
                    r->capacity_tokens[c],
                    (unsigned long long)x->rejected_requests,
                    x->requests ? "" : " (all of them)");
    }
}

static void json_rate(FILE *f, const rkv_replay_result *x)
{
    if (x->prompt_tokens)
        fprintf(f, "%.6f", x->hit_rate);
    else
        fputs("null", f);
}

static void json_pcts(FILE *f, const char *name, int have,
                      const rkv_latency_summary *l)
{
    if (have)
        fprintf(f, ",\"%s\":{\"p50\":%.3f,\"p90\":%.3f,\"p99\":%.3f}", name,
                l->p50, l->p90, l->p99);
    else
        fprintf(f, ",\"%s\":null", name);
}

void rkv_sweep_print_json(FILE *f, const rkv_workload *wl,
                          const rkv_sweep_config *cfg,
                          const rkv_sweep_result *r,
                          const rkv_cli_options *opts, const char *svg_path)
{
    fputs("{\"command\":\"sweep\",\"version\":", f);
    rkv_json_string(f, rkv_version());
    if (opts) {
        fputc(',', f);
        rkv_cli_options_json(f, opts);
    }
    fputs(",\"workload\":", f);
    rkv_json_string(f, wl->name);
    fputs(",\"svg\":", f);
    if (svg_path)
        rkv_json_string(f, svg_path);
    else
        fputs("null", f);
    fprintf(f, ",\"requests\":%zu,\"prompt_tokens\":%llu,\"page_size\":%u,"
               "\"time_scale\":%.6g,\"gpu_capacity_tokens\":%llu,\"rows\":[",
            wl->num_reqs, (unsigned long long)wl->prompt_tokens,
            cfg->base.page_size, cfg->base.time_scale,
            (unsigned long long)rkv_cost_default_capacity_tokens(&cfg->base.cost));
    for (size_t c = 0; c < r->num_capacities; c++) {
        if (cfg->num_host_capacities)
            fprintf(f, "%s{\"capacity_tokens\":%llu,\"host_capacity_tokens\":"
                       "%.0f,\"unbounded\":false,\"beyond_gpu_memory\":%s",
                    c ? "," : "", (unsigned long long)cfg->capacities[0],
                    r->capacity_tokens[c],
                    rkv_sweep_beyond_gpu(cfg, cfg->capacities[0]) ? "true"
                                                                  : "false");
        else
        fprintf(f, "%s{\"capacity_tokens\":%.0f,\"unbounded\":%s,"
                   "\"beyond_gpu_memory\":%s",
                c ? "," : "", r->capacity_tokens[c],
                cfg->capacities[c] == RKV_REPLAY_UNBOUNDED ? "true" : "false",
                rkv_sweep_beyond_gpu(cfg, cfg->capacities[c]) ? "true" : "false");
        if (r->file) {
            fprintf(f, ",\"file\":{\"hit_tokens\":%llu,\"hit_rate\":",
                    (unsigned long long)r->file[c].hit_tokens);
            json_rate(f, &r->file[c]);
            fputc('}', f);
        } else {
            fputs(",\"file\":null", f);
        }
        if (r->num_policies) {
            fputs(",\"sched\":{", f);
            for (size_t p = 0; p < r->num_policies; p++) {
                const rkv_replay_result *x = &r->sched[c * r->num_policies + p];
                char col[48];
                rkv_sweep_col_name(cfg, p, col, sizeof col);
                fprintf(f, "%s\"%s\":{", p ? "," : "", col);
                if (cfg->num_fleet)
                    fprintf(f, "\"instances\":%u,\"route\":\"%s\","
                               "\"time_scale\":%.6g,",
                            cfg->fleet[p].instances,
                            rkv_route_name(cfg->fleet[p].route),
                            cfg->fleet[p].time_scale);
                fprintf(f, "\"requests\":%llu,\"hit_tokens\":%llu,"
                           "\"hit_rate\":",
                        (unsigned long long)x->requests,
                        (unsigned long long)x->hit_tokens);
                json_rate(f, x);
                json_pcts(f, "ttft_ms", x->requests > 0, &x->ttft_ms);
                json_pcts(f, "latency_ms", x->requests > 0, &x->latency_ms);
                fprintf(f, ",\"preemptions\":%llu,\"rejected_requests\":%llu",
                        (unsigned long long)x->preemptions,
                        (unsigned long long)x->rejected_requests);
                fprintf(f, ",\"hit_tokens_by_medium\":{\"device\":%llu,"
                           "\"host\":%llu,\"disk\":%llu},\"load_ms_total\":"
                           "%.3f}",
                        (unsigned long long)x->hit_tokens_by_medium[0],
                        (unsigned long long)x->hit_tokens_by_medium[1],
                        (unsigned long long)x->hit_tokens_by_medium[2],
                        x->load_ms_total);
            }
            fputc('}', f);
        } else {
            fputs(",\"sched\":null", f);
        }
        fputc('}', f);
    }
    fputs("]}\n", f);
}

rkv_status rkv_sweep_write_svg(FILE *f, const char *title,
                               const rkv_sweep_config *cfg,
                               const rkv_sweep_result *r)
{
    size_t nc = r->num_capacities, np = r->num_policies;
    size_t nhit = (r->file ? 1 : 0) + np;
    double *hit = calloc((nhit ? nhit : 1) * nc, sizeof *hit);
    size_t nttft = np ? 2 * np : 1;
    double *ttft = calloc(nttft * nc, sizeof *ttft);
    rkv_plot_series *hs = calloc(nhit ? nhit : 1, sizeof *hs);
    rkv_plot_series *ts = calloc(nttft, sizeof *ts);
    char (*labels)[48] = calloc(nhit + 2 * np + 1, sizeof *labels);
    if (!hit || !ttft || !hs || !ts || !labels) {
        free(hit);
        free(ttft);
        free(hs);
        free(ts);
        free(labels);
        return rkv_set_error(RKV_ERR_NOMEM, "sweep: out of memory");
    }
    size_t s = 0, l = 0;
    if (r->file) {
        for (size_t c = 0; c < nc; c++)
            hit[c] = 100.0 * r->file[c].hit_rate;
        snprintf(labels[l], sizeof labels[l], "file order (cache only)");
        hs[s] = (rkv_plot_series){labels[l++], r->capacity_tokens, hit, nc, 1, 0};
        s++;
    }
    for (size_t p = 0; p < np; p++) {
        double *y = hit + s * nc;
        for (size_t c = 0; c < nc; c++)
            y[c] = r->sched[c * np + p].prompt_tokens
                       ? 100.0 * r->sched[c * np + p].hit_rate : NAN;
        char col[40];
        rkv_sweep_col_name(cfg, p, col, sizeof col);
        snprintf(labels[l], sizeof labels[l], "sched %s", col);
        hs[s] = (rkv_plot_series){labels[l++], r->capacity_tokens, y, nc, 0,
                                  (int)p + 1};
        s++;
        double *y50 = ttft + 2 * p * nc, *y99 = y50 + nc;
        for (size_t c = 0; c < nc; c++) {
            const rkv_replay_result *x = &r->sched[c * np + p];
            y50[c] = x->requests ? x->ttft_ms.p50 / 1e3 : NAN; /* a gap */
            y99[c] = x->requests ? x->ttft_ms.p99 / 1e3 : NAN;
        }
        snprintf(labels[l], sizeof labels[l], "%s p50", col);
        ts[2 * p] = (rkv_plot_series){labels[l++], r->capacity_tokens, y50, nc,
                                      0, (int)p + 1};
        snprintf(labels[l], sizeof labels[l], "%s p99", col);
        ts[2 * p + 1] = (rkv_plot_series){labels[l++], r->capacity_tokens, y99,
                                          nc, 1, (int)p + 1};
    }
    char xlabel[96];
    double gpu = (double)rkv_cost_default_capacity_tokens(&cfg->base.cost);
    if (cfg->num_host_capacities) {
        snprintf(xlabel, sizeof xlabel, "host tier capacity (tokens; device "
                 "%llu, page %u)", (unsigned long long)cfg->capacities[0],
                 cfg->base.page_size);
        gpu = (double)cfg->capacities[0]; /* the line marks the device pool */
    } else {
        snprintf(xlabel, sizeof xlabel, "KV cache capacity (tokens, page %u)",
                 cfg->base.page_size);
    }
    const char *mark = cfg->num_host_capacities ? "device pool" : "GPU memory";
    rkv_plot_panel panels[2] = {
        {"Prefix-cache hit rate", xlabel, "hit rate (% of prompt tokens)", 1, 0,
         hs, nhit, gpu, mark},
        {"Time to first token (simulated)", xlabel, "TTFT (s, log scale)", 1, 1, ts,
         2 * np, gpu, mark},
    };
    rkv_status st = rkv_svg_write(f, title, panels, np ? 2 : 1);
    free(hit);
    free(ttft);
    free(hs);
    free(ts);
    free(labels);
    return st;
}
