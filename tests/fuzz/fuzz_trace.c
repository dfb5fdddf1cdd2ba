/*
 * tests/fuzz/fuzz_trace.c -- libFuzzer harness for the trace reader
 * (sim/trace.h) and the workload built from it (sim/workload.h).
 *
 * One input is used three ways:
 *   1. line level: its first line through rkv_trace_parse_line_fmt with
 *      the format detected (as the reader does), and through
 *      rkv_trace_parse_line (Mooncake), which must accept it exactly when
 *      a Mooncake record it is;
 *   2. file level: the whole input through a memory reader, record by
 *      record, to the end or the first failure, then once more (a failed
 *      reader must repeat its failure, never skip on); and through a FILE*
 *      reader (fmemopen: the chunked FILE path), which must give the same
 *      records and the same end or failure message;
 *   3. workload level: the whole input through rkv_workload_load_trace.
 * What must hold, whatever the bytes:
 *   - a failure is RKV_ERR_FORMAT (or NOMEM) with a message that starts
 *     with "NAME:LINE: ", LINE the line that failed;
 *   - an accepted record obeys the format's rules (trace.h): 1 <=
 *     input_length <= RKV_TRACE_MAX_LENGTH, output_length <=
 *     RKV_TRACE_MAX_OUTPUT,
 *     B * (blocks - 1) < input_length <= B * blocks (B = 512 for a
 *     Mooncake record, 16 for a Bailian one: chat_id >= 0, parent_chat_id
 *     >= -1 and != chat_id), a finite timestamp >= 0, hints in range
 *     (priority -1..100), line numbers increasing, and every record of a
 *     reader in the format of its first;
 *   - parse_line and the reader agree on the first record;
 *   - the workload loads exactly when the reader reaches the end after at
 *     least one record (none: "NAME: no requests"), with one request per
 *     record, and passes rkv_workload_check; prompts expand
 *     to non-negative tokens equal to rkv_trace_expand's (expansion capped
 *     at EXPAND_CAP tokens per input: the work is bounded, not the check).
 * Any violation aborts (a crash for libFuzzer, a failed replay for ctest).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/trace.h"
#include "sim/workload.h"
#include "tests/fuzz/fuzz_die.h"

#define NAME "fuzz.jsonl"
#define EXPAND_CAP (1u << 16)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define die(...) fuzz_die("fuzz_trace", NULL, __VA_ARGS__)

static void check_failure(rkv_status st, uint64_t line)
{
    if (st != RKV_ERR_FORMAT && st != RKV_ERR_NOMEM)
        die("status %d (%s) for bad input", (int)st, rkv_strerror(st));
    char want[64];
    snprintf(want, sizeof want, "%s:%llu: ", NAME, (unsigned long long)line);
    if (strncmp(rkv_last_error(), want, strlen(want)) != 0)
        die("message does not start with '%s'", want);
}

static void check_record(const rkv_trace_record *r)
{
    if (r->input_length < 1 || r->input_length > RKV_TRACE_MAX_LENGTH)
        die("line %llu: input_length %u accepted",
            (unsigned long long)r->line, r->input_length);
    if (r->output_length > RKV_TRACE_MAX_OUTPUT)
        die("line %llu: output_length %u accepted",
            (unsigned long long)r->line, r->output_length);
    uint32_t B = r->format == RKV_TRACE_FMT_BAILIAN
                     ? RKV_TRACE_BAILIAN_BLOCK_TOKENS
                     : RKV_TRACE_BLOCK_TOKENS;
    if ((r->format != RKV_TRACE_FMT_MOONCAKE &&
         r->format != RKV_TRACE_FMT_BAILIAN) || r->block_tokens != B)
        die("line %llu: format %d with %u-token blocks",
            (unsigned long long)r->line, r->format, r->block_tokens);
    if (r->format == RKV_TRACE_FMT_BAILIAN &&
        (r->chat_id < 0 || r->parent_chat_id < -1 ||
         r->parent_chat_id == r->chat_id))
        die("line %llu: chat %lld with parent %lld accepted",
            (unsigned long long)r->line, (long long)r->chat_id,
            (long long)r->parent_chat_id);
    if (r->priority < -1 || r->priority > RKV_PRIORITY_MAX ||
        r->ttl_ms > ((uint64_t)1 << 40) ||
        (r->has_session && r->session == UINT64_MAX))
        die("line %llu: hints out of range accepted",
            (unsigned long long)r->line);
    uint64_t cap = (uint64_t)r->num_hash_ids * B;
    if (r->num_hash_ids == 0 || r->input_length > cap ||
        r->input_length <= cap - B)
        die("line %llu: input_length %u with %u blocks accepted",
            (unsigned long long)r->line, r->input_length, r->num_hash_ids);
    if (r->hash_ids == NULL)
        die("line %llu: no hash ids", (unsigned long long)r->line);
    if (!isfinite(r->timestamp_ms) || r->timestamp_ms < 0)
        die("line %llu: timestamp %g accepted", (unsigned long long)r->line,
            r->timestamp_ms);
}

/* Line level: the first line alone. */
static void fuzz_line(const char *buf, size_t size, rkv_trace_record *first,
                      int *first_ok)
{
    const char *nl = memchr(buf, '\n', size);
    size_t len = nl ? (size_t)(nl - buf) : size;
    uint64_t *ids = NULL;
    size_t ids_cap = 0;
    rkv_trace_record rec;
    rkv_status st = rkv_trace_parse_line_fmt(buf, len, NAME, 1,
                                             RKV_TRACE_FMT_AUTO, 0, &rec,
                                             &ids, &ids_cap);
    *first_ok = st == RKV_OK;
    {
        /* the Mooncake-only entry point agrees on Mooncake records */
        rkv_trace_record mc;
        uint64_t *ids2 = NULL;
        size_t cap2 = 0;
        rkv_status mst = rkv_trace_parse_line(buf, len, NAME, 1, &mc, &ids2,
                                              &cap2);
        if (st == RKV_OK && rec.format == RKV_TRACE_FMT_MOONCAKE &&
            (mst != RKV_OK || mc.input_length != rec.input_length ||
             mc.num_hash_ids != rec.num_hash_ids))
            die("parse_line and parse_line_fmt(auto) disagree on a Mooncake "
                "line");
        if (mst == RKV_OK)
            check_record(&mc);
        else
            check_failure(mst, 1);
        free(ids2);
    }
    if (st == RKV_OK) {
        if (rec.line != 1)
            die("parse_line reports line %llu for line 1",
                (unsigned long long)rec.line);
        check_record(&rec);
        *first = rec;
        first->hash_ids = NULL;
    } else {
        check_failure(st, 1);
    }
    free(ids);
}

