/*
 * cli/report.c -- the replay's reports: the human-readable summary and the
 * one-object JSON document of `radixkv replay` (see report.h).
 *
 * Pure formatting of an rkv_replay_result (and the load estimate and the
 * cache-alone result beside it); the only judgement made here is the
 * regime's name, from thresholds stated below.
 */
#include "cli/report.h"

#include <math.h>
#include <string.h>

#include "cli/escape.h"

/* Estimated load (sim/load.h) from which a run is "near capacity", and
 * from which it is "overloaded": the estimate ignores cache hits, so it
 * errs high; at 1 and above, arrivals need more than the GPU can give. */
#define NEAR_CAPACITY 0.85
#define OVERLOADED 1.0

/* A named counter, for the lists the report prints as "N name, ..." in
 * text and "name":N in JSON. */
typedef struct counter {
    const char *name;
    uint64_t value;
} counter;

/* ,"name":N for each: the members follow others in an open object. */
static void json_counters(FILE *f, const counter *c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        fprintf(f, ",\"%s\":%llu", c[i].name, (unsigned long long)c[i].value);
}

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

static void text_counters(FILE *f, const counter *c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s%llu %s", i ? ", " : "", (unsigned long long)c[i].value, c[i].name);
}

static const char *commas(char *buf, size_t cap, uint64_t v)
{
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v);
    size_t o = 0;
    for (int i = 0; i < n && o + 2 < cap; i++) {
        if (i && (n - i) % 3 == 0)
            buf[o++] = ',';
        buf[o++] = tmp[i];
    }
    buf[o] = '\0';
    return buf;
}

const char *rkv_fmt_duration(char *buf, size_t cap, double ms)
{
    if (!isfinite(ms))
        snprintf(buf, cap, "-");
    else if (ms < 1000.0)
        snprintf(buf, cap, "%.1f ms", ms);
    else if (ms < 120e3)
        snprintf(buf, cap, "%.2f s", ms / 1e3);
    else if (ms < 7200e3)
        snprintf(buf, cap, "%.1f min", ms / 60e3);
    else
        snprintf(buf, cap, "%.2f h", ms / 3600e3);
    return buf;
}

const char *rkv_report_regime(const rkv_replay_config *cfg,
                              const rkv_load_estimate *load)
{
    if (!load)
        return NULL;
    if (load->closed_loop)
        return "closed loop";
    double l = rkv_load_at(load, cfg->time_scale);
    if (!(load->span_ms > 0) || cfg->time_scale == 0)
        return "one burst";
    return l >= OVERLOADED ? "overloaded" : l >= NEAR_CAPACITY ? "near capacity"
                                                              : "sustained";
}

/* ---- JSON ---------------------------------------------------------------- */

void rkv_report_json_num(FILE *f, const char *name, int have, double v)
{
    if (have && isfinite(v))
        fprintf(f, ",\"%s\":%.6g", name, v);
    else
        fprintf(f, ",\"%s\":null", name);
}

void rkv_report_json_lat(FILE *f, const char *name, int have,
                         const rkv_latency_summary *l)
{
    if (!have) {
        fprintf(f, ",\"%s\":null", name);
        return;
    }
    fprintf(f, ",\"%s\":{\"p50\":%.3f,\"p90\":%.3f,\"p99\":%.3f,\"mean\":%.3f,"
               "\"max\":%.3f}",
            name, l->p50, l->p90, l->p99, l->mean, l->max);
}

/* One class of traffic (tool calls or the rest): its hits and TTFT. */
static void json_class(FILE *f, const char *name, uint64_t n, uint64_t prompt,
                       uint64_t hit, const rkv_latency_summary *ttft)
{
    fprintf(f, ",\"%s\":{\"requests\":%llu,\"prompt_tokens\":%llu,"
               "\"hit_tokens\":%llu",
            name, (unsigned long long)n, (unsigned long long)prompt,
            (unsigned long long)hit);
    rkv_report_json_num(f, "hit_rate", prompt > 0,
                        prompt ? (double)hit / (double)prompt : 0);
    rkv_report_json_lat(f, "ttft_ms", n > 0, ttft);
    fputc('}', f);
}

