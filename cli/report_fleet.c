/*
 * cli/report_fleet.c -- the fleet replay's table and JSON (report_fleet.h).
 * Prints only; the runs are main.c's.
 */
#include "cli/report_fleet.h"

#include "cli/escape.h"
#include "cli/report.h"
#include "radixkv.h"

/* The pin counters of each run, summed over its instances (as the single
 * replay's "pins" and "pins demoted" lines); nothing when no run pinned. */
static void pins_text(FILE *f, const rkv_fleet_run *runs, size_t n)
{
    int any = 0;
    for (size_t i = 0; i < n; i++)
        any |= runs[i].r.total.pins_made || runs[i].r.total.pins_refused;
    if (!any)
        return;
    fputs("pins per run, summed over instances (demoted: lowered into the "
          "tiers instead of revoked)\n", f);
    fprintf(f, "%9s  %-12s", "instances", "route");
    for (int k = 0; k < RKV_REPORT_PINS; k++)
        fprintf(f, " %8s", rkv_report_pin_names[k]);
    fputc('\n', f);
    for (size_t i = 0; i < n; i++) {
        const rkv_fleet_result *r = &runs[i].r;
        unsigned long long v[RKV_REPORT_PINS];
        rkv_report_pin_counts(&r->total, v);
        fprintf(f, "%9u  %-12s", r->instances, rkv_route_name(r->route));
        for (int k = 0; k < RKV_REPORT_PINS; k++)
            fprintf(f, " %8llu", v[k]);
        fputc('\n', f);
    }
}

void rkv_fleet_report_text(FILE *f, const rkv_cli_options *o,
                           const rkv_workload *wl, const rkv_fleet_run *runs,
                           size_t n)
{
    fprintf(f, "fleet replay of %s: %llu tokens of KV cache per instance, "
               "policy %s, page size %u\n",
            wl->name, (unsigned long long)o->rc.capacity_tokens,
            rkv_policy_name(o->rc.sched.policy), o->rc.page_size);
    fprintf(f, "time scale %s: the same load per instance at every "
               "instance count\n",
            o->time_scale_auto ? "auto / instances" : "as given");
    fprintf(f, "%9s  %-12s %9s %8s %12s %12s %8s %12s %8s %10s\n",
            "instances", "route", "requests", "hit", "TTFT p50",
            "TTFT p99", "balance", "queued tok", "preempt", "scale");
    for (size_t i = 0; i < n; i++) {
        const rkv_fleet_result *r = &runs[i].r;
        /* the single replay's units (report.c), so the two read alike */
        char p50[32], p99[32];
        fprintf(f, "%9u  %-12s %9llu %7.2f%% %12s %12s %8.2f %12.0f "
                   "%8llu %10.4g\n",
                r->instances, rkv_route_name(r->route),
                (unsigned long long)r->total.requests,
                100.0 * r->total.hit_rate,
                rkv_fmt_duration(p50, sizeof p50, r->total.ttft_ms.p50),
                rkv_fmt_duration(p99, sizeof p99, r->total.ttft_ms.p99),
                r->balance, r->queued_mean,
                (unsigned long long)r->total.preemptions, runs[i].time_scale);
    }
    fputs("balance: max / mean over instances of the queued prompt tokens "
          "(averaged over arrivals); 1.00 is even\n", f);
    pins_text(f, runs, n);
    if (!o->rc.host_capacity_tokens && !o->rc.disk_capacity_tokens)
        return;
    fprintf(f, "tiers per instance: host %llu tokens, disk %llu tokens; hits "
               "by medium as %% of prompt tokens, summed over instances\n",
            (unsigned long long)o->rc.host_capacity_tokens,
            (unsigned long long)o->rc.disk_capacity_tokens);
    fprintf(f, "%9s  %-12s %8s %8s %8s %12s %12s %10s\n", "instances",
            "route", "device", "host", "disk", "loaded blk", "stored blk",
            "load time");
    for (size_t i = 0; i < n; i++) {
        const rkv_fleet_result *r = &runs[i].r;
        const rkv_replay_result *t = &r->total;
        double pt = t->prompt_tokens ? (double)t->prompt_tokens : 1.0;
        char load[32];
        fprintf(f, "%9u  %-12s %7.2f%% %7.2f%% %7.2f%% %12llu %12llu %10s\n",
                r->instances, rkv_route_name(r->route),
                100.0 * (double)t->hit_tokens_by_medium[RKV_MEDIUM_DEVICE] / pt,
                100.0 * (double)t->hit_tokens_by_medium[RKV_MEDIUM_HOST] / pt,
                100.0 * (double)t->hit_tokens_by_medium[RKV_MEDIUM_DISK] / pt,
                (unsigned long long)t->load_blocks,
                (unsigned long long)t->store_blocks,
                rkv_fmt_duration(load, sizeof load, t->load_ms_total));
    }
}

