/*
 * tests/test_cli_hardening.c -- regressions for the command's library
 * (cli/) found by fuzzing and misuse (issue 10, items 5-8): key spaces of
 * prompts and outputs, work bounded by what can fit, simulated clock
 * precision, and messages that name the right file.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/replay.h"
#include "sim/trace.h"
#include "sim/workload.h"
#include "tests/support/test_workload.h"

/* One trace line of 4 output tokens, so that a test spells out only the
 * timestamp, prompt length and hash ids it varies. */
#define LINE_OUT4(ts, in, ids)                                                \
    "{\"timestamp\":" #ts ",\"input_length\":" #in                          \
    ",\"output_length\":4,\"hash_ids\":[" ids "]}\n"

static void load_text(rkv_workload *wl, const char *text, const char *name)
{
    rkv_trace_reader *r = NULL;
    cr_assert_eq(rkv_trace_reader_open_memory(text, strlen(text), name, &r),
                 RKV_OK);
    rkv_workload_init(wl);
    cr_assert_eq(rkv_workload_load_trace(wl, r, 0), RKV_OK, "%s",
                 rkv_last_error());
    rkv_trace_reader_close(r);
    cr_assert_eq(rkv_workload_check(wl), RKV_OK, "%s", rkv_last_error());
}

/* Every output block id of every request lies outside the set of prompt
 * block ids (and output ranges do not overlap each other). */
static void assert_disjoint_keys(const rkv_workload *wl)
{
    for (size_t i = 0; i < wl->num_reqs; i++) {
        const rkv_wl_request *q = &wl->reqs[i];
        uint64_t nb = (q->output_length + RKV_TRACE_BLOCK_TOKENS - 1) /
                      RKV_TRACE_BLOCK_TOKENS;
        for (uint64_t b = 0; b < nb; b++) {
            uint64_t k = q->output_key + b;
            cr_assert_geq(k, q->output_key, "output range of %zu wraps", i);
            for (size_t s = 0; s < wl->num_segs; s++)
                cr_assert_neq(wl->seg_keys[s], k,
                              "request %zu's output block %llu is also a "
                              "prompt block", i, (unsigned long long)k);
            for (size_t j = 0; j < wl->num_reqs; j++) {
                const rkv_wl_request *o = &wl->reqs[j];
                uint64_t onb = (o->output_length + RKV_TRACE_BLOCK_TOKENS - 1) /
                               RKV_TRACE_BLOCK_TOKENS;
                if (j != i)
                    cr_assert(k < o->output_key || k - o->output_key >= onb,
                              "outputs of %zu and %zu share block %llu", i, j,
                              (unsigned long long)k);
            }
        }
    }
}

/* Issue 10 item 5: hash id 2^64-1 made output keys wrap onto prompt
 * block 0, so the second request "hit" the first one's output. */
Test(keys, hash_id_max_does_not_alias_outputs)
{
    const char *text =
        "{\"timestamp\":0,\"input_length\":512,\"output_length\":600,"
        "\"hash_ids\":[18446744073709551615]}\n"
        "{\"timestamp\":100000,\"input_length\":1024,\"output_length\":4,"
        "\"hash_ids\":[18446744073709551615,0]}\n";
    rkv_workload wl;
    load_text(&wl, text, "max.jsonl");
    assert_disjoint_keys(&wl);

    rkv_replay_config cfg = rkv_test_replay_config(0, 100000, 1);
    rkv_replay_result res;
    cr_assert_eq(rkv_replay_sched(&wl, &cfg, &res), RKV_OK, "%s",
                 rkv_last_error());
    /* Only the first block of the second prompt was seen before. */
    cr_assert_eq(res.hit_tokens, 512, "hit %llu tokens",
                 (unsigned long long)res.hit_tokens);
    rkv_workload_free(&wl);
}

/* Keys that fill both ends of the id space: outputs go in a gap. */
Test(keys, outputs_find_a_gap_anywhere)
{
    const char *text =
        "{\"timestamp\":0,\"input_length\":1536,\"output_length\":1500,"
        "\"hash_ids\":[0,1,18446744073709551615]}\n"
        "{\"timestamp\":1,\"input_length\":1024,\"output_length\":2000,"
        "\"hash_ids\":[18446744073709551614,2]}\n"
        "{\"timestamp\":2,\"input_length\":100,\"output_length\":0,"
        "\"hash_ids\":[3]}\n";
    rkv_workload wl;
    load_text(&wl, text, "ends.jsonl");
    assert_disjoint_keys(&wl);
    rkv_workload_free(&wl);
}

