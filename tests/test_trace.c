/*
 * tests/test_trace.c -- the Mooncake trace reader (sim/trace.c), the block
 * id expansion, and the workload records built from traces and generators
 * (sim/workload.c).
 *
 * Every malformed case is placed after valid lines, so the reported line
 * number is checked, not just the status. Expansion properties are checked
 * on random ids (seeded; RKV_TEST_SEED replays).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/trace.h"
#include "sim/workload.h"
#include "tests/support/test_workload.h"
#include "tests/support/test_util.h"

#define GOOD1 "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [1, 2]}\n"
#define GOOD2 "{\"hash_ids\":[7],\"output_length\":0,\"timestamp\":12.5,\"input_length\":512}\n"

/* Reads all of buf; returns the status of the first failure (or RKV_OK)
 * and the number of records read before it. */
static rkv_status read_all(const char *buf, size_t *records)
{
    rkv_trace_reader *r = NULL;
    rkv_status st = rkv_trace_reader_open_memory(buf, strlen(buf), "t.jsonl", &r);
    cr_assert_eq(st, RKV_OK);
    *records = 0;
    for (;;) {
        rkv_trace_record rec;
        int eof = 0;
        st = rkv_trace_reader_next(r, &rec, &eof);
        if (st != RKV_OK || eof)
            break;
        (*records)++;
    }
    if (st != RKV_OK) {
        /* Sticky: a second call fails the same way. */
        rkv_trace_record rec;
        int eof = 0;
        char first[512];
        snprintf(first, sizeof first, "%s", rkv_last_error());
        cr_assert_eq(rkv_trace_reader_next(r, &rec, &eof), st);
        cr_assert_str_eq(rkv_last_error(), first);
    }
    rkv_trace_reader_close(r);
    return st;
}

Test(trace, valid_lines_any_order_unknown_fields)
{
    const char *buf =
        GOOD1
        "\n"
        "   \r\n"
        GOOD2
        "{\"extra\": {\"a\": [1, 2.5e3, \"x\\\"y\\u00e9\", true, false, null, {}]},"
        " \"timestamp\": 3e2, \"input_length\": 1, \"output_length\": 2,"
        " \"hash_ids\": [18446744073709551615], \"z\": -0.5}\r\n"
        "{\"timestamp\":1,\"input_length\":1025,\"output_length\":1,\"hash_ids\":[0,0,0]}";
    rkv_trace_reader *r = NULL;
    cr_assert_eq(rkv_trace_reader_open_memory(buf, strlen(buf), "x", &r), RKV_OK);
    rkv_trace_record rec;
    int eof = 0;
    cr_assert_eq(rkv_trace_reader_next(r, &rec, &eof), RKV_OK);
    cr_assert(!eof);
    cr_assert_eq(rec.line, 1);
    cr_assert_eq(rec.input_length, 600);
    cr_assert_eq(rec.output_length, 5);
    cr_assert_eq(rec.num_hash_ids, 2);
    cr_assert_eq(rec.hash_ids[0], 1);
    cr_assert_eq(rec.hash_ids[1], 2);
    cr_assert_eq(rkv_trace_reader_next(r, &rec, &eof), RKV_OK);
    cr_assert_eq(rec.line, 4, "blank lines are skipped but counted");
    cr_assert_float_eq(rec.timestamp_ms, 12.5, 1e-12);
    cr_assert_eq(rec.input_length, 512);
    cr_assert_eq(rec.output_length, 0);
    cr_assert_eq(rec.hash_ids[0], 7);
    cr_assert_eq(rkv_trace_reader_next(r, &rec, &eof), RKV_OK);
    cr_assert_eq(rec.line, 5);
    cr_assert_float_eq(rec.timestamp_ms, 300.0, 1e-12);
    cr_assert_eq(rec.hash_ids[0], UINT64_MAX);
    cr_assert_eq(rkv_trace_reader_next(r, &rec, &eof), RKV_OK);
    cr_assert_eq(rec.line, 6, "last line without newline");
    cr_assert_eq(rec.num_hash_ids, 3);
    cr_assert_eq(rkv_trace_reader_next(r, &rec, &eof), RKV_OK);
    cr_assert(eof);
    cr_assert_eq(rkv_trace_reader_next(r, &rec, &eof), RKV_OK);
    cr_assert(eof, "eof is stable");
    rkv_trace_reader_close(r);
}