/* "retention": the mode, tool vs other traffic (classes: scheduler mode,
 * the only one with a clock for their TTFT), the pin counters. */
static void json_retention(FILE *f, const rkv_replay_config *cfg,
                           const rkv_replay_result *r, int classes)
{
    fprintf(f, ",\"retention\":{\"mode\":\"%s\",\"ttl_ms\":%llu,"
               "\"pin_cap_pct\":%u",
            rkv_replay_retention_name(cfg->retention),
            (unsigned long long)cfg->retention_ttl_ms, cfg->max_pinned_pct);
    if (classes) {
        json_class(f, "tool_traffic", r->tool_requests, r->tool_prompt_tokens,
                   r->tool_hit_tokens, &r->tool_ttft_ms);
        json_class(f, "other_traffic", r->other_requests,
                   r->other_prompt_tokens, r->other_hit_tokens,
                   &r->other_ttft_ms);
    }
    rkv_report_json_pins(f, r);
    fputc('}', f);
}

const char *const rkv_report_pin_names[RKV_REPORT_PINS] = {
    "made", "renewed", "refused", "expired", "released", "revoked", "demoted"};

void rkv_report_pin_counts(const rkv_replay_result *r,
                           unsigned long long out[RKV_REPORT_PINS])
{
    const uint64_t v[RKV_REPORT_PINS] = {
        r->pins_made,     r->pins_renewed, r->pins_refused, r->pins_expired,
        r->pins_released, r->pins_revoked, r->pins_demoted};
    for (int k = 0; k < RKV_REPORT_PINS; k++)
        out[k] = (unsigned long long)v[k];
}

void rkv_report_json_pins(FILE *f, const rkv_replay_result *r)
{
    unsigned long long v[RKV_REPORT_PINS];
    rkv_report_pin_counts(r, v);
    for (int k = 0; k < RKV_REPORT_PINS; k++)
        fprintf(f, ",\"pins_%s\":%llu", rkv_report_pin_names[k], v[k]);
    fprintf(f, ",\"ended_pages\":%llu", (unsigned long long)r->ended_pages);
}

/* ---- tiers --------------------------------------------------------------- */

static const char *write_policy_name(int p)
{
    return p == RKV_WRITE_THROUGH ? "through"
           : p == RKV_WRITE_SELECTIVE ? "selective" : "back";
}

static int tiers_on(const rkv_replay_config *cfg)
{
    return cfg->host_capacity_tokens || cfg->disk_capacity_tokens;
}

/* "tiers": null without lower tiers, else capacities, policy, bandwidths,
 * hits by medium, transfers and the load time charged into the steps. */