/* A digest of what a reader produced: records and how it ended. */
typedef struct outcome {
    uint64_t digest;
    size_t records;
    rkv_status end;
    char msg[512];
    int format;       /* of the records (AUTO: none)                     */
} outcome;

static uint64_t mix(uint64_t h, uint64_t v)
{
    return rkv_splitmix64(h ^ v);
}

/* File level: every record; returns records read, *ended = 1 at the end.
 * fm: read through a FILE* instead of memory. */
static size_t fuzz_reader(const char *buf, size_t size, FILE *fm,
                          const rkv_trace_record *first, int first_ok,
                          int *ended, outcome *oc)
{
    rkv_trace_reader *r = NULL;
    rkv_status ost = fm ? rkv_trace_reader_open_file(fm, NAME, &r)
                        : rkv_trace_reader_open_memory(buf, size, NAME, &r);
    if (ost != RKV_OK)
        die("open failed");
    memset(oc, 0, sizeof *oc);
    size_t n = 0;
    uint64_t last_line = 0;
    int format = RKV_TRACE_FMT_AUTO;
    *ended = 0;
    for (;;) {
        rkv_trace_record rec;
        int eof = 0;
        rkv_status st = rkv_trace_reader_next(r, &rec, &eof);
        if (st != RKV_OK) {
            /* the failing line: one past the last record, or later (blank
             * lines are skipped); read it from the message */
            const char *m = rkv_last_error();
            size_t pre = strlen(NAME ":");
            if (strncmp(m, NAME ":", pre) != 0)
                die("reader message does not name the trace");
            unsigned long long line = strtoull(m + pre, NULL, 10);
            if (line <= last_line)
                die("failure at line %llu after a record at line %llu", line,
                    (unsigned long long)last_line);
            check_failure(st, line);
            oc->end = st;
            snprintf(oc->msg, sizeof oc->msg, "%s", m);
            char *msg = strdup(m);
            rkv_trace_record again;
            rkv_status st2 = rkv_trace_reader_next(r, &again, &eof);
            if (st2 != st || msg == NULL || strcmp(msg, rkv_last_error()) != 0)
                die("a failed reader did not repeat its failure");
            free(msg);
            break;
        }
        if (eof) {
            *ended = 1;
            int eof2 = 0;
            if (rkv_trace_reader_next(r, &rec, &eof2) != RKV_OK || !eof2)
                die("end of input not repeated");
            break;
        }
        check_record(&rec);
        if (format == RKV_TRACE_FMT_AUTO)
            format = rec.format;
        if (rec.format != format || rkv_trace_reader_format(r) != format)
            die("line %llu: format %d in a trace of format %d",
                (unsigned long long)rec.line, rec.format, format);
        if (rec.line <= last_line)
            die("line numbers not increasing: %llu after %llu",
                (unsigned long long)rec.line, (unsigned long long)last_line);
        last_line = rec.line;
        oc->digest = mix(oc->digest, rec.line);
        oc->digest = mix(oc->digest, rec.input_length);
        oc->digest = mix(oc->digest, rec.output_length);
        for (uint32_t i = 0; i < rec.num_hash_ids; i++)
            oc->digest = mix(oc->digest, rec.hash_ids[i]);
        if (rec.line == 1 && (!first_ok ||
                              rec.input_length != first->input_length ||
                              rec.output_length != first->output_length ||
                              rec.num_hash_ids != first->num_hash_ids ||
                              memcmp(&rec.timestamp_ms, &first->timestamp_ms,
                                     sizeof rec.timestamp_ms) != 0))
            die("reader and parse_line disagree on line 1");
        n++;
    }
    rkv_trace_reader_close(r);
    oc->records = n;
    oc->format = format;
    return n;
}

