/*
 * tests/test_retention_cli.c -- the retention side of the `radixkv`
 * command end to end: --evict-policy reaches the replay's trees,
 * --retention pins agentic contexts, Bailian-format traces and per-line
 * retention hints are read (errors with file and line).
 *
 * Runs the radixkv binary built next to this test (found through
 * /proc/self/exe); skipped when it is not there.
 */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "radixkv.h"
#include "tests/support/cli_run.h"

static void setup(void)
{
    rkv_cli_setup("rkv_ret_cli");
}

TestSuite(retcli, .init = setup, .fini = rkv_cli_cleanup, .timeout = 600);

static int run(const char *args, char **out, char **err)
{
    return rkv_cli_run(args, out, err);
}

/* The number after "key": in a JSON text (the first occurrence). */
static double json_num(const char *json, const char *key)
{
    char k[128];
    snprintf(k, sizeof k, "\"%s\":", key);
    const char *p = strstr(json, k);
    cr_assert_not_null(p, "%s missing in %s", k, json);
    return strtod(p + strlen(k), NULL);
}

Test(retcli, evict_policy_names_and_errors)
{
    char *out, *err;
    cr_assert_eq(run("replay --workload agentic --sessions 4 --order file "
                     "--evict-policy priority --json", &out, &err), 0, "%s", err);
    cr_assert_not_null(strstr(out, "\"eviction\":\"priority\""), "%s", out);
    free(out);
    free(err);
    cr_assert_eq(run("replay --evict-policy lfu", &out, &err), 2);
    cr_assert_not_null(strstr(err, "--evict-policy: unknown eviction policy "
                                   "'lfu' (expected lru, priority or learned)"), "%s", err);
    free(out);
    free(err);
    cr_assert_eq(run("sweep --evict-policy", &out, &err), 2);
    free(out);
    free(err);
}

/* Every policy the command accepts is named in --help's --evict-policy
 * paragraph (a policy cannot be offered hidden). */
Test(retcli, help_lists_every_evict_policy)
{
    char *out, *err;
    cr_assert_eq(run("--help", &out, &err), 0, "%s", err);
    const char *a = strstr(out, "--evict-policy NAME");
    cr_assert_not_null(a, "%s", out);
    const char *b = strstr(a, "\n  --");
    cr_assert_not_null(b);
    size_t len = (size_t)(b - a);
    for (int p = 0; rkv_evict_policy_name(p) != NULL; p++) {
        const char *name = rkv_evict_policy_name(p);
        int found = 0;
        for (const char *q = a; !found && (q = strstr(q, name)) && q < b; q++)
            found = 1;
        cr_expect(found, "%s not in --help's paragraph: %.*s", name,
                  (int)len, a);
    }
    free(out);
    free(err);
}

Test(retcli, retention_modes_report_traffic_and_pins)
{
    char *out, *err;
    cr_assert_eq(run("replay --workload agentic --sessions 16 --capacity-tokens "
                     "6e4 --retention ttl --pin-ttl-ms 5000 --pin-cap-pct 40 "
                     "--json", &out, &err), 0, "%s", err);
    cr_assert_not_null(strstr(out, "\"retention\":{\"mode\":\"ttl\",\"ttl_ms\":5000,"
                                   "\"pin_cap_pct\":40"), "%s", out);
    cr_assert_gt(json_num(out, "pins_made"), 0);
    double tool = json_num(strstr(out, "\"tool_traffic\""), "requests");
    double other = json_num(strstr(out, "\"other_traffic\""), "requests");
    double all = json_num(strstr(out, "\"capacity_blocks\""), "requests");
    cr_assert_eq(tool + other, all, "%g + %g != %g", tool, other, all);
    free(out);
    free(err);
    cr_assert_eq(run("replay --workload agentic --sessions 8 --retention "
                     "ttl-session", &out, &err), 0, "%s", err);
    cr_assert_not_null(strstr(out, "retention      ttl-session"), "%s", out);
    cr_assert_not_null(strstr(out, "    tool  "), "%s", out);
    free(out);
    free(err);
    static const char *const bad[] = {
        "replay --retention forever", "replay --pin-ttl-ms 0",
        "replay --pin-cap-pct 101", "replay --retention",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(run(bad[i], &out, &err), 2, "%s: %s", bad[i], err);
        free(out);
        free(err);
    }
}

