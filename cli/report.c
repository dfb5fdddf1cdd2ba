/*
 * cli/report.c -- the replay's reports: the human-readable summary and the
 * one-object JSON document of `radixkv replay` (see report.h).
 *
 * Pure formatting of an rkv_replay_result; nothing is computed here that a
 * reader could not recompute from the JSON fields.
 */
#include "cli/report.h"

#include <string.h>

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

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void json_lat(FILE *f, const char *name, const rkv_latency_summary *l)
{
    fprintf(f, ",\"%s\":{\"p50\":%.3f,\"p90\":%.3f,\"p99\":%.3f,\"mean\":%.3f,"
               "\"max\":%.3f}",
            name, l->p50, l->p90, l->p99, l->mean, l->max);
}

void rkv_report_json(FILE *f, const rkv_replay_config *cfg,
                     const rkv_workload *wl, const rkv_replay_result *r)
{
    fputs("{\"command\":\"replay\",\"workload\":", f);
    json_string(f, wl->name);
    fprintf(f, ",\"order\":\"%s\"", r->sched_mode ? "sched" : "file");
    if (r->sched_mode)
        fprintf(f, ",\"policy\":\"%s\"", rkv_policy_name(cfg->sched.policy));
    fprintf(f, ",\"eviction\":\"lru\",\"page_size\":%u,\"capacity_tokens\":%llu,"
               "\"capacity_blocks\":%llu",
            r->page_size,
            (unsigned long long)(r->capacity_blocks * r->page_size),
            (unsigned long long)r->capacity_blocks);
    if (cfg->capacity_tokens == RKV_REPLAY_UNBOUNDED)
        fputs(",\"requested_capacity_tokens\":\"unbounded\"", f);
    else
        fprintf(f, ",\"requested_capacity_tokens\":%llu",
                (unsigned long long)cfg->capacity_tokens);
    fprintf(f, ",\"requests\":%llu,\"prompt_tokens\":%llu,\"hit_tokens\":%llu,"
               "\"hit_rate\":%.6f,\"evicted_blocks\":%llu,\"peak_blocks\":%llu,"
               "\"peak_pool_blocks\":%llu,\"tree_host_bytes\":%llu",
            (unsigned long long)r->requests, (unsigned long long)r->prompt_tokens,
            (unsigned long long)r->hit_tokens, r->hit_rate,
            (unsigned long long)r->evicted_blocks,
            (unsigned long long)r->peak_blocks,
            (unsigned long long)r->peak_pool_blocks,
            (unsigned long long)r->tree_host_bytes);
    if (!r->sched_mode) {
        fprintf(f, ",\"truncated_requests\":%llu,\"match_us_per_request\":%.3f,"
                   "\"alloc_us_per_request\":%.3f,\"insert_us_per_request\":%.3f",
                (unsigned long long)r->truncated_requests, r->match_ns / 1e3,
                r->alloc_ns / 1e3, r->insert_ns / 1e3);
    } else {
        fprintf(f, ",\"rejected_requests\":%llu,\"output_tokens\":%llu,"
                   "\"prefill_tokens\":%llu,\"prefill_tokens_saved\":%llu",
                (unsigned long long)r->rejected_requests,
                (unsigned long long)r->output_tokens,
                (unsigned long long)r->prefill_tokens,
                (unsigned long long)r->prefill_saved_tokens);
        json_lat(f, "ttft_ms", &r->ttft_ms);
        json_lat(f, "latency_ms", &r->latency_ms);
        fprintf(f, ",\"simulated_s\":%.3f,\"throughput\":{\"output_tokens_per_s\":"
                   "%.1f,\"prompt_tokens_per_s\":%.1f,\"requests_per_s\":%.3f}",
                r->sim_ms / 1e3, r->output_tokens_per_s, r->prompt_tokens_per_s,
                r->requests_per_s);
        fprintf(f, ",\"preemptions\":%llu,\"dedup_holds\":%llu,\"steps\":%llu,"
                   "\"sched_us_per_step\":%.3f,\"sched_us_per_step_max\":%.3f,"
                   "\"max_waiting\":%llu",
                (unsigned long long)r->preemptions,
                (unsigned long long)r->dedup_holds, (unsigned long long)r->steps,
                r->sched_us_per_step, r->sched_us_per_step_max,
                (unsigned long long)r->max_waiting);
        const rkv_cost_model *m = &cfg->cost;
        fprintf(f, ",\"cost_model\":{\"layers\":%u,\"hidden\":%u,\"kv_heads\":%u,"
                   "\"head_dim\":%u,\"params\":%.4g,\"weight_bytes\":%g,"
                   "\"kv_bytes\":%g,\"gpu_tflops\":%g,\"gpu_bandwidth_tbs\":%g,"
                   "\"gpu_memory_gb\":%g,\"mfu\":%g,\"mbu\":%g,"
                   "\"step_overhead_ms\":%g}",
                m->layers, m->hidden, m->kv_heads, m->head_dim, m->params,
                m->weight_bytes, m->kv_dtype_bytes, m->peak_tflops,
                m->bandwidth_tbs, m->memory_gb, m->mfu, m->mbu, m->overhead_ms);
    }
    fprintf(f, ",\"wall_s\":%.3f}\n", r->wall_s);
}