static void json_tiers(FILE *f, const rkv_replay_config *cfg,
                       const rkv_replay_result *r)
{
    if (!tiers_on(cfg)) {
        fputs(",\"tiers\":null", f);
        return;
    }
    const uint64_t *h = r->hit_tokens_by_medium;
    fprintf(f, ",\"tiers\":{\"host_capacity_tokens\":%llu,"
               "\"disk_capacity_tokens\":%llu,\"write_policy\":\"%s\","
               "\"selective_hits\":%u,\"swap\":%s,\"pcie_gbps\":%g,"
               "\"disk_gbps\":%g,\"hit_tokens_by_medium\":{\"device\":%llu,"
               "\"host\":%llu,\"disk\":%llu},\"load_blocks\":%llu,"
               "\"store_blocks\":%llu,\"failed_loads\":%llu,"
               "\"swap_out_blocks\":%llu,\"swap_in_blocks\":%llu,"
               "\"load_ms_total\":%.3f",
            (unsigned long long)cfg->host_capacity_tokens,
            (unsigned long long)cfg->disk_capacity_tokens,
            write_policy_name(cfg->write_policy), cfg->selective_hits,
            cfg->swap ? "true" : "false", cfg->cost.pcie_gbps,
            cfg->cost.disk_gbps, (unsigned long long)h[RKV_MEDIUM_DEVICE],
            (unsigned long long)h[RKV_MEDIUM_HOST],
            (unsigned long long)h[RKV_MEDIUM_DISK],
            (unsigned long long)r->load_blocks,
            (unsigned long long)r->store_blocks,
            (unsigned long long)r->failed_loads,
            (unsigned long long)r->swap_out_blocks,
            (unsigned long long)r->swap_in_blocks, r->load_ms_total);
    fprintf(f, ",\"prefetch_blocks\":%llu,\"prefetch_late_blocks\":%llu,"
               "\"prefetch_waits\":%llu",
            (unsigned long long)r->prefetch_blocks,
            (unsigned long long)r->prefetch_late_blocks,
            (unsigned long long)r->prefetch_waits);
    /* the disk file's counters (--disk-path), null without one */
    if (!r->disk_file) {
        fputs(",\"disk_file\":null}", f);
        return;
    }
    fprintf(f, ",\"disk_file\":{\"warm_start\":%s,\"direct_io\":%s,\"io_uring\":%s",
            r->disk_warm_file ? "true" : "false", r->disk_direct_io ? "true" : "false",
            r->disk_io_uring ? "true" : "false");
    const counter disk[] = {
        {"records_written", r->disk_writes},   {"records_read", r->disk_reads},
        {"verified", r->disk_verified},        {"verify_failed", r->disk_verify_failed},
        {"reindexed", r->disk_warm_records},   {"skipped", r->disk_warm_skipped},
        {"dropped", r->disk_warm_dropped},
    };
    json_counters(f, disk, COUNT_OF(disk));
    fputs("}}", f);
}

/* Hits split by medium, transfers, and the load time inside the steps
 * (and so inside TTFT: a request runs only once its own load is done). */
static void text_tiers(FILE *f, const rkv_replay_config *cfg,
                       const rkv_replay_result *r)
{
    if (!tiers_on(cfg))
        return;
    char a[32], b[32], c[32], d[32], e[32];
    const uint64_t *h = r->hit_tokens_by_medium;
    double pt = r->prompt_tokens ? (double)r->prompt_tokens : 1.0;
    fprintf(f, "  tiers          host %s tokens, disk %s tokens, write-%s%s\n",
            commas(a, sizeof a, cfg->host_capacity_tokens),
            commas(b, sizeof b, cfg->disk_capacity_tokens),
            write_policy_name(cfg->write_policy),
            cfg->swap ? ", swap on preempt" : "");
    fprintf(f, "  hits by medium device %.2f %%, host %.2f %%, disk %.2f %% of "
               "prompt tokens\n",
            100.0 * (double)h[RKV_MEDIUM_DEVICE] / pt,
            100.0 * (double)h[RKV_MEDIUM_HOST] / pt,
            100.0 * (double)h[RKV_MEDIUM_DISK] / pt);
    fprintf(f, "  transfers      %s blocks loaded (%s failed), %s stored; swap "
               "out %s, in %s blocks\n",
            commas(a, sizeof a, r->load_blocks),
            commas(b, sizeof b, r->failed_loads),
            commas(c, sizeof c, r->store_blocks),
            commas(d, sizeof d, r->swap_out_blocks),
            commas(e, sizeof e, r->swap_in_blocks));
    if (r->sched_mode)
        fprintf(f, "  load time      %s in steps (PCIe %g GB/s, disk %g GB/s; "
                   "in the TTFT of the requests that waited for it)\n",
                rkv_fmt_duration(a, sizeof a, r->load_ms_total),
                cfg->cost.pcie_gbps, cfg->cost.disk_gbps);
    if (r->prefetch_blocks)
        fprintf(f, "  prefetch       %s blocks disk -> host while queued, %s "
                   "read from disk at admission (not arrived); %s "
                   "admissions deferred\n",
                commas(a, sizeof a, r->prefetch_blocks),
                commas(b, sizeof b, r->prefetch_late_blocks),
                commas(c, sizeof c, r->prefetch_waits));
    if (r->disk_file) {
        fprintf(f, "  disk file      %s records written, %s read (%s%s); "
                   "%s loads verified, %s failed verification\n",
                commas(a, sizeof a, r->disk_writes),
                commas(b, sizeof b, r->disk_reads),
                r->disk_direct_io ? "O_DIRECT" : "buffered",
                r->disk_io_uring ? ", io_uring" : "",
                commas(c, sizeof c, r->disk_verified),
                commas(d, sizeof d, r->disk_verify_failed));
        fprintf(f, "  warm restart   %s: %s records re-indexed, %s skipped "
                   "(failed verification), %s dropped (orphans, duplicates)\n",
                r->disk_warm_file ? "an earlier run's file" : "a new file",
                commas(a, sizeof a, r->disk_warm_records),
                commas(b, sizeof b, r->disk_warm_skipped),
                commas(c, sizeof c, r->disk_warm_dropped));
    }
}