void rkv_fleet_report_json(FILE *f, const rkv_cli_options *o,
                           const rkv_workload *wl, const rkv_fleet_run *runs,
                           size_t n)
{
    fprintf(f, "{\"command\":\"%s\",\"version\":", rkv_cli_cmd_name(o->cmd));
    rkv_json_string(f, rkv_version());
    fputc(',', f);
    rkv_cli_options_json(f, o);
    fputs(",\"workload\":", f);
    rkv_json_string(f, wl->name);
    fprintf(f, ",\"capacity_tokens\":%llu,\"runs\":[",
            (unsigned long long)o->rc.capacity_tokens);
    for (size_t i = 0; i < n; i++) {
        const rkv_fleet_result *r = &runs[i].r;
        const rkv_replay_result *t = &r->total;
        int have = t->requests > 0;
        fprintf(f, "%s{\"instances\":%u,\"route\":\"%s\",\"time_scale\":%.15g,"
                   "\"requests\":%llu,\"rejected\":%llu,\"prompt_tokens\":%llu,"
                   "\"hit_tokens\":%llu",
                i ? "," : "", r->instances, rkv_route_name(r->route),
                runs[i].time_scale, (unsigned long long)t->requests,
                (unsigned long long)t->rejected_requests,
                (unsigned long long)t->prompt_tokens,
                (unsigned long long)t->hit_tokens);
        rkv_report_json_num(f, "hit_rate", t->prompt_tokens > 0, t->hit_rate);
        rkv_report_json_lat(f, "ttft_ms", have, &t->ttft_ms);
        rkv_report_json_lat(f, "latency_ms", have, &t->latency_ms);
        rkv_report_json_num(f, "balance", r->queued_mean > 0, r->balance);
        fprintf(f, ",\"queued_tokens_mean\":%.6g,\"queued_tokens_max\":%.6g,"
                   "\"inst_requests\":[",
                r->queued_mean, r->queued_max);
        for (uint32_t k = 0; k < r->instances; k++)
            fprintf(f, "%s%llu", k ? "," : "",
                    (unsigned long long)r->inst_requests[k]);
        fprintf(f, "],\"hit_tokens_by_medium\":{\"device\":%llu,"
                   "\"host\":%llu,\"disk\":%llu},\"load_blocks\":%llu,"
                   "\"failed_loads\":%llu,\"store_blocks\":%llu,"
                   "\"swap_out_blocks\":%llu,\"swap_in_blocks\":%llu,"
                   "\"load_s\":%.6g",
                (unsigned long long)t->hit_tokens_by_medium[RKV_MEDIUM_DEVICE],
                (unsigned long long)t->hit_tokens_by_medium[RKV_MEDIUM_HOST],
                (unsigned long long)t->hit_tokens_by_medium[RKV_MEDIUM_DISK],
                (unsigned long long)t->load_blocks,
                (unsigned long long)t->failed_loads,
                (unsigned long long)t->store_blocks,
                (unsigned long long)t->swap_out_blocks,
                (unsigned long long)t->swap_in_blocks, t->load_ms_total / 1e3);
        rkv_report_json_pins(f, t);
        fprintf(f, ",\"preemptions\":%llu,\"evicted_blocks\":%llu,"
                   "\"sim_s\":%.6g,\"wall_s\":%.6g,\"router_events\":%llu,"
                   "\"router_resyncs\":%llu}",
                (unsigned long long)t->preemptions,
                (unsigned long long)t->evicted_blocks, t->sim_ms / 1e3,
                t->wall_s, (unsigned long long)r->events_applied,
                (unsigned long long)r->resyncs);
    }
    fputs("]}\n", f);
}