/* With a host tier, device pressure lowers pins into it ("pins demoted");
 * --drop-pinned revokes them instead (issue 13). */
Test(retcli, drop_pinned_lowers_or_revokes)
{
    char *out, *err;
    const char *base = "replay --workload agentic --sessions 16 --capacity-tokens "
                       "6e4 --retention ttl --host-capacity-tokens 1e5";
    char args[512];
    snprintf(args, sizeof args, "%s --json", base);
    cr_assert_eq(run(args, &out, &err), 0, "%s", err);
    cr_assert_not_null(strstr(out, "\"drop_pinned\":false"), "%s", out);
    double demoted = json_num(out, "pins_demoted");
    double revoked = json_num(out, "pins_revoked");
    cr_assert_gt(demoted, 0, "%s", out);
    free(out);
    free(err);
    snprintf(args, sizeof args, "%s --drop-pinned --json", base);
    cr_assert_eq(run(args, &out, &err), 0, "%s", err);
    cr_assert_not_null(strstr(out, "\"drop_pinned\":true"), "%s", out);
    cr_assert_eq(json_num(out, "pins_demoted"), 0);
    cr_assert_gt(json_num(out, "pins_revoked"), revoked,
                 "pressure revokes what it lowered before");
    free(out);
    free(err);
    cr_assert_eq(run(base, &out, &err), 0, "%s", err);
    cr_assert_not_null(strstr(out, "    pins demoted "), "%s", out);
    free(out);
    free(err);
}

/* The fleet replay reports the pin counters too, summed over its
 * instances: pins demoted by default, revoked under --drop-pinned. */
Test(retcli, fleet_reports_pins_demoted)
{
    char *out, *err;
    const char *base = "replay --workload agentic --sessions 16 --capacity-tokens "
                       "3e4 --retention ttl --host-capacity-tokens 1e5 "
                       "--instances 2 --route round-robin";
    char args[512];
    snprintf(args, sizeof args, "%s --json", base);
    cr_assert_eq(run(args, &out, &err), 0, "%s", err);
    const char *r = strstr(out, "\"runs\":[");
    cr_assert_not_null(r, "%s", out);
    double demoted = json_num(r, "pins_demoted");
    cr_assert_gt(demoted, 0, "%s", out);
    cr_assert_gt(json_num(r, "pins_made"), 0, "%s", out);
    double revoked = json_num(r, "pins_revoked");
    free(out);
    free(err);
    snprintf(args, sizeof args, "%s --drop-pinned --json", base);
    cr_assert_eq(run(args, &out, &err), 0, "%s", err);
    r = strstr(out, "\"runs\":[");
    cr_assert_not_null(r, "%s", out);
    cr_assert_eq(json_num(r, "pins_demoted"), 0, "%s", out);
    cr_assert_gt(json_num(r, "pins_revoked"), revoked, "%s", out);
    free(out);
    free(err);
    cr_assert_eq(run(base, &out, &err), 0, "%s", err);
    const char *t = strstr(out, "pins per run, summed over instances");
    cr_assert_not_null(t, "%s", out);
    cr_assert_not_null(strstr(t, "demoted\n"), "%s", out);
    char row[64];
    snprintf(row, sizeof row, " %8.0f\n", demoted);
    cr_assert_not_null(strstr(t, row), "demoted %g in %s", demoted, out);
    free(out);
    free(err);
}

Test(retcli, bailian_trace_formats_and_errors)
{
    char *out, *err;
    const char *sample = RKV_SOURCE_DIR "/tests/data/bailian_sample.jsonl";
    char args[1024];
    snprintf(args, sizeof args, "replay '%s' --json --retention ttl-session",
             sample);
    cr_assert_eq(run(args, &out, &err), 0, "%s", err);
    cr_assert_not_null(strstr(out, "\"trace_format\":\"auto\""), "%s", out);
    cr_assert_eq(json_num(strstr(out, "\"capacity_blocks\""), "requests"), 14);
    cr_assert_gt(json_num(out, "pins_made"), 0);
    free(out);
    free(err);
    /* stated as Mooncake, its 16-token blocks do not fit: file and line */
    snprintf(args, sizeof args, "replay '%s' --trace-format mooncake", sample);
    cr_assert_eq(run(args, &out, &err), 1, "%s", err);
    cr_assert_not_null(strstr(err, "bailian_sample.jsonl:1: input_length 133 "
                                   "does not fit 9 hash_ids of 512 tokens"),
                       "%s", err);
    free(out);
    free(err);
    snprintf(args, sizeof args, "replay '%s' --block-tokens 8", sample);
    cr_assert_eq(run(args, &out, &err), 1, "%s", err);
    cr_assert_not_null(strstr(err, ":1: input_length 133 does not fit 9 "
                                   "hash_ids of 8 tokens"), "%s", err);
    free(out);
    free(err);
    static const char *const bad[] = {
        "replay --trace-format csv", "replay --block-tokens 0",
        "replay --block-tokens 513", "replay --workload agentic --block-tokens 16",
        "replay --workload fewshot --trace-format bailian",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(run(bad[i], &out, &err), 2, "%s: %s", bad[i], err);
        free(out);
        free(err);
    }
}