void rkv_report_json(FILE *f, const rkv_replay_config *cfg,
                     const rkv_workload *wl, const rkv_replay_result *r,
                     const rkv_report_ctx *ctx)
{
    fprintf(f, "{\"command\":\"replay\",\"version\":");
    rkv_json_string(f, rkv_version());
    if (ctx && ctx->opts) {
        fputc(',', f);
        rkv_cli_options_json(f, ctx->opts);
    }
    fputs(",\"workload\":", f);
    rkv_json_string(f, wl->name);
    fprintf(f, ",\"order\":\"%s\"", r->sched_mode ? "sched" : "file");
    if (r->sched_mode)
        fprintf(f, ",\"policy\":\"%s\"", rkv_policy_name(cfg->sched.policy));
    fprintf(f, ",\"eviction\":\"%s\",\"page_size\":%u,\"capacity_tokens\":%llu,"
               "\"capacity_blocks\":%llu",
            rkv_evict_policy_name(cfg->evict_policy), r->page_size,
            (unsigned long long)(r->capacity_blocks * r->page_size),
            (unsigned long long)r->capacity_blocks);
    if (cfg->capacity_tokens == RKV_REPLAY_UNBOUNDED)
        fputs(",\"requested_capacity_tokens\":\"unbounded\"", f);
    else
        fprintf(f, ",\"requested_capacity_tokens\":%llu",
                (unsigned long long)cfg->capacity_tokens);
    const counter totals[] = {{"requests", r->requests},
                              {"prompt_tokens", r->prompt_tokens},
                              {"hit_tokens", r->hit_tokens}};
    json_counters(f, totals, COUNT_OF(totals));
    rkv_report_json_num(f, "hit_rate", r->prompt_tokens > 0, r->hit_rate);
    const counter blocks[] = {{"evicted_blocks", r->evicted_blocks},
                              {"peak_blocks", r->peak_blocks},
                              {"peak_pool_blocks", r->peak_pool_blocks},
                              {"tree_host_bytes", r->tree_host_bytes}};
    json_counters(f, blocks, COUNT_OF(blocks));
    int any = r->requests > 0;
    if (!r->sched_mode) {
        fprintf(f, ",\"truncated_requests\":%llu",
                (unsigned long long)r->truncated_requests);
        rkv_report_json_num(f, "match_us_per_request", any, r->match_ns / 1e3);
        rkv_report_json_num(f, "alloc_us_per_request", any, r->alloc_ns / 1e3);
        rkv_report_json_num(f, "insert_us_per_request", any, r->insert_ns / 1e3);
        if (cfg->retention != RKV_RETENTION_NONE)
            json_retention(f, cfg, r, 0);
    } else {
        const counter sched[] = {{"rejected_requests", r->rejected_requests},
                                 {"output_tokens", r->output_tokens},
                                 {"prefill_tokens", r->prefill_tokens},
                                 {"prefill_tokens_saved", r->prefill_saved_tokens}};
        json_counters(f, sched, COUNT_OF(sched));
        rkv_report_json_lat(f, "ttft_ms", any, &r->ttft_ms);
        rkv_report_json_lat(f, "latency_ms", any, &r->latency_ms);
        rkv_report_json_lat(f, "wait_ms", any, &r->wait_ms);
        const rkv_load_estimate *ld = ctx ? ctx->load : NULL;
        fprintf(f, ",\"time_scale\":{\"value\":%.6g,\"auto\":%s", cfg->time_scale,
                ctx && ctx->opts && ctx->opts->time_scale_auto ? "true" : "false");
        rkv_report_json_num(f, "estimated_work_s", ld != NULL, ld ? ld->work_ms / 1e3 : 0);
        rkv_report_json_num(f, "arrival_span_s", ld != NULL, ld ? ld->span_ms / 1e3 : 0);
        rkv_report_json_num(f, "estimated_load", ld && ld->span_ms > 0 && !ld->closed_loop,
                 ld ? rkv_load_at(ld, cfg->time_scale) : 0);
        fputs("},\"regime\":", f);
        const char *reg = rkv_report_regime(cfg, ld);
        if (reg)
            rkv_json_string(f, reg);
        else
            fputs("null", f);
        fprintf(f, ",\"ttft_mostly_queueing\":%s",
                !any ? "null"
                     : r->wait_ms.p50 > 0.5 * r->ttft_ms.p50 ? "true" : "false");
        const rkv_replay_result *ca = ctx ? ctx->cache_alone : NULL;
        if (ca) {
            fprintf(f, ",\"cache_alone\":{\"order\":\"file\",\"hit_tokens\":%llu",
                    (unsigned long long)ca->hit_tokens);
            rkv_report_json_num(f, "hit_rate", ca->prompt_tokens > 0, ca->hit_rate);
            fputc('}', f);
        } else {
            fputs(",\"cache_alone\":null", f);
        }
        int sim = r->sim_ms > 0;
        rkv_report_json_num(f, "simulated_s", sim, r->sim_ms / 1e3);
        rkv_report_json_num(f, "busy_s", sim, r->busy_ms / 1e3);
        fputs(",\"throughput\":", f);
        if (sim)
            fprintf(f, "{\"output_tokens_per_s\":%.1f,\"prompt_tokens_per_s\":%.1f,"
                       "\"requests_per_s\":%.3f}",
                    r->output_tokens_per_s, r->prompt_tokens_per_s,
                    r->requests_per_s);
        else
            fputs("null", f);
        fprintf(f, ",\"preemptions\":%llu,\"dedup_holds\":%llu,\"steps\":%llu",
                (unsigned long long)r->preemptions,
                (unsigned long long)r->dedup_holds, (unsigned long long)r->steps);
        rkv_report_json_num(f, "sched_us_per_step", r->steps > 0,
                            r->sched_us_per_step);
        rkv_report_json_num(f, "sched_us_per_step_max", r->steps > 0,
                            r->sched_us_per_step_max);
        fprintf(f, ",\"max_waiting\":%llu", (unsigned long long)r->max_waiting);
        json_retention(f, cfg, r, 1);
        const rkv_cost_model *m = &cfg->cost;
        fprintf(f, ",\"cost_model\":{\"layers\":%u,\"hidden\":%u,\"kv_heads\":%u,"
                   "\"head_dim\":%u,\"params\":%.4g,\"weight_bytes\":%g,"
                   "\"kv_bytes\":%g,\"gpu_tflops\":%g,\"gpu_bandwidth_tbs\":%g,"
                   "\"gpu_memory_gb\":%g,\"mfu\":%g,\"mbu\":%g,"
                   "\"step_overhead_ms\":%g,\"kv_lora_rank\":%u,\"qk_rope_dim\":%u,"
                   "\"active_params\":%.4g,\"kv_dtype\":\"%s\",\"kv_bytes_per_token\":%.15g}",
                m->layers, m->hidden, m->kv_heads, m->head_dim, m->params,
                m->weight_bytes, m->kv_dtype_bytes, m->peak_tflops,
                m->bandwidth_tbs, m->memory_gb, m->mfu, m->mbu, m->overhead_ms,
                m->kv_lora_rank, m->qk_rope_dim, m->active_params,
                rkv_cost_kv_dtype_name(m->kv_dtype), rkv_cost_kv_bytes_per_token(m));
    }
    json_tiers(f, cfg, r);
    fprintf(f, ",\"wall_s\":%.3f}\n", r->wall_s);
}