void rkv_report_text(FILE *f, const rkv_replay_config *cfg,
                     const rkv_workload *wl, const rkv_replay_result *r)
{
    char a[32], b[32], c[32];
    fprintf(f, "radixkv replay: %s, %s requests, %s prompt tokens\n", wl->name,
            commas(a, sizeof a, (uint64_t)wl->num_reqs),
            commas(b, sizeof b, wl->prompt_tokens));
    fprintf(f, "  order          %s", r->sched_mode ? "sched" : "file");
    if (r->sched_mode)
        fprintf(f, ", policy %s, max %u tokens / %u requests per step",
                rkv_policy_name(cfg->sched.policy), cfg->sched.max_batch_tokens,
                cfg->sched.max_running);
    fputc('\n', f);
    fprintf(f, "  cache          %s tokens = %s blocks of %u tokens, eviction lru\n",
            commas(a, sizeof a, r->capacity_blocks * r->page_size),
            commas(b, sizeof b, r->capacity_blocks), r->page_size);
    fprintf(f, "  hit rate       %.2f %%  (%s of %s prompt tokens from cache)\n",
            100.0 * r->hit_rate, commas(a, sizeof a, r->hit_tokens),
            commas(b, sizeof b, r->prompt_tokens));
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
        fprintf(f, "  model          %.3gB params, %u layers, %u KV heads x %u, "
                   "on %g TFLOP/s, %g TB/s (mfu %g, mbu %g)\n",
                m->params / 1e9, m->layers, m->kv_heads, m->head_dim,
                m->peak_tflops, m->bandwidth_tbs, m->mfu, m->mbu);
        if (r->rejected_requests)
            fprintf(f, "  rejected       %s requests larger than the whole pool\n",
                    commas(a, sizeof a, r->rejected_requests));
        fprintf(f, "  prefill        %s tokens computed, %s saved by the cache\n",
                commas(a, sizeof a, r->prefill_tokens),
                commas(b, sizeof b, r->prefill_saved_tokens));
        fprintf(f, "  TTFT           p50 %.1f ms, p90 %.1f ms, p99 %.1f ms "
                   "(mean %.1f)\n",
                r->ttft_ms.p50, r->ttft_ms.p90, r->ttft_ms.p99, r->ttft_ms.mean);
        /* A median first token after a minute is queueing, not service:
         * say so rather than let the figure pass for the cache's effect. */
        if (r->ttft_ms.p50 > 60e3)
            fprintf(f, "  note           TTFT is mostly queueing: arrivals outpace "
                       "the simulated GPU (try --time-scale 4)\n");
        fprintf(f, "  latency        p50 %.1f ms, p90 %.1f ms, p99 %.1f ms "
                   "(mean %.1f)\n",
                r->latency_ms.p50, r->latency_ms.p90, r->latency_ms.p99,
                r->latency_ms.mean);
        fprintf(f, "  throughput     %.0f output tok/s, %.0f prompt tok/s, "
                   "%.2f req/s over %.1f simulated s\n",
                r->output_tokens_per_s, r->prompt_tokens_per_s,
                r->requests_per_s, r->sim_ms / 1e3);
        fprintf(f, "  preemptions    %s   (dedup holds %s)\n",
                commas(a, sizeof a, r->preemptions),
                commas(b, sizeof b, r->dedup_holds));
        fprintf(f, "  peak blocks    %s held by requests, %s in the pool of %s\n",
                commas(a, sizeof a, r->peak_blocks),
                commas(b, sizeof b, r->peak_pool_blocks),
                commas(c, sizeof c, r->capacity_blocks));
        fprintf(f, "  scheduler      %s steps, %.2f us per step (slowest %.0f "
                   "us), up to %s waiting\n",
                commas(a, sizeof a, r->steps), r->sched_us_per_step,
                r->sched_us_per_step_max, commas(b, sizeof b, r->max_waiting));
    }
    fprintf(f, "  wall time      %.2f s\n", r->wall_s);
}