/* Workload level. */
static void fuzz_workload(const char *buf, size_t size, size_t records,
                          int ended, int format)
{
    rkv_trace_reader *r = NULL;
    if (rkv_trace_reader_open_memory(buf, size, NAME, &r) != RKV_OK)
        die("open_memory failed");
    rkv_workload wl;
    rkv_workload_init(&wl);
    rkv_status st = rkv_workload_load_trace(&wl, r, 0);
    rkv_trace_reader_close(r);
    if (ended && records == 0) {
        /* no record at all: refused, naming the trace */
        if (st != RKV_ERR_FORMAT ||
            strncmp(rkv_last_error(), NAME ": no requests",
                    strlen(NAME ": no requests")) != 0 || wl.num_reqs != 0)
            die("an empty trace must be refused as having no requests");
        rkv_workload_free(&wl);
        return;
    }
    if ((st == RKV_OK) != ended && st != RKV_ERR_NOMEM)
        die("workload load %s but the reader %s",
            st == RKV_OK ? "succeeded" : "failed",
            ended ? "reached the end" : "failed");
    if (st != RKV_OK) {
        if (wl.num_reqs != 0)
            die("a failed load left %zu requests", wl.num_reqs);
        rkv_workload_free(&wl);
        return;
    }
    if (wl.num_reqs != records)
        die("workload has %zu requests for %zu records", wl.num_reqs,
            records);
    if (rkv_workload_check(&wl) != RKV_OK)
        die("rkv_workload_check failed");
    uint64_t budget = EXPAND_CAP;
    for (size_t i = 0; i < wl.num_reqs; i++) {
        const rkv_wl_request *q = &wl.reqs[i];
        if (q->input_length > budget)
            break;
        budget -= q->input_length;
        int32_t *a = malloc((size_t)q->input_length * sizeof *a);
        int32_t *b = malloc((size_t)q->input_length * sizeof *b);
        if (a == NULL || b == NULL)
            die("out of memory");
        if (rkv_workload_prompt(&wl, i, a) != RKV_OK)
            die("prompt of request %zu", i);
        if (format == RKV_TRACE_FMT_MOONCAKE) {
            if (rkv_trace_expand(wl.seg_keys + q->seg_begin, q->num_segs,
                                 q->input_length, b) != RKV_OK)
                die("expand of request %zu", i);
        } else {
            /* Bailian: block j is the first 16 tokens of its expansion */
            uint32_t B = RKV_TRACE_BAILIAN_BLOCK_TOKENS;
            for (uint32_t t = 0; t < q->input_length; t++)
                b[t] = rkv_trace_block_token(wl.seg_keys[q->seg_begin + t / B],
                                             t % B);
        }
        for (uint32_t t = 0; t < q->input_length; t++) {
            if (a[t] < 0 || a[t] != b[t])
                die("request %zu token %u: %d vs %d", i, t, a[t], b[t]);
        }
        free(a);
        free(b);
    }
    rkv_workload_free(&wl);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a private, exact-size copy: reads past the end are ASan errors */
    char *buf = malloc(size ? size : 1);
    if (buf == NULL)
        return 0;
    memcpy(buf, data, size);
    rkv_trace_record first;
    int first_ok = 0;
    fuzz_line(buf, size, &first, &first_ok);
    int ended = 0;
    outcome om, of;
    size_t records = fuzz_reader(buf, size, NULL, &first, first_ok, &ended,
                                 &om);
    FILE *fm = size ? fmemopen(buf, size, "r") : NULL;
    if (fm != NULL) {
        int fended = 0;
        fuzz_reader(buf, size, fm, &first, first_ok, &fended, &of);
        fclose(fm);
        if (fended != ended || of.records != om.records ||
            of.digest != om.digest || of.end != om.end ||
            strcmp(of.msg, om.msg) != 0)
            die("FILE and memory readers differ: %zu vs %zu records, "
                "'%s' vs '%s'", of.records, om.records, of.msg, om.msg);
    }
    fuzz_workload(buf, size, records, ended, om.format);
    free(buf);
    return 0;
}
