/*
 * tests/test_trace_bailian.c -- the Bailian trace format and the
 * per-line retention hints (sim/trace.h): the hand-written sample
 * (tests/data/bailian_sample.jsonl) is detected and read (seconds -> ms,
 * 16-token blocks, sessions from the chat chain), a stated format and
 * block size are obeyed, every bad line is refused with NAME:LINE, and
 * hints reach the workload's requests.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/trace.h"
#include "sim/workload.h"

#define SAMPLE RKV_SOURCE_DIR "/tests/data/bailian_sample.jsonl"

/* Loads buf as a workload with a stated format (-1: leave the reader's
 * default). */
static rkv_status load(const char *buf, int format, uint32_t block,
                       rkv_workload *wl)
{
    rkv_trace_reader *r = NULL;
    cr_assert_eq(rkv_trace_reader_open_memory(buf, strlen(buf), "b.jsonl", &r),
                 RKV_OK);
    if (format >= 0)
        cr_assert_eq(rkv_trace_reader_set_format(r, format, block), RKV_OK);
    rkv_workload_init(wl);
    rkv_status st = rkv_workload_load_trace(wl, r, 0);
    rkv_trace_reader_close(r);
    return st;
}

/* The first record of one line, with a stated format. */
static rkv_status one(const char *line, int format, uint32_t block,
                      rkv_trace_record *rec)
{
    static uint64_t *ids; /* test-only scratch */
    static size_t cap;
    return rkv_trace_parse_line_fmt(line, strlen(line), "b.jsonl", 7, format,
                                    block, rec, &ids, &cap);
}