/* ---- issue 10 item 6: work bounded by what can fit ------------------------ */

#include <sys/resource.h>

#if defined(__SANITIZE_ADDRESS__)
#define RKV_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RKV_ASAN 1
#endif
#endif

/* Caps this test process's address space at what it uses now plus
 * `extra` bytes, so work proportional to a hostile input's claims fails
 * instead of passing slowly. Not under ASan (it reserves terabytes). */
static void limit_memory(size_t extra)
{
#ifndef RKV_ASAN
    FILE *f = fopen("/proc/self/statm", "r");
    cr_assert_not_null(f);
    unsigned long pages = 0;
    cr_assert_eq(fscanf(f, "%lu", &pages), 1);
    fclose(f);
    struct rlimit rl;
    rl.rlim_cur = rl.rlim_max =
        (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + extra;
    cr_assert_eq(setrlimit(RLIMIT_AS, &rl), 0);
#else
    (void)extra;
#endif
}

Test(bounds, line_longer_than_the_limit_names_file_and_line)
{
    size_t n = (size_t)RKV_TRACE_MAX_LINE + 10;
    const char *good =
        "{\"timestamp\":0,\"input_length\":600,\"output_length\":5,\"hash_ids\":[1,2]}\n";
    char *buf = malloc(strlen(good) + n + 2);
    cr_assert_not_null(buf);
    strcpy(buf, good);
    memset(buf + strlen(good), ' ', n);
    strcpy(buf + strlen(good) + n, "\n");
    rkv_trace_reader *r = NULL;
    rkv_trace_record rec;
    int eof = 0;
    cr_assert_eq(rkv_trace_reader_open_memory(buf, strlen(buf), "m.jsonl", &r),
                 RKV_OK);
    cr_assert_eq(rkv_trace_reader_next(r, &rec, &eof), RKV_OK);
    cr_assert_eq(rkv_trace_reader_next(r, &rec, &eof), RKV_ERR_FORMAT);
    cr_assert(strstr(rkv_last_error(), "m.jsonl:2: line longer than 1048576 "
                                       "bytes") == rkv_last_error(),
              "%s", rkv_last_error());
    rkv_trace_reader_close(r);

    FILE *f = fmemopen(buf, strlen(buf), "r");
    cr_assert_not_null(f);
    cr_assert_eq(rkv_trace_reader_open_file(f, "f.jsonl", &r), RKV_OK);
    cr_assert_eq(rkv_trace_reader_next(r, &rec, &eof), RKV_OK);
    cr_assert_eq(rkv_trace_reader_next(r, &rec, &eof), RKV_ERR_FORMAT);
    cr_assert(strstr(rkv_last_error(), "f.jsonl:2: line longer than") ==
                  rkv_last_error(), "%s", rkv_last_error());
    rkv_trace_reader_close(r);
    fclose(f);
    free(buf);

    /* A line of exactly the limit is read (and judged as JSON). */
    buf = malloc((size_t)RKV_TRACE_MAX_LINE + 2);
    cr_assert_not_null(buf);
    memset(buf, ' ', RKV_TRACE_MAX_LINE);
    memcpy(buf, good, strlen(good) - 1);
    strcpy(buf + RKV_TRACE_MAX_LINE, "\n");
    f = fmemopen(buf, strlen(buf), "r");
    cr_assert_eq(rkv_trace_reader_open_file(f, "x", &r), RKV_OK);
    cr_assert_eq(rkv_trace_reader_next(r, &rec, &eof), RKV_OK, "%s",
                 rkv_last_error());
    cr_assert_eq(rec.input_length, 600);
    cr_assert_eq(rkv_trace_reader_next(r, &rec, &eof), RKV_OK);
    cr_assert(eof);
    rkv_trace_reader_close(r);
    fclose(f);
    free(buf);
}

Test(bounds, dev_zero_is_an_error_not_unbounded_memory, .timeout = 60)
{
    limit_memory((size_t)256 << 20);
    rkv_trace_reader *r = NULL;
    cr_assert_eq(rkv_trace_reader_open_path("/dev/zero", &r), RKV_OK);
    rkv_trace_record rec;
    int eof = 0;
    cr_assert_eq(rkv_trace_reader_next(r, &rec, &eof), RKV_ERR_FORMAT);
    cr_assert(strstr(rkv_last_error(), "/dev/zero:1: line longer than") ==
                  rkv_last_error(), "%s", rkv_last_error());
    rkv_trace_reader_close(r);
}

/* One request claiming the largest prompt a trace line may (2^24 tokens,
 * 2^15 block ids). */
static void huge_workload(rkv_workload *wl)
{
    rkv_workload_init(wl);
    uint32_t nseg = RKV_TRACE_MAX_LENGTH / RKV_TRACE_BLOCK_TOKENS;
    wl->reqs = calloc(2, sizeof *wl->reqs);
    wl->seg_keys = malloc((nseg + 1) * sizeof *wl->seg_keys);
    wl->seg_lens = malloc((nseg + 1) * sizeof *wl->seg_lens);
    cr_assert(wl->reqs && wl->seg_keys && wl->seg_lens);
    wl->reqs_cap = 2;
    wl->segs_cap = nseg + 1;
    for (uint32_t i = 0; i < nseg; i++) {
        wl->seg_keys[i] = i;
        wl->seg_lens[i] = RKV_TRACE_BLOCK_TOKENS;
    }
    wl->seg_keys[nseg] = 7;
    wl->seg_lens[nseg] = 100;
    wl->reqs[0] = (rkv_wl_request){.id = 0, .input_length = RKV_TRACE_MAX_LENGTH,
                                   .output_length = 4, .num_segs = nseg,
                                   .output_key = nseg, .line = 1,
                                   .parent = RKV_WL_NO_PARENT};
    wl->reqs[1] = (rkv_wl_request){.id = 1, .arrival_ms = 1, .input_length = 100,
                                   .output_length = 4, .seg_begin = nseg,
                                   .num_segs = 1, .output_key = nseg + 1,
                                   .line = 2, .parent = RKV_WL_NO_PARENT};
    wl->num_reqs = 2;
    wl->num_segs = nseg + 1;
    wl->prompt_tokens = (uint64_t)RKV_TRACE_MAX_LENGTH + 100;
    wl->output_tokens = 8;
    wl->next_key = nseg + 2;
    cr_assert_eq(rkv_workload_check(wl), RKV_OK, "%s", rkv_last_error());
}

Test(bounds, what_cannot_fit_is_refused_before_it_is_expanded, .timeout = 120)
{
    rkv_workload wl;
    huge_workload(&wl);
    /* 2^24 tokens would need 64 MiB expanded; allow less. */
    limit_memory((size_t)40 << 20);
    rkv_replay_config cfg;
    rkv_replay_config_init(&cfg);
    cfg.capacity_tokens = 100000;
    rkv_replay_result res;
    cr_assert_eq(rkv_replay_sched(&wl, &cfg, &res), RKV_OK, "%s",
                 rkv_last_error());
    cr_assert_eq(res.rejected_requests, 1);
    cr_assert_eq(res.requests, 1);

    cr_assert_eq(rkv_replay_file_order(&wl, &cfg, &res), RKV_OK, "%s",
                 rkv_last_error());
    cr_assert_eq(res.requests, 2);
    cr_assert_eq(res.truncated_requests, 1);
    cr_assert_eq(res.peak_blocks, 100000 / 16, "the prefix that fits is cached");
    rkv_workload_free(&wl);
}

/* ---- issue 10 item 7: the simulated clock keeps its precision ------------ */

Test(clock, precision_loss_is_refused)
{
    const char *text = LINE_OUT4(0, 100, "1") LINE_OUT4(1e15, 100, "2");
    rkv_workload wl;
    load_text(&wl, text, "late.jsonl");
    rkv_replay_config cfg;
    rkv_replay_config_init(&cfg);
    cfg.time_scale = 1e6;
    rkv_replay_result res;
    cr_assert_eq(rkv_replay_sched(&wl, &cfg, &res), RKV_ERR_INVALID_ARG,
                 "1e21 simulated ms must be refused, not rounded");
    cr_assert(strstr(rkv_last_error(), "millisecond precision") != NULL, "%s",
              rkv_last_error());
    rkv_workload_free(&wl);
}

/* Absolute (Unix epoch) timestamps are fine: the clock starts at the first
 * arrival, and TTFTs keep their sub-millisecond digits. */
Test(clock, epoch_timestamps_keep_ttft)
{
    const char *one =
        "{\"timestamp\":0,\"input_length\":100,\"output_length\":4,\"hash_ids\":[1]}\n";
    const char *epoch =
        "{\"timestamp\":1700000000000.25,\"input_length\":100,\"output_length\":4,\"hash_ids\":[1]}\n";
    rkv_replay_config cfg;
    rkv_replay_config_init(&cfg);
    cfg.time_scale = 1000;
    rkv_replay_result a, b;
    rkv_workload wl;
    load_text(&wl, one, "one.jsonl");
    cr_assert_eq(rkv_replay_sched(&wl, &cfg, &a), RKV_OK, "%s", rkv_last_error());
    rkv_workload_free(&wl);
    load_text(&wl, epoch, "epoch.jsonl");
    cr_assert_eq(rkv_replay_sched(&wl, &cfg, &b), RKV_OK, "%s", rkv_last_error());
    rkv_workload_free(&wl);
    cr_assert_gt(a.ttft_ms.p50, 0.0);
    cr_assert_eq(a.ttft_ms.p50, b.ttft_ms.p50, "%.17g vs %.17g", a.ttft_ms.p50,
                 b.ttft_ms.p50);
}

/* ---- issue 10 item 8: messages name the whole file ----------------------- */

Test(names, long_trace_name_is_not_cut)
{
    char name[1200];
    memset(name, 'n', sizeof name - 7);
    strcpy(name + sizeof name - 7, ".jsonl");
    const char *text =
        "{\"timestamp\":0,\"input_length\":100,\"output_length\":4,\"hash_ids\":[1]}\n"
        "{\"timestamp\":0,\"input_length\":100}\n";
    rkv_trace_reader *r = NULL;
    cr_assert_eq(rkv_trace_reader_open_memory(text, strlen(text), name, &r), RKV_OK);
    cr_assert_str_eq(rkv_trace_reader_name(r), name);
    rkv_workload wl;
    rkv_workload_init(&wl);
    cr_assert_eq(rkv_workload_load_trace(&wl, r, 1), RKV_OK);
    cr_assert_str_eq(wl.name, name);
    rkv_workload_free(&wl);
    rkv_trace_reader_close(r);

    cr_assert_eq(rkv_trace_reader_open_memory(text, strlen(text), name, &r), RKV_OK);
    cr_assert_eq(rkv_workload_load_trace(&wl, r, 0), RKV_ERR_FORMAT);
    char want[1300];
    snprintf(want, sizeof want, "%s:2: missing field", name);
    cr_assert(strncmp(rkv_last_error(), want, strlen(want)) == 0, "%s",
              rkv_last_error());
    rkv_trace_reader_close(r);
}

Test(names, empty_or_blank_trace_names_the_file)
{
    static const char *const texts[] = {"", "\n", "  \n\t\r\n   "};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        rkv_trace_reader *r = NULL;
        cr_assert_eq(rkv_trace_reader_open_memory(texts[i], strlen(texts[i]),
                                                  "empty.jsonl", &r), RKV_OK);
        rkv_workload wl;
        rkv_workload_init(&wl);
        cr_assert_eq(rkv_workload_load_trace(&wl, r, 0), RKV_ERR_FORMAT);
        cr_assert(strncmp(rkv_last_error(), "empty.jsonl: no requests", 24) == 0,
                  "%s", rkv_last_error());
        cr_assert_eq(wl.num_reqs, 0);
        cr_assert_null(wl.name, "a failed load leaves the workload empty");
        rkv_trace_reader_close(r);
    }
}