Test(retcli, trace_hints_pin_under_hints_only)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/hints.jsonl", rkv_cli_tmpdir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    /* three turns of one session, each extending the last; two pin (the
     * last ends the session: it waits for nothing) */
    fputs("{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 4, "
          "\"hash_ids\": [1, 2], \"ttl_ms\": 60000, \"session\": \"a\"}\n"
          "{\"timestamp\": 1000, \"input_length\": 1100, \"output_length\": 4, "
          "\"hash_ids\": [1, 2, 3], \"ttl_ms\": 60000, \"session\": \"a\", "
          "\"priority\": 90}\n"
          "{\"timestamp\": 2000, \"input_length\": 1600, \"output_length\": 4, "
          "\"hash_ids\": [1, 2, 3, 4], \"session\": \"a\", "
          "\"session_end\": true}\n", f);
    fclose(f);
    char *out, *err;
    char args[PATH_MAX + 128];
    snprintf(args, sizeof args, "replay '%s' --retention hints --json", path);
    cr_assert_eq(run(args, &out, &err), 0, "%s", err);
    cr_assert_eq(json_num(out, "pins_made"), 2, "%s", out);
    cr_assert_eq(json_num(out, "pins_released"), 2, "the session ended: %s", out);
    cr_assert_gt(json_num(out, "ended_pages"), 0, "%s", out);
    free(out);
    free(err);
    snprintf(args, sizeof args, "replay '%s' --json", path);
    cr_assert_eq(run(args, &out, &err), 0, "%s", err);
    cr_assert_eq(json_num(out, "pins_made"), 0, "none ignores hints: %s", out);
    free(out);
    free(err);
    /* file order applies retention too (on the lines' clock) */
    snprintf(args, sizeof args, "replay '%s' --retention hints --order file "
                                "--json", path);
    cr_assert_eq(run(args, &out, &err), 0, "%s", err);
    cr_assert_eq(json_num(out, "pins_made"), 2, "%s", out);
    free(out);
    free(err);
    cr_assert_eq(run("replay --session-signals tool", &out, &err), 2);
    cr_assert_not_null(strstr(err, "--session-signals: expected none, end, "
                                   "wait or both"), "%s", err);
    free(out);
    free(err);
}

Test(retcli, tool_share_sets_the_traffic_mix)
{
    char *out, *err;
    cr_assert_eq(run("replay --workload agentic --sessions 10 --tool-share 0 "
                     "--json", &out, &err), 0, "%s", err);
    cr_assert_not_null(strstr(out, "\"tool_share\":0,"), "%s", out);
    cr_assert_eq(json_num(strstr(out, "\"tool_traffic\""), "requests"), 0);
    cr_assert_gt(json_num(strstr(out, "\"other_traffic\""), "requests"), 0);
    free(out);
    free(err);
    cr_assert_eq(run("replay --workload agentic --sessions 10 --tool-share 1 "
                     "--json", &out, &err), 0, "%s", err);
    cr_assert_eq(json_num(strstr(out, "\"other_traffic\""), "requests"), 0);
    free(out);
    free(err);
    cr_assert_eq(run("replay --tool-share 0.5", &out, &err), 2);
    cr_assert_not_null(strstr(err, "--tool-share applies to --workload agentic"),
                       "%s", err);
    free(out);
    free(err);
    cr_assert_eq(run("replay --workload agentic --tool-share 1.5", &out, &err), 2);
    free(out);
    free(err);
}