Test(bailian, sample_is_detected_and_read)
{
    rkv_trace_reader *r = NULL;
    cr_assert_eq(rkv_trace_reader_open_path(SAMPLE, &r), RKV_OK, "%s",
                 rkv_last_error());
    cr_assert_eq(rkv_trace_reader_format(r), RKV_TRACE_FMT_AUTO);
    rkv_workload wl;
    rkv_workload_init(&wl);
    cr_assert_eq(rkv_workload_load_trace(&wl, r, 0), RKV_OK, "%s",
                 rkv_last_error());
    cr_assert_eq(rkv_trace_reader_format(r), RKV_TRACE_FMT_BAILIAN);
    cr_assert_eq(rkv_trace_reader_block_tokens(r), 16);
    rkv_trace_reader_close(r);
    cr_assert_eq(rkv_workload_check(&wl), RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(wl.num_reqs, 14);
    /* line 1: chat 106, a root, at 2.634 s */
    cr_assert_eq(wl.reqs[0].line, 1);
    cr_assert_float_eq(wl.reqs[0].arrival_ms, 2634.0, 1e-6);
    cr_assert_eq(wl.reqs[0].session, 106);
    cr_assert_eq(wl.reqs[0].num_segs, 9);
    cr_assert_eq(wl.seg_lens[wl.reqs[0].seg_begin], 16);
    cr_assert_eq(wl.seg_lens[wl.reqs[0].seg_begin + 8], 133 - 128);
    /* four roots, every later turn in one of their sessions, and a turn
     * shares its session's previous prompt */
    size_t roots = 0;
    for (size_t i = 0; i < wl.num_reqs; i++) {
        uint64_t s = wl.reqs[i].session;
        cr_assert(s == 106 || s == 108 || s == 115 || s == 118,
                  "request %zu in session %llu", i, (unsigned long long)s);
        roots += wl.reqs[i].session ==
                 (uint64_t)(i == 0 ? 106 : i == 1 ? 108 : i == 2 ? 115
                                               : i == 3 ? 118 : 0);
        cr_assert_eq(wl.reqs[i].hint_priority, -1);
        cr_assert_eq(wl.reqs[i].hint_ttl_ms, 0);
    }
    cr_assert_eq(roots, 4);
    rkv_workload_free(&wl);
}

Test(bailian, parent_chain_and_overrides)
{
    const char *buf =
        "{\"chat_id\": 5, \"parent_chat_id\": -1, \"timestamp\": 1.5, "
        "\"input_length\": 20, \"output_length\": 3, \"type\": \"text\", "
        "\"turn\": 1, \"hash_ids\": [1, 2]}\n"
        "{\"chat_id\": 9, \"parent_chat_id\": 5, \"timestamp\": 2, "
        "\"input_length\": 40, \"output_length\": 3, \"hash_ids\": [1, 2, 3]}\n"
        "{\"chat_id\": 12, \"parent_chat_id\": 9, \"timestamp\": 3, "
        "\"input_length\": 50, \"output_length\": 3, \"hash_ids\": [1, 2, 3, 4], "
        "\"priority\": 70, \"ttl_ms\": 9000}\n"
        "{\"chat_id\": 13, \"timestamp\": 4, \"input_length\": 1, "
        "\"output_length\": 0, \"hash_ids\": [7], \"session\": \"s-1\"}\n"
        "{\"chat_id\": 14, \"parent_chat_id\": 77, \"timestamp\": 5, "
        "\"input_length\": 1, \"output_length\": 0, \"hash_ids\": [8]}\n";
    rkv_workload wl;
    cr_assert_eq(load(buf, -1, 0, &wl), RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(wl.num_reqs, 5);
    cr_assert_eq(wl.reqs[0].session, 5);
    cr_assert_eq(wl.reqs[1].session, 5);
    cr_assert_eq(wl.reqs[2].session, 5, "a grandchild joins the root");
    cr_assert_eq(wl.reqs[2].hint_priority, 70);
    cr_assert_eq(wl.reqs[2].hint_ttl_ms, 9000);
    cr_assert_neq(wl.reqs[3].session, 13, "a session hint wins");
    cr_assert_neq(wl.reqs[3].session, RKV_WL_NO_SESSION);
    cr_assert_eq(wl.reqs[4].session, 77, "an unknown parent names the session");
    cr_assert_float_eq(wl.reqs[1].arrival_ms, 2000.0, 1e-9);
    rkv_workload_free(&wl);
    /* --block-tokens 32: ids of 32 tokens */
    const char *b32 = "{\"chat_id\": 1, \"timestamp\": 0, \"input_length\": 40, "
                      "\"output_length\": 1, \"hash_ids\": [1, 2]}\n";
    cr_assert_eq(load(b32, RKV_TRACE_FMT_BAILIAN, 16, &wl), RKV_ERR_FORMAT);
    cr_assert_not_null(strstr(rkv_last_error(), "b.jsonl:1: input_length 40 "
                                                "does not fit 2 hash_ids of 16"),
                       "%s", rkv_last_error());
    cr_assert_eq(load(b32, RKV_TRACE_FMT_BAILIAN, 32, &wl), RKV_OK);
    cr_assert_eq(wl.seg_lens[0], 32);
    cr_assert_eq(wl.seg_lens[1], 8);
    rkv_workload_free(&wl);
    /* a stated Mooncake format reads the same line as Mooncake: chat_id
     * skipped, the timestamp in ms, 512-token blocks */
    const char *m = "{\"chat_id\": 1, \"timestamp\": 7, \"input_length\": 600, "
                    "\"output_length\": 1, \"hash_ids\": [1, 2]}\n";
    cr_assert_eq(load(m, RKV_TRACE_FMT_MOONCAKE, 0, &wl), RKV_OK);
    cr_assert_float_eq(wl.reqs[0].arrival_ms, 7.0, 1e-9);
    cr_assert_eq(wl.reqs[0].session, RKV_WL_NO_SESSION);
    rkv_workload_free(&wl);
}

Test(bailian, bad_lines_name_file_and_line)
{
    static const struct {
        const char *line;
        const char *msg;
    } bad[] = {
        {"{\"chat_id\": 1, \"timestamp\": 0, \"input_length\": 20, "
         "\"output_length\": 1, \"hash_ids\": [1]}",
         "b.jsonl:7: input_length 20 does not fit 1 hash_ids of 16 tokens"},
        {"{\"chat_id\": -2, \"timestamp\": 0, \"input_length\": 1, "
         "\"output_length\": 1, \"hash_ids\": [1]}",
         "b.jsonl:7: chat_id out of range"},
        {"{\"chat_id\": 3, \"parent_chat_id\": -2, \"timestamp\": 0, "
         "\"input_length\": 1, \"output_length\": 1, \"hash_ids\": [1]}",
         "b.jsonl:7: parent_chat_id out of range"},
        {"{\"chat_id\": 3, \"parent_chat_id\": 3, \"timestamp\": 0, "
         "\"input_length\": 1, \"output_length\": 1, \"hash_ids\": [1]}",
         "b.jsonl:7: parent_chat_id equals chat_id"},
        {"{\"chat_id\": 3, \"type\": 4, \"timestamp\": 0, "
         "\"input_length\": 1, \"output_length\": 1, \"hash_ids\": [1]}",
         "b.jsonl:7: type: expected a string, got a number"},
        {"{\"chat_id\": 3, \"turn\": 1.5, \"timestamp\": 0, "
         "\"input_length\": 1, \"output_length\": 1, \"hash_ids\": [1]}",
         "b.jsonl:7: turn: expected an integer, got 1.5"},
        {"{\"chat_id\": 3, \"timestamp\": 2e12, \"input_length\": 1, "
         "\"output_length\": 1, \"hash_ids\": [1]}",
         "b.jsonl:7: timestamp out of range (Bailian timestamps are seconds"},
        {"{\"chat_id\": 3, \"chat_id\": 4, \"timestamp\": 0, "
         "\"input_length\": 1, \"output_length\": 1, \"hash_ids\": [1]}",
         "b.jsonl:7: duplicate field \"chat_id\""},
        {"{\"chat_id\": 3, \"timestamp\": 0, \"input_length\": 1, "
         "\"output_length\": 1, \"hash_ids\": [1], \"priority\": 101}",
         "b.jsonl:7: priority out of range (0..100)"},
        {"{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, "
         "\"hash_ids\": [1], \"ttl_ms\": 0}",
         "b.jsonl:7: ttl_ms is 0"},
        {"{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, "
         "\"hash_ids\": [1], \"ttl_ms\": 1099511627777}",
         "b.jsonl:7: ttl_ms out of range"},
        {"{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, "
         "\"hash_ids\": [1], \"session\": -1}",
         "b.jsonl:7: session out of range"},
        {"{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, "
         "\"hash_ids\": [1], \"session\": [1]}",
         "b.jsonl:7: session: expected an integer, got an array"},
        {"{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, "
         "\"hash_ids\": [1], \"priority\": 5, \"priority\": 6}",
         "b.jsonl:7: duplicate field \"priority\""},
        {"{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, "
         "\"hash_ids\": [1], \"session_end\": 1}",
         "b.jsonl:7: session_end is not true or false"},
        {"{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, "
         "\"hash_ids\": [1], \"session_end\": true, \"session_end\": true}",
         "b.jsonl:7: duplicate field \"session_end\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rkv_trace_record rec;
        cr_assert_eq(one(bad[i].line, RKV_TRACE_FMT_AUTO, 0, &rec),
                     RKV_ERR_FORMAT, "accepted: %s", bad[i].line);
        cr_assert(strncmp(rkv_last_error(), bad[i].msg, strlen(bad[i].msg)) == 0,
                  "%s\n  got: %s", bad[i].line, rkv_last_error());
    }
    /* a Bailian file whose later line is not Bailian: refused at its line */
    const char *mixed =
        "{\"chat_id\": 1, \"timestamp\": 0, \"input_length\": 1, "
        "\"output_length\": 1, \"hash_ids\": [1]}\n"
        "\n"
        "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, "
        "\"hash_ids\": [1]}\n";
    rkv_workload wl;
    cr_assert_eq(load(mixed, -1, 0, &wl), RKV_ERR_FORMAT);
    cr_assert_str_eq(rkv_last_error(),
                     "b.jsonl:3: missing field \"chat_id\" (Bailian format)");
    cr_assert_eq(wl.num_reqs, 0);
    /* the format is stated before the first line, with a valid value */
    rkv_trace_reader *r = NULL;
    cr_assert_eq(rkv_trace_reader_open_memory(mixed, strlen(mixed), "b", &r),
                 RKV_OK);
    cr_assert_eq(rkv_trace_reader_set_format(r, 3, 0), RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_trace_reader_set_format(r, RKV_TRACE_FMT_BAILIAN, 513),
                 RKV_ERR_INVALID_ARG);
    rkv_trace_record rec;
    int eof = 0;
    cr_assert_eq(rkv_trace_reader_next(r, &rec, &eof), RKV_OK);
    cr_assert_eq(rkv_trace_reader_set_format(r, RKV_TRACE_FMT_MOONCAKE, 0),
                 RKV_ERR_STATE);
    cr_assert_eq(rkv_trace_reader_format(r), RKV_TRACE_FMT_BAILIAN);
    rkv_trace_reader_close(r);
}

Test(bailian, mooncake_hints)
{
    const char *buf =
        "{\"timestamp\": 5, \"input_length\": 600, \"output_length\": 3, "
        "\"hash_ids\": [1, 2], \"priority\": 90, \"ttl_ms\": 20000, "
        "\"session\": \"agent-7\"}\n"
        "{\"timestamp\": 9, \"input_length\": 700, \"output_length\": 3, "
        "\"hash_ids\": [1, 3], \"session\": 7}\n"
        "{\"timestamp\": 11, \"input_length\": 700, \"output_length\": 3, "
        "\"hash_ids\": [1, 4], \"session\": \"agent-7\", \"priority\": 0}\n";
    rkv_workload wl;
    cr_assert_eq(load(buf, -1, 0, &wl), RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(wl.reqs[0].hint_priority, 90);
    cr_assert_eq(wl.reqs[0].hint_ttl_ms, 20000);
    cr_assert_eq(wl.reqs[1].session, 7);
    cr_assert_eq(wl.reqs[1].hint_priority, -1);
    cr_assert_eq(wl.reqs[1].hint_ttl_ms, 0);
    cr_assert_eq(wl.reqs[0].session, wl.reqs[2].session,
                 "equal strings, equal sessions");
    cr_assert_neq(wl.reqs[0].session, 7);
    cr_assert_eq(wl.reqs[2].hint_priority, 0);
    /* the plain Mooncake parser reads the hints too */
    rkv_trace_record rec;
    const char *l = "{\"timestamp\": 5, \"input_length\": 1, \"output_length\": "
                    "3, \"hash_ids\": [1], \"ttl_ms\": 5}";
    uint64_t *ids = NULL;
    size_t cap = 0;
    cr_assert_eq(rkv_trace_parse_line(l, strlen(l), "m", 1, &rec, &ids, &cap),
                 RKV_OK);
    cr_assert_eq(rec.ttl_ms, 5);
    cr_assert_eq(rec.format, RKV_TRACE_FMT_MOONCAKE);
    free(ids);
    rkv_workload_free(&wl);
}

/* priority_duration_ms (both formats): read with a priority, refused
 * without one or as 0 */
Test(bailian, priority_duration_hint)
{
    const char *buf =
        "{\"timestamp\": 5, \"input_length\": 600, \"output_length\": 3, "
        "\"hash_ids\": [1, 2], \"priority\": 90, "
        "\"priority_duration_ms\": 3000}\n"
        "{\"timestamp\": 9, \"input_length\": 700, \"output_length\": 3, "
        "\"hash_ids\": [1, 3], \"priority\": 80}\n";
    rkv_workload wl;
    cr_assert_eq(load(buf, -1, 0, &wl), RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(wl.reqs[0].hint_priority, 90);
    cr_assert_eq(wl.reqs[0].hint_prio_dur_ms, 3000);
    cr_assert_eq(wl.reqs[1].hint_prio_dur_ms, 0);
    rkv_workload_free(&wl);
    rkv_trace_record rec;
    cr_assert_eq(one("{\"chat_id\": 1, \"timestamp\": 0, \"input_length\": 4, "
                     "\"output_length\": 1, \"hash_ids\": [1], "
                     "\"priority\": 50, \"priority_duration_ms\": 7}",
                     RKV_TRACE_FMT_AUTO, 0, &rec), RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(rec.priority_duration_ms, 7);
    cr_assert_eq(one("{\"timestamp\": 0, \"input_length\": 4, "
                     "\"output_length\": 1, \"hash_ids\": [1], "
                     "\"priority_duration_ms\": 7}", RKV_TRACE_FMT_AUTO, 0, &rec),
                 RKV_ERR_FORMAT);
    cr_assert(strstr(rkv_last_error(), "without a priority") != NULL, "%s",
              rkv_last_error());
    cr_assert_eq(one("{\"timestamp\": 0, \"input_length\": 4, "
                     "\"output_length\": 1, \"hash_ids\": [1], "
                     "\"priority\": 5, \"priority_duration_ms\": 0}",
                     RKV_TRACE_FMT_AUTO, 0, &rec), RKV_ERR_FORMAT);
}

/* session_end (both formats): true marks a session's last request; it
 * needs a session (a line without one ends nothing) */
Test(bailian, session_end_marks_the_last_request)
{
    const char *t =
        "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, "
        "\"hash_ids\": [1], \"session\": 4, \"session_end\": false}\n"
        "{\"timestamp\": 1, \"input_length\": 1, \"output_length\": 1, "
        "\"hash_ids\": [1], \"session\": 4, \"session_end\": true}\n"
        "{\"timestamp\": 2, \"input_length\": 1, \"output_length\": 1, "
        "\"hash_ids\": [1], \"session_end\": true}\n";
    rkv_workload wl;
    cr_assert_eq(load(t, RKV_TRACE_FMT_AUTO, 0, &wl), RKV_OK, "%s",
                 rkv_last_error());
    cr_assert_eq(wl.num_reqs, 3);
    cr_assert_eq(wl.reqs[0].session_end, 0);
    cr_assert_eq(wl.reqs[1].session_end, 1);
    cr_assert_eq(wl.reqs[2].session_end, 0, "no session: nothing ends");
    rkv_workload_free(&wl);
    const char *b =
        "{\"chat_id\": 1, \"timestamp\": 0, \"input_length\": 1, "
        "\"output_length\": 1, \"hash_ids\": [1], \"turn\": 1, "
        "\"session_end\": true}\n";
    cr_assert_eq(load(b, RKV_TRACE_FMT_AUTO, 0, &wl), RKV_OK, "%s",
                 rkv_last_error());
    cr_assert_eq(wl.reqs[0].session_end, 1, "a Bailian chat is a session");
    rkv_workload_free(&wl);
}