/* ---- text ------------------------------------------------------------------ */

static void text_regime(FILE *f, const rkv_replay_config *cfg,
                        const rkv_replay_result *r, const rkv_report_ctx *ctx)
{
    const rkv_load_estimate *ld = ctx ? ctx->load : NULL;
    char a[32], b[32], c[32];
    if (ld) {
        int is_auto = ctx->opts && ctx->opts->time_scale_auto;
        if (ld->closed_loop)
            fprintf(f, "  time scale     %g (%sclosed loop: agentic turns follow "
                       "their previous turn)\n",
                    cfg->time_scale, is_auto ? "auto; " : "");
        else if (ld->span_ms > 0)
            fprintf(f, "  time scale     %g%s: estimated GPU work %s = %.0f %% of "
                       "the %s of arrivals\n",
                    cfg->time_scale, is_auto ? " (auto)" : "",
                    rkv_fmt_duration(b, sizeof b, ld->work_ms),
                    100.0 * rkv_load_at(ld, cfg->time_scale),
                    rkv_fmt_duration(a, sizeof a, ld->span_ms * cfg->time_scale));
        else
            fprintf(f, "  time scale     %g: every request arrives at once\n",
                    cfg->time_scale);
    }
    const char *reg = rkv_report_regime(cfg, ld);
    if (reg) {
        double drain = r->sim_ms - r->last_release_ms;
        fprintf(f, "  regime         %s", reg);
        if (!strcmp(reg, "overloaded"))
            fputs(": arrivals outpace the simulated GPU, the queue grows for "
                  "the whole trace", f);
        else if (!strcmp(reg, "near capacity"))
            fputs(": the simulated GPU barely keeps up", f);
        else if (!strcmp(reg, "sustained"))
            fputs(": the simulated GPU keeps up with the arrivals", f);
        fprintf(f, " (up to %s waiting; last finish %s after the last "
                   "arrival)\n",
                commas(c, sizeof c, r->max_waiting),
                rkv_fmt_duration(a, sizeof a, drain > 0 ? drain : 0));
    }
    if (r->requests) {
        int queueing = r->wait_ms.p50 > 0.5 * r->ttft_ms.p50;
        fprintf(f, "                 TTFT is mostly %s: median wait %s of a "
                   "median TTFT of %s%s\n",
                queueing ? "queueing" : "prefill compute",
                rkv_fmt_duration(a, sizeof a, r->wait_ms.p50),
                rkv_fmt_duration(b, sizeof b, r->ttft_ms.p50),
                queueing && reg && !strcmp(reg, "sustained")
                    ? " (requests arrive in bursts)"
                    : queueing && reg && !strcmp(reg, "overloaded")
                          ? " (try a larger --time-scale, or auto)"
                          : "");
    }
}