typedef struct bad_case {
    const char *line;
    const char *needle; /* expected in the message after "t.jsonl:3: " */
} bad_case;

Test(trace, malformed_lines_report_their_line)
{
    static const bad_case cases[] = {
        {"{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [1, 2]", "malformed JSON"},
        {"{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [1, 2],}", "malformed JSON"},
        {"{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [1, 2]} x", "malformed JSON"},
        {"{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [1, 2,]}", "malformed JSON"},
        {"{\"timestamp\": 0 \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [1, 2]}", "malformed JSON"},
        {"{\"timestamp\": tru, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [1, 2]}", "malformed JSON"},
        {"{\"timestamp: 0, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [1, 2]}", "malformed JSON"},
        {"{\"q\": \"\\x\", \"timestamp\": 0, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [1, 2]}", "malformed JSON"},
        {"{\"timestamp\": 01, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [1, 2]}", "malformed JSON"},
        {"[1, 2]", "malformed JSON"},
        {"garbage", "malformed JSON"},
        {"{\"input_length\": 600, \"output_length\": 5, \"hash_ids\": [1, 2]}", "missing field \"timestamp\""},
        {"{\"timestamp\": 0, \"output_length\": 5, \"hash_ids\": [1, 2]}", "missing field \"input_length\""},
        {"{\"timestamp\": 0, \"input_length\": 600, \"hash_ids\": [1, 2]}", "missing field \"output_length\""},
        {"{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 5}", "missing field \"hash_ids\""},
        {"{}", "missing field"},
        {"{\"timestamp\": 0, \"input_length\": -600, \"output_length\": 5, \"hash_ids\": [1, 2]}", "negative input_length"},
        {"{\"timestamp\": 0, \"input_length\": 600, \"output_length\": -1, \"hash_ids\": [1, 2]}", "negative output_length"},
        {"{\"timestamp\": -3, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [1, 2]}", "negative timestamp"},
        {"{\"timestamp\": 0, \"input_length\": \"600\", \"output_length\": 5, \"hash_ids\": [1, 2]}", "input_length: expected an integer"},
        {"{\"timestamp\": 0, \"input_length\": 600.5, \"output_length\": 5, \"hash_ids\": [1, 2]}", "input_length: expected an integer"},
        {"{\"timestamp\": 0, \"input_length\": 600, \"output_length\": null, \"hash_ids\": [1, 2]}", "output_length: expected an integer"},
        {"{\"timestamp\": \"0\", \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [1, 2]}", "timestamp: expected a number"},
        {"{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": 1}", "hash_ids: expected an array"},
        {"{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [1, \"2\"]}", "hash_ids[1]"},
        {"{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [1, -2]}", "hash_ids[1]"},
        {"{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [1.5, 2]}", "hash_ids[0]"},
        {"{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [18446744073709551616, 2]}", "hash_ids[0]"},
        {"{\"timestamp\": 0, \"input_length\": 1025, \"output_length\": 5, \"hash_ids\": [1, 2]}", "does not fit"},
        {"{\"timestamp\": 0, \"input_length\": 512, \"output_length\": 5, \"hash_ids\": [1, 2]}", "does not fit"},
        {"{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 5, \"hash_ids\": []}", "does not fit"},
        {"{\"timestamp\": 0, \"input_length\": 0, \"output_length\": 5, \"hash_ids\": []}", "input_length is 0"},
        {"{\"timestamp\": 0, \"timestamp\": 1, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [1, 2]}", "duplicate field"},
        {"{\"timestamp\": 0, \"input_length\": 99999999999, \"output_length\": 5, \"hash_ids\": [1, 2]}", "too large"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[1024];
        snprintf(buf, sizeof buf, GOOD1 GOOD2 "%s\n" GOOD1, cases[i].line);
        size_t n = 0;
        rkv_status st = read_all(buf, &n);
        cr_assert_eq(st, RKV_ERR_FORMAT, "case %zu (%s): status %d", i,
                     cases[i].line, st);
        cr_assert_eq(n, 2, "case %zu: %zu records before the error", i, n);
        const char *msg = rkv_last_error();
        cr_assert(strncmp(msg, "t.jsonl:3: ", 11) == 0,
                  "case %zu: message '%s' lacks 't.jsonl:3: '", i, msg);
        cr_assert(strstr(msg, cases[i].needle) != NULL,
                  "case %zu: message '%s' lacks '%s'", i, msg,
                  cases[i].needle);
    }
}

Test(trace, nul_byte_in_line)
{
    const char buf[] = GOOD1 "{\"timestamp\": 0\0}\n";
    rkv_trace_reader *r = NULL;
    cr_assert_eq(rkv_trace_reader_open_memory(buf, sizeof buf - 1, "n", &r), RKV_OK);
    rkv_trace_record rec;
    int eof = 0;
    cr_assert_eq(rkv_trace_reader_next(r, &rec, &eof), RKV_OK);
    cr_assert_eq(rkv_trace_reader_next(r, &rec, &eof), RKV_ERR_FORMAT);
    cr_assert(strncmp(rkv_last_error(), "n:2: ", 5) == 0, "%s", rkv_last_error());
    rkv_trace_reader_close(r);
}

Test(trace, file_reader_and_missing_file)
{
    char path[] = "/tmp/rkv_trace_test_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    FILE *f = fdopen(fd, "w");
    cr_assert_not_null(f);
    fputs(GOOD1 GOOD2 GOOD1 "{\"timestamp\": 0}\n", f);
    fclose(f);

    rkv_trace_reader *r = NULL;
    cr_assert_eq(rkv_trace_reader_open_path(path, &r), RKV_OK);
    cr_assert_str_eq(rkv_trace_reader_name(r), path);
    rkv_workload wl;
    rkv_workload_init(&wl);
    cr_assert_eq(rkv_workload_load_trace(&wl, r, 0), RKV_ERR_FORMAT);
    char want[256];
    snprintf(want, sizeof want, "%s:4: missing field", path);
    cr_assert(strncmp(rkv_last_error(), want, strlen(want)) == 0, "%s",
              rkv_last_error());
    cr_assert_eq(wl.num_reqs, 0, "a failed load leaves the workload empty");
    rkv_trace_reader_close(r);

    /* --limit stops before the bad line. */
    cr_assert_eq(rkv_trace_reader_open_path(path, &r), RKV_OK);
    cr_assert_eq(rkv_workload_load_trace(&wl, r, 3), RKV_OK);
    cr_assert_eq(wl.num_reqs, 3);
    cr_assert_eq(wl.prompt_tokens, 600 + 512 + 600);
    cr_assert_eq(wl.reqs[1].line, 2);
    cr_assert_eq(rkv_workload_check(&wl), RKV_OK);
    rkv_workload_free(&wl);
    rkv_trace_reader_close(r);
    unlink(path);

    cr_assert_eq(rkv_trace_reader_open_path("/nonexistent/rkv.jsonl", &r), RKV_ERR_IO);
    cr_assert(strstr(rkv_last_error(), "/nonexistent/rkv.jsonl") != NULL);
    cr_assert(strstr(rkv_last_error(), "No such file") != NULL, "%s", rkv_last_error());
}

Test(trace, embedded_trace_matches_the_file)
{
    /* The embedded copy and the file in bench/traces give the same
     * records; totals match the trace's published description (12,031
     * requests, 144,793,823 prompt tokens, bench/traces/README.md). */
    rkv_trace_reader *a = NULL, *b = NULL;
    cr_assert_eq(rkv_trace_reader_open_embedded(&a), RKV_OK);
    cr_assert_eq(rkv_trace_reader_open_path(
                     RKV_SOURCE_DIR "/bench/traces/mooncake_conversation_trace.jsonl", &b),
                 RKV_OK);
    rkv_workload wa, wb;
    rkv_workload_init(&wa);
    rkv_workload_init(&wb);
    cr_assert_eq(rkv_workload_load_trace(&wa, a, 0), RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(rkv_workload_load_trace(&wb, b, 0), RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(wa.num_reqs, 12031);
    cr_assert_eq(wa.prompt_tokens, 144793823ULL);
    cr_assert_eq(wa.num_reqs, wb.num_reqs);
    cr_assert_eq(wa.num_segs, wb.num_segs);
    cr_assert(memcmp(wa.seg_keys, wb.seg_keys, wa.num_segs * sizeof *wa.seg_keys) == 0);
    cr_assert(memcmp(wa.seg_lens, wb.seg_lens, wa.num_segs * sizeof *wa.seg_lens) == 0);
    for (size_t i = 0; i < wa.num_reqs; i++) {
        cr_assert_eq(wa.reqs[i].input_length, wb.reqs[i].input_length);
        cr_assert_eq(wa.reqs[i].arrival_ms, wb.reqs[i].arrival_ms);
        cr_assert_eq(wa.reqs[i].line, i + 1);
    }
    cr_assert_eq(rkv_workload_check(&wa), RKV_OK, "%s", rkv_last_error());
    rkv_workload_free(&wa);
    rkv_workload_free(&wb);
    rkv_trace_reader_close(a);
    rkv_trace_reader_close(b);
}

Test(trace, expansion_properties)
{
    uint64_t seed = rkv_test_seed("trace.expansion_properties");
    rkv_rng g;
    rkv_rng_init(&g, seed);
    int32_t *x = malloc(512 * sizeof *x), *y = malloc(512 * sizeof *y);
    cr_assert(x && y);
    for (int it = 0; it < 200; it++) {
        uint64_t h = rkv_rng_next(&g) >> (rkv_rng_below(&g, 64));
        uint64_t k = h ^ (1 + rkv_rng_below(&g, 0x7fffffff));
        rkv_trace_block_tokens(h, 0, 512, x);
        rkv_trace_block_tokens(h, 0, 512, y);
        cr_assert(memcmp(x, y, 512 * sizeof *x) == 0, "equal ids, equal tokens");
        cr_assert_eq(x[0], (int32_t)(h & 0x7fffffff));
        for (int j = 0; j < 512; j++) {
            cr_assert_geq(x[j], 0);
            cr_assert_eq(x[j], rkv_trace_block_token(h, (uint32_t)j));
        }
        /* k differs from h in its low 31 bits: token 0 differs. */
        rkv_trace_block_tokens(k, 0, 512, y);
        cr_assert_neq(x[0], y[0]);
        /* offset form agrees with the whole block */
        uint32_t off = (uint32_t)rkv_rng_below(&g, 512);
        rkv_trace_block_tokens(h, off, 512 - off, y);
        cr_assert(memcmp(x + off, y, (512 - off) * sizeof *x) == 0);
    }
    /* Tokens within a block are spread: few repeats among 512. */
    rkv_trace_block_tokens(42, 0, 512, x);
    int repeats = 0;
    for (int i = 1; i < 512; i++)
        for (int j = i + 1; j < 512; j++)
            repeats += x[i] == x[j];
    cr_assert_lt(repeats, 2);

    /* Whole-prompt expansion: cut to input_length, blocks in order. */
    uint64_t ids[3] = {5, 9, 5};
    int32_t *p = malloc(1400 * sizeof *p);
    cr_assert_not_null(p);
    cr_assert_eq(rkv_trace_expand(ids, 3, 1400, p), RKV_OK);
    cr_assert(memcmp(p, p + 1024, (1400 - 1024) * sizeof *p) == 0);
    rkv_trace_block_tokens(9, 0, 512, x);
    cr_assert(memcmp(p + 512, x, 512 * sizeof *p) == 0);
    cr_assert_eq(rkv_trace_expand(ids, 3, 1024, p), RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_trace_expand(ids, 3, 1537, p), RKV_ERR_INVALID_ARG);
    free(p);
    free(x);
    free(y);
}

/* Prompt and output tokens of request i, concatenated. */
static int32_t *full_context(const rkv_workload *wl, size_t i, size_t *n)
{
    const rkv_wl_request *q = &wl->reqs[i];
    *n = (size_t)q->input_length + q->output_length;
    int32_t *t = malloc(*n * sizeof *t);
    cr_assert_not_null(t);
    cr_assert_eq(rkv_workload_prompt(wl, i, t), RKV_OK);
    for (uint32_t k = 0; k < q->output_length; k++)
        t[q->input_length + k] = rkv_workload_output_token(q, k);
    return t;
}

Test(workload, agentic_turns_extend_the_previous_turn)
{
    uint64_t seed = rkv_test_seed("workload.agentic");
    rkv_agentic_config cfg;
    rkv_agentic_config_init(&cfg);
    cfg.sessions = 12;
    rkv_workload wl, again;
    rkv_workload_init(&wl);
    rkv_workload_init(&again);
    cr_assert_eq(rkv_workload_agentic(&wl, &cfg, seed), RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(rkv_workload_check(&wl), RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(rkv_workload_agentic(&again, &cfg, seed), RKV_OK);
    cr_assert_eq(wl.num_reqs, again.num_reqs, "same seed, same workload");
    cr_assert(memcmp(wl.seg_keys, again.seg_keys, wl.num_segs * sizeof *wl.seg_keys) == 0);
    cr_assert_geq(wl.num_reqs, cfg.sessions);

    uint32_t shared = cfg.system_tokens + cfg.tools_tokens;
    int32_t *first = NULL;
    size_t children = 0;
    for (size_t i = 0; i < wl.num_reqs; i++) {
        const rkv_wl_request *q = &wl.reqs[i];
        cr_assert_leq(q->input_length, cfg.max_prompt_tokens);
        int32_t *p = malloc(q->input_length * sizeof *p);
        cr_assert_not_null(p);
        cr_assert_eq(rkv_workload_prompt(&wl, i, p), RKV_OK);
        if (!first) {
            first = p;
        } else {
            cr_assert(memcmp(first, p, shared * sizeof *p) == 0,
                      "request %zu shares the system prompt + tools", i);
            if (q->parent == RKV_WL_NO_PARENT)
                cr_assert_neq(first[shared], p[shared],
                              "first turns of two sessions differ after the "
                              "shared part");
        }
        if (q->parent != RKV_WL_NO_PARENT) {
            children++;
            size_t n = 0;
            int32_t *ctx = full_context(&wl, q->parent, &n);
            cr_assert_gt(q->input_length, n);
            cr_assert(memcmp(ctx, p, n * sizeof *p) == 0,
                      "turn %zu starts with its parent's prompt + output", i);
            cr_assert_gt(q->arrival_ms, wl.reqs[q->parent].arrival_ms);
            free(ctx);
        }
        if (p != first)
            free(p);
    }
    cr_assert_gt(children, 0);
    free(first);
    rkv_workload_free(&wl);
    rkv_workload_free(&again);
}

Test(workload, fewshot_shares_one_header)
{
    rkv_workload wl;
    rkv_test_fewshot(&wl, 300, "workload.fewshot");
    rkv_fewshot_config cfg; /* the defaults it was made with */
    rkv_fewshot_config_init(&cfg);
    cr_assert_eq(rkv_workload_check(&wl), RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(wl.num_reqs, 300);
    int32_t *h = malloc((cfg.header_tokens + cfg.suffix_max) * sizeof *h);
    int32_t *p = malloc((cfg.header_tokens + cfg.suffix_max) * sizeof *p);
    cr_assert(h && p);
    cr_assert_eq(rkv_workload_prompt(&wl, 0, h), RKV_OK);
    for (size_t i = 1; i < wl.num_reqs; i++) {
        const rkv_wl_request *q = &wl.reqs[i];
        cr_assert_eq(q->arrival_ms, 0.0, "one wave: all arrive together");
        cr_assert_geq(q->input_length, cfg.header_tokens + cfg.suffix_min);
        cr_assert_leq(q->input_length, cfg.header_tokens + cfg.suffix_max);
        cr_assert_geq(q->output_length, cfg.output_min);
        cr_assert_leq(q->output_length, cfg.output_max);
        cr_assert_eq(rkv_workload_prompt(&wl, i, p), RKV_OK);
        cr_assert(memcmp(h, p, cfg.header_tokens * sizeof *p) == 0);
        cr_assert_neq(h[cfg.header_tokens], p[cfg.header_tokens],
                      "suffixes are distinct");
    }
    free(h);
    free(p);
    rkv_workload_free(&wl);

    cr_assert_eq(rkv_workload_fewshot(&wl, &(rkv_fewshot_config){0}, 1),
                 RKV_ERR_INVALID_ARG);
}

Test(trace, random_mutations_never_crash)
{
    /* Byte flips, deletions and truncations of valid lines: every outcome
     * is a record or RKV_ERR_FORMAT naming line 1, never a crash (run under
     * ASan/UBSan in CI). */
    uint64_t seed = rkv_test_seed("trace.random_mutations_never_crash");
    rkv_rng g;
    rkv_rng_init(&g, seed);
    static const char *const base[] = {
        "{\"timestamp\": 27482, \"input_length\": 6955, \"output_length\": 52, "
        "\"hash_ids\": [46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59]}",
        "{\"x\": [{\"y\": \"a\\\\b\\u0041\"}, -1.5e-3, null], \"hash_ids\": [1], "
        "\"timestamp\": 1.25, \"output_length\": 0, \"input_length\": 3}",
    };
    static const char alphabet[] = "{}[]\":,-+.eE0123456789 \\untrfals\t";
    char buf[512];
    uint64_t *ids = NULL;
    size_t cap = 0;
    int ok = 0, bad = 0;
    for (int it = 0; it < 20000; it++) {
        const char *b = base[rkv_rng_below(&g, 2)];
        size_t n = strlen(b);
        memcpy(buf, b, n);
        int edits = 1 + (int)rkv_rng_below(&g, 3);
        for (int e = 0; e < edits && n > 1; e++) {
            size_t at = rkv_rng_below(&g, n);
            switch (rkv_rng_below(&g, 3)) {
            case 0:
                buf[at] = alphabet[rkv_rng_below(&g, sizeof alphabet - 1)];
                break;
            case 1:
                memmove(buf + at, buf + at + 1, n - at - 1);
                n--;
                break;
            default:
                n = at + 1;
                break;
            }
        }
        rkv_trace_record rec;
        rkv_status st = rkv_trace_parse_line(buf, n, "m", 1, &rec, &ids, &cap);
        if (st == RKV_OK) {
            ok++;
            cr_assert_geq(rec.input_length, 1);
            cr_assert_leq(rec.input_length, rec.num_hash_ids * 512);
        } else {
            bad++;
            cr_assert_eq(st, RKV_ERR_FORMAT, "status %d for '%.*s'", st, (int)n, buf);
            cr_assert(strncmp(rkv_last_error(), "m:1: ", 5) == 0, "%s",
                      rkv_last_error());
        }
    }
    free(ids);
    cr_assert_gt(bad, 0);
    cr_assert_gt(ok, 0);
}

/* A NULL out is refused by every opener, not written through. */
Test(trace, openers_refuse_null_out)
{
    cr_assert_eq(rkv_trace_reader_open_memory("", 0, "m", NULL), RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_trace_reader_open_file(stdin, "f", NULL), RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_trace_reader_open_embedded(NULL), RKV_ERR_INVALID_ARG);
}