/* ---- issue 15 item 4: the auto time scale ---------------------------------- */

#include "sim/load.h"

Test(load, auto_scale_is_the_smallest_sustained_one)
{
    rkv_trace_reader *r = NULL;
    cr_assert_eq(rkv_trace_reader_open_embedded(&r), RKV_OK);
    rkv_workload wl;
    rkv_workload_init(&wl);
    cr_assert_eq(rkv_workload_load_trace(&wl, r, 1500), RKV_OK);
    rkv_trace_reader_close(r);
    rkv_replay_config cfg;
    rkv_replay_config_init(&cfg);
    rkv_load_estimate e;
    cr_assert_eq(rkv_load_estimate_of(&wl, &cfg, &e), RKV_OK, "%s", rkv_last_error());
    cr_assert_gt(e.work_ms, 0);
    cr_assert_gt(e.span_ms, 0);
    cr_assert(!e.closed_loop);
    /* the trace overloads one GPU at scale 1 */
    cr_assert_gt(rkv_load_at(&e, 1.0), 1.0);
    cr_assert_gt(e.auto_scale, 1.0);
    cr_assert_leq(rkv_load_at(&e, e.auto_scale), RKV_LOAD_TARGET + 1e-12);
    cr_assert_gt(rkv_load_at(&e, e.auto_scale - 0.1), RKV_LOAD_TARGET,
                 "auto picks the smallest 0.1 step");

    /* the estimate is the sum of each request's own work */
    double sum = 0;
    double kv = rkv_cost_kv_bytes_per_token(&cfg.cost) /
                (cfg.cost.bandwidth_tbs * 1e12 * cfg.cost.mbu) * 1e3;
    for (size_t i = 0; i < wl.num_reqs; i++) {
        double in = wl.reqs[i].input_length, o = wl.reqs[i].output_length;
        sum += rkv_replay_prefill_alone_ms(&cfg, 0, wl.reqs[i].input_length);
        for (double k = 1; k <= o; k++)
            sum += kv * (in + k);
    }
    cr_assert_float_eq(e.work_ms, sum, sum * 1e-9);

    /* a faster GPU needs a smaller scale */
    cfg.cost.peak_tflops *= 4;
    cfg.cost.bandwidth_tbs *= 4;
    rkv_load_estimate f;
    cr_assert_eq(rkv_load_estimate_of(&wl, &cfg, &f), RKV_OK);
    cr_assert_lt(f.auto_scale, e.auto_scale);
    rkv_workload_free(&wl);

    /* closed loop: scale 1 */
    rkv_agentic_config ac;
    rkv_agentic_config_init(&ac);
    ac.sessions = 4;
    cr_assert_eq(rkv_workload_agentic(&wl, &ac, 3), RKV_OK);
    cr_assert_eq(rkv_load_estimate_of(&wl, &cfg, &e), RKV_OK);
    cr_assert(e.closed_loop);
    cr_assert_eq(e.auto_scale, 1.0);
    rkv_workload_free(&wl);
}