static void text_summary(FILE *f, const char *name,
                         const rkv_latency_summary *l)
{
    char a[32], b[32], c[32], d[32];
    fprintf(f, "  %-14s p50 %s, p90 %s, p99 %s (mean %s)\n", name,
            rkv_fmt_duration(a, sizeof a, l->p50),
            rkv_fmt_duration(b, sizeof b, l->p90),
            rkv_fmt_duration(c, sizeof c, l->p99),
            rkv_fmt_duration(d, sizeof d, l->mean));
}

/* One request class of the retention block (the JSON side: json_class);
 * nothing when the class had no prompt tokens. */
static void text_class(FILE *f, const char *name, uint64_t n, uint64_t prompt,
                       uint64_t hit, const rkv_latency_summary *ttft,
                       const char *which)
{
    char a[32], b[32], c[32];
    if (prompt == 0)
        return;
    fprintf(f, "    %-13s%.2f %% hit, TTFT p50 %s, p99 %s (%s requests%s)\n", name,
            100.0 * (double)hit / (double)prompt,
            rkv_fmt_duration(a, sizeof a, ttft->p50),
            rkv_fmt_duration(b, sizeof b, ttft->p99), commas(c, sizeof c, n), which);
}

/* retention: tool vs other traffic, and the pins when any. */
static void text_retention(FILE *f, const rkv_replay_config *cfg,
                           const rkv_replay_result *r)
{
    char a[32];
    if (cfg->retention == RKV_RETENTION_NONE && r->tool_requests == 0)
        return;
    fprintf(f, "  retention      %s", rkv_replay_retention_name(cfg->retention));
    if (cfg->retention == RKV_RETENTION_TTL)
        fprintf(f, " (TTL %s)",
                rkv_fmt_duration(a, sizeof a, (double)cfg->retention_ttl_ms));
    fprintf(f, ", pin cap %u %% of the pool\n", cfg->max_pinned_pct);
    text_class(f, "tool", r->tool_requests, r->tool_prompt_tokens,
               r->tool_hit_tokens, &r->tool_ttft_ms,
               " of sessions that wait for tools");
    text_class(f, "other", r->other_requests, r->other_prompt_tokens,
               r->other_hit_tokens, &r->other_ttft_ms, "");
    if (r->pins_made || r->pins_refused) {
        const counter pins[] = {
            {"made", r->pins_made},       {"renewed", r->pins_renewed},
            {"refused (cap)", r->pins_refused}, {"expired", r->pins_expired},
            {"released", r->pins_released}, {"revoked", r->pins_revoked},
        };
        fputs("    pins         ", f);
        text_counters(f, pins, COUNT_OF(pins));
        fputc('\n', f);
    }
    if (r->pins_demoted)
        fprintf(f, "    pins demoted %llu lowered into the tiers instead of "
                   "revoked (kept there until they end)\n",
                (unsigned long long)r->pins_demoted);
}