Test(load, prefill_alone_is_chunked_steps)
{
    rkv_replay_config cfg;
    rkv_replay_config_init(&cfg);
    cfg.sched.max_batch_tokens = 1000;
    rkv_cost_step a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    rkv_cost_add_prefill(&a, 100, 1000);
    rkv_cost_add_prefill(&b, 1100, 500);
    double want = rkv_cost_step_ms(&cfg.cost, &a) + rkv_cost_step_ms(&cfg.cost, &b);
    cr_assert_float_eq(rkv_replay_prefill_alone_ms(&cfg, 100, 1500), want, 1e-9);
    cr_assert_eq(rkv_replay_prefill_alone_ms(&cfg, 100, 0), 0.0);
}

/* A prompt of exactly the pool's full pages plus a partial page: the
 * expansion must stop at the pool (ASan saw a write past the buffer). */
Test(bounds, partial_page_past_a_full_pool)
{
    const char *text =
        LINE_OUT4(0, 1000, "1,2") LINE_OUT4(1, 1000, "1,2");
    rkv_workload wl;
    load_text(&wl, text, "p.jsonl");
    /* 62 pages of 16; the prompt has 62 + 8/16 */
    rkv_replay_config cfg = rkv_test_replay_config(0, 992, 1);
    rkv_replay_result res;
    cr_assert_eq(rkv_replay_file_order(&wl, &cfg, &res), RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(res.hit_tokens, 992, "the second request hits every cached page");
    cr_assert_eq(res.truncated_requests, 0);
    rkv_workload_free(&wl);
}

/* ---- one line's work is capped: 2^24 prompt tokens, 2^20 output tokens
 * (sim/trace.h) --------------------------------------------------------------- */

/* The first record of text, or the reader's status for it. */
static rkv_status first_record(const char *text, rkv_trace_record *rec)
{
    rkv_trace_reader *r = NULL;
    cr_assert_eq(rkv_trace_reader_open_memory(text, strlen(text), "cap.jsonl",
                                              &r), RKV_OK);
    int eof = 0;
    rkv_status st = rkv_trace_reader_next(r, rec, &eof);
    cr_assert(st != RKV_OK || !eof);
    rkv_trace_reader_close(r);
    return st;
}

/* A line of input_length L (ceil(L / 512) hash ids, all 0, the densest
 * spelling) and the given output_length. */
static char *length_line(uint64_t in, uint64_t out)
{
    uint64_t ids = (in + RKV_TRACE_BLOCK_TOKENS - 1) / RKV_TRACE_BLOCK_TOKENS;
    char *s = malloc(2 * ids + 128);
    cr_assert_not_null(s);
    int n = sprintf(s, "{\"timestamp\":0,\"input_length\":%llu,"
                       "\"output_length\":%llu,\"hash_ids\":[",
                    (unsigned long long)in, (unsigned long long)out);
    for (uint64_t i = 0; i < ids; i++) {
        s[n++] = '0';
        s[n++] = ',';
    }
    strcpy(s + n - (ids > 0), "]}\n");
    return s;
}

/* The prompt (output 0) or output (output 1) length limit is exact: a
 * line one past it is refused, a line at it is read with that length. */
static void length_limit_is_exact(int output, uint64_t limit)
{
    rkv_trace_record rec;
    char *s = output ? length_line(600, limit + 1) : length_line(limit + 1, 4);
    cr_assert_eq(first_record(s, &rec), RKV_ERR_FORMAT);
    free(s);
    s = output ? length_line(600, limit) : length_line(limit, 4);
    cr_assert_eq(first_record(s, &rec), RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(output ? rec.output_length : rec.input_length, limit);
    free(s);
}

/* A 1 MiB line of 524,000 ids claimed 268M prompt tokens: with capacity
 * unbounded the replay grew to gigabytes expanding it. Such a line is
 * refused when read, naming the limit; the limit itself is accepted. */
Test(bounds, a_line_longer_than_a_context_is_refused_when_read)
{
    rkv_trace_record rec;
    char *s = length_line((uint64_t)524000 * 512, 4);
    cr_assert_leq(strlen(s), RKV_TRACE_MAX_LINE);
    cr_assert_eq(first_record(s, &rec), RKV_ERR_FORMAT, "268M tokens read");
    cr_assert(strstr(rkv_last_error(), "cap.jsonl:1: input_length too large "
                                       "(limit 16777216)") != NULL,
              "%s", rkv_last_error());
    free(s);
    length_limit_is_exact(0, (uint64_t)1 << 24);

    /* a 70-byte line claiming 2^24 output tokens decoded for minutes (the
     * scheduler replay's work grows with the square of a decode) */
    s = length_line(600, (uint64_t)1 << 24);
    cr_assert_eq(first_record(s, &rec), RKV_ERR_FORMAT);
    cr_assert(strstr(rkv_last_error(), "output_length too large (limit "
                                       "1048576)") != NULL,
              "%s", rkv_last_error());
    free(s);
    length_limit_is_exact(1, (uint64_t)1 << 20);
}

/* ---- number options: exact values, truthful ranges ----------------------- */

#include "cli/args.h"
#include "tests/support/cli_run.h"

static void accepted(const char *args, rkv_cli_options *o)
{
    char err[512];
    cr_assert_eq(rkv_cli_parse_line(args, o, err, sizeof err), RKV_ACT_RUN,
                 "'%s' refused: %s", args, err);
}

static void refused_with(const char *args, const char *want)
{
    rkv_cli_options o;
    char err[512];
    cr_assert_eq(rkv_cli_parse_line(args, &o, err, sizeof err), RKV_ACT_USAGE_ERROR,
                 "'%s' was accepted", args);
    cr_assert(strstr(err, want) != NULL, "'%s': message '%s' lacks '%s'", args,
              err, want);
}

/* A count is read exactly, however it is written: 1e19 is below 2^64 (it
 * was refused by "expected ... 0..18446744073709551615"), and exponent
 * forms do not round through a double. */
Test(numbers, counts_are_exact_up_to_their_limits)
{
    rkv_cli_options o;
    accepted("replay --host-capacity-tokens 1e19", &o);
    cr_assert_eq(o.rc.host_capacity_tokens, UINT64_C(10000000000000000000));
    accepted("replay --disk-capacity-tokens 18446744073709551615", &o);
    cr_assert_eq(o.rc.disk_capacity_tokens, UINT64_MAX);
    accepted("replay --seed 1.8446744073709551615e19", &o);
    cr_assert_eq(o.seed, UINT64_MAX);
    accepted("replay --seed 9007199254740993e0", &o); /* 2^53 + 1 */
    cr_assert_eq(o.seed, UINT64_C(9007199254740993));
    accepted("replay --seed 100e-2", &o);
    cr_assert_eq(o.seed, 1);
    accepted("replay --seed 0.0e99999999999999999999", &o);
    cr_assert_eq(o.seed, 0);
    accepted("replay --max-batch-tokens 4.294967295e9", &o);
    cr_assert_eq(o.rc.sched.max_batch_tokens, UINT32_MAX);
    accepted("replay --capacity-tokens 1125899906842624", &o);
    cr_assert_eq(o.rc.capacity_tokens, UINT64_C(1) << 50);
    accepted("replay --pin-cap-pct 1e2", &o);
    cr_assert_eq(o.rc.max_pinned_pct, 100);
    accepted("replay --write-policy selective:4294967295", &o);
    cr_assert_eq(o.rc.selective_hits, UINT32_MAX);
    accepted("replay --write-policy selective:1e3", &o);
    cr_assert_eq(o.rc.selective_hits, 1000);
    accepted("replay --prefetch timeout:2.5e2", &o);
    cr_assert_eq(o.rc.sched.prefetch, RKV_PREFETCH_TIMEOUT);
    cr_assert_eq(o.rc.sched.prefetch_timeout_ms, 250.0);
    accepted("replay --prefetch wait", &o);
    cr_assert_eq(o.rc.sched.prefetch, RKV_PREFETCH_WAIT);
    accepted("replay --prefetch best-effort", &o);
    cr_assert_eq(o.rc.sched.prefetch, RKV_PREFETCH_BEST_EFFORT);
}

/* Every value refused by a range message is outside that range (or not a
 * whole number, which the message says), just above and below each
 * limit, in digits and in exponent form. */
Test(numbers, range_messages_state_the_real_range)
{
    static const char *const u64 = "0..18446744073709551615";
    refused_with("replay --seed 18446744073709551616", u64);
    refused_with("replay --seed 18446744073709551616", "(too large)");
    refused_with("replay --seed 1.8446744073709551616e19", u64);
    refused_with("replay --host-capacity-tokens 2e19", u64);
    refused_with("replay --host-capacity-tokens 1e99999999999999999999", u64);
    refused_with("replay --seed 15e-1", "(not a whole number)");
    refused_with("replay --seed 1.00000000000000000001", "(not a whole number)");
    static const char *const u32 = "1..4294967295";
    refused_with("replay --max-batch-tokens 4294967296", u32);
    refused_with("replay --max-batch-tokens 4.294967296e9", u32);
    refused_with("replay --max-batch-tokens 0", u32);
    refused_with("replay --max-batch-tokens 0", "(too small)");
    refused_with("replay --pin-cap-pct 101", "0..100");
    refused_with("replay --pin-cap-pct 1.01e2", "0..100");
    refused_with("replay --capacity-tokens 1125899906842625",
                 "1..1125899906842624 or 'unbounded'");
    refused_with("replay --capacity-tokens 0", "or 'unbounded'");
    refused_with("replay --write-policy selective:4294967296",
                 "K in 1..4294967295");
    refused_with("replay --write-policy selective:0", "K in 1..4294967295");
    refused_with("replay --write-policy selective:x", "K in 1..4294967295");
    refused_with("replay --prefetch timeout:-1", "[0, 1e+12]");
    refused_with("replay --prefetch later", "off, best-effort, wait or timeout:MS");
    refused_with("replay --time-scale 1000001", "[0, 1e+06] or 'auto'");
    refused_with("replay --mfu 1.000001", "[1e-06, 1]");
    refused_with("replay --mfu 9.99999e-7", "[1e-06, 1]");
    refused_with("replay --weight-bytes 0.00999", "[0.01, 64]");
    refused_with("replay --weight-bytes 64.0001", "[0.01, 64]");
    refused_with("sweep --host-capacities 1,1125899906842625",
                 "1..1125899906842624");
}

/* A number in range is accepted however small its spelling: 1e-400 is in
 * [0, 1e+06] (it was refused: strtod's underflow). */
Test(numbers, reals_in_range_are_accepted)
{
    rkv_cli_options o;
    accepted("replay --step-overhead-ms 1e-400", &o);
    cr_assert_eq(o.rc.cost.overhead_ms, 0.0);
    accepted("replay --mfu 1e-6", &o);
    cr_assert_eq(o.rc.cost.mfu, 1e-6);
    accepted("replay --mfu 1", &o);
    accepted("replay --weight-bytes 64 --capacity-tokens 1e6", &o);
    accepted("replay --weight-bytes 0.01", &o);
    accepted("replay --time-scale 1e6", &o);
    cr_assert_eq(o.rc.time_scale, 1e6);
}

/* "lo..hi" decimal of v + 1 (v may be UINT64_MAX). */
static void plus_one(uint64_t v, char *buf, size_t cap)
{
    if (v == UINT64_MAX)
        snprintf(buf, cap, "18446744073709551616");
    else
        snprintf(buf, cap, "%llu", (unsigned long long)(v + 1));
}

/* Every count option at its limits: lo and hi accepted (in digits, and hi
 * as digits "e0"), lo - 1 and hi + 1 refused by a message stating lo..hi.
 * The limits are the documented ones (--help), written out here. */
Test(numbers, every_count_option_at_its_limits)
{
    static const struct {
        const char *flag;
        uint64_t lo, hi;
        const char *extra; /* what the option needs to apply */
    } opts[] = {
        {"seed", 0, UINT64_MAX, ""},
        {"limit", 1, UINT64_MAX, ""},
        {"capacity-tokens", 1, UINT64_C(1) << 50, ""},
        {"host-capacity-tokens", 0, UINT64_MAX, ""},
        {"disk-capacity-tokens", 0, UINT64_MAX, ""},
        {"page-size", 1, 4096, ""},
        {"max-batch-tokens", 1, UINT32_MAX, ""},
        {"max-running", 1, UINT32_MAX, ""},
        {"dedup-min-tokens", 0, UINT32_MAX, ""},
        {"check", 0, UINT32_MAX, ""},
        {"model-layers", 1, 100000, ""},
        {"model-hidden", 1, 10000000, ""},
        {"model-kv-heads", 1, 100000, ""},
        {"model-head-dim", 1, 100000, ""},
        {"pin-ttl-ms", 1, UINT64_C(1) << 40, ""},
        {"pin-cap-pct", 0, 100, ""},
        {"block-tokens", 1, 512, ""},
        {"instances", 1, 1024, ""},
        {"sessions", 1, 1000000, " --workload agentic"},
        {"requests", 1, 10000000, " --workload fewshot"},
    };
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
        char args[256], range[64], above[32];
        const char *f = opts[i].flag, *x = opts[i].extra;
        rkv_cli_options o;
        snprintf(range, sizeof range, "--%s: expected a whole number in "
                 "%llu..%llu", f, (unsigned long long)opts[i].lo,
                 (unsigned long long)opts[i].hi);
        /* a capacity the model cannot veto, so only the option is judged */
        const char *cap = strcmp(f, "capacity-tokens") ? " --capacity-tokens 1e6"
                                                        : "";
        snprintf(args, sizeof args, "replay%s%s --%s %llu", cap, x, f,
                 (unsigned long long)opts[i].lo);
        accepted(args, &o);
        snprintf(args, sizeof args, "replay%s%s --%s %llue0", cap, x, f,
                 (unsigned long long)opts[i].hi);
        accepted(args, &o);
        plus_one(opts[i].hi, above, sizeof above);
        snprintf(args, sizeof args, "replay%s%s --%s %s", cap, x, f, above);
        refused_with(args, range);
        if (opts[i].lo > 0) {
            snprintf(args, sizeof args, "replay%s%s --%s %llu", cap, x, f,
                     (unsigned long long)opts[i].lo - 1);
            refused_with(args, range);
        }
    }
}