void rkv_report_text(FILE *f, const rkv_replay_config *cfg,
                     const rkv_workload *wl, const rkv_replay_result *r,
                     const rkv_report_ctx *ctx)
{
    char a[32], b[32], c[32];
    fprintf(f, "radixkv replay: %s, %s requests, %s prompt tokens\n", wl->name,
            commas(a, sizeof a, (uint64_t)wl->num_reqs),
            commas(b, sizeof b, wl->prompt_tokens));
    fprintf(f, "  order          %s", r->sched_mode ? "sched" : "file (the cache alone)");
    if (r->sched_mode)
        fprintf(f, ", policy %s, max %u tokens / %u requests per step",
                rkv_policy_name(cfg->sched.policy), cfg->sched.max_batch_tokens,
                cfg->sched.max_running);
    fputc('\n', f);
    if (r->sched_mode)
        text_regime(f, cfg, r, ctx);
    fprintf(f, "  cache          %s tokens = %s blocks of %u tokens, eviction %s\n",
            commas(a, sizeof a, r->capacity_blocks * r->page_size),
            commas(b, sizeof b, r->capacity_blocks), r->page_size,
            rkv_evict_policy_name(cfg->evict_policy));
    if (r->sched_mode && cfg->cost.kv_dtype != RKV_DTYPE_BF16) {
        /* what the quantized KV buys: bytes a token takes in the
         * simulated GPU (and decode reads), against the same model's bf16 */
        rkv_cost_model bf = cfg->cost;
        bf.kv_dtype = RKV_DTYPE_BF16;
        bf.kv_dtype_bytes = 2.0;
        double q = rkv_cost_kv_bytes_per_token(&cfg->cost);
        double b16 = rkv_cost_kv_bytes_per_token(&bf);
        fprintf(f, "  kv dtype       %s: %s bytes a token with its scales (bf16 %s): "
                   "%.2fx the tokens, %.2fx the decode KV bytes\n",
                rkv_cost_kv_dtype_name(cfg->cost.kv_dtype),
                commas(a, sizeof a, (uint64_t)q), commas(b, sizeof b, (uint64_t)b16),
                b16 / q, q / b16);
    }
    if (r->prompt_tokens)
        fprintf(f, "  hit rate       %.2f %%  (%s of %s prompt tokens from cache)\n",
                100.0 * r->hit_rate, commas(a, sizeof a, r->hit_tokens),
                commas(b, sizeof b, r->prompt_tokens));
    else
        fputs("  hit rate       - (no request was served)\n", f);
    const rkv_replay_result *ca = ctx ? ctx->cache_alone : NULL;
    if (ca && ca->prompt_tokens)
        fprintf(f, "  cache alone    %.2f %%  (--order file: requests one by one "
                   "in file order, no scheduler, no outputs cached)\n",
                100.0 * ca->hit_rate);
    fprintf(f, "  evicted        %s blocks\n", commas(a, sizeof a, r->evicted_blocks));
    if (!r->sched_mode) {
        fprintf(f, "  peak blocks    %s of %s\n", commas(a, sizeof a, r->peak_blocks),
                commas(b, sizeof b, r->capacity_blocks));
        if (r->truncated_requests)
            fprintf(f, "  truncated      %s prompts larger than the cache were "
                       "cached in part\n",
                    commas(a, sizeof a, r->truncated_requests));
        fprintf(f, "  tree time      match %.2f us, alloc+evict %.2f us, insert "
                   "%.2f us per request\n",
                r->match_ns / 1e3, r->alloc_ns / 1e3, r->insert_ns / 1e3);
    } else {
        const rkv_cost_model *m = &cfg->cost;
        char kv[64];
        if (m->kv_lora_rank > 0)
            snprintf(kv, sizeof kv, "MLA latent %u + %u", m->kv_lora_rank, m->qk_rope_dim);
        else
            snprintf(kv, sizeof kv, "%u KV heads x %u", m->kv_heads, m->head_dim);
        fprintf(f, "  model          %.3gB params, %u layers, %s (%.0f KV bytes/token), on "
                   "%g TFLOP/s, %g TB/s (mfu %g, mbu %g)\n",
                m->params / 1e9, m->layers, kv, rkv_cost_kv_bytes_per_token(m),
                m->peak_tflops, m->bandwidth_tbs, m->mfu, m->mbu);
        if (r->rejected_requests)
            fprintf(f, "  rejected       %s requests larger than the whole pool\n",
                    commas(a, sizeof a, r->rejected_requests));
        fprintf(f, "  prefill        %s tokens computed, %s saved by the cache\n",
                commas(a, sizeof a, r->prefill_tokens),
                commas(b, sizeof b, r->prefill_saved_tokens));
        if (r->requests) {
            text_summary(f, "TTFT", &r->ttft_ms);
            text_summary(f, "  waiting", &r->wait_ms);
            text_summary(f, "latency", &r->latency_ms);
        }
        if (r->sim_ms > 0)
            fprintf(f, "  throughput     %.0f output tok/s, %.0f prompt tok/s, "
                       "%.2f req/s over %s simulated (GPU busy %.0f %%)\n",
                    r->output_tokens_per_s, r->prompt_tokens_per_s,
                    r->requests_per_s, rkv_fmt_duration(a, sizeof a, r->sim_ms),
                    100.0 * r->busy_ms / r->sim_ms);
        fprintf(f, "  preemptions    %s   (dedup holds %s)\n",
                commas(a, sizeof a, r->preemptions),
                commas(b, sizeof b, r->dedup_holds));
        text_retention(f, cfg, r);
        fprintf(f, "  peak blocks    %s held by requests, %s in the pool of %s\n",
                commas(a, sizeof a, r->peak_blocks),
                commas(b, sizeof b, r->peak_pool_blocks),
                commas(c, sizeof c, r->capacity_blocks));
        fprintf(f, "  scheduler      %s steps, %.2f us per step (slowest %.0f "
                   "us), up to %s waiting\n",
                commas(a, sizeof a, r->steps), r->sched_us_per_step,
                r->sched_us_per_step_max, commas(b, sizeof b, r->max_waiting));
    }
    text_tiers(f, cfg, r);
    fprintf(f, "  wall time      %.2f s\n", r->wall_s);
}
