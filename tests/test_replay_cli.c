/*
 * tests/test_replay_cli.c -- the `radixkv` command end to end: exit codes,
 * error messages with line numbers, the --json contract, the sweep's SVG.
 *
 * Runs the radixkv binary built next to this test (same build directory,
 * found through /proc/self/exe); skipped when it is not there (e.g. only
 * this target was built).
 */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "radixkv.h"

static char exe[PATH_MAX];
static char tmpdir[] = "/tmp/rkv_cli_test_XXXXXX";

static void find_exe(void)
{
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 16);
    cr_assert_gt(n, 0);
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    cr_assert_not_null(slash);
    strcpy(slash + 1, "radixkv");
    if (access(exe, X_OK) != 0)
        cr_skip_test("radixkv binary not built next to the test (%s)", exe);
    cr_assert_not_null(mkdtemp(tmpdir));
}

static void cleanup(void)
{
    char cmd[PATH_MAX + 16];
    if (strcmp(tmpdir, "/tmp/rkv_cli_test_XXXXXX") != 0) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        cr_assert_eq(system(cmd), 0);
    }
}

TestSuite(cli, .init = find_exe, .fini = cleanup, .timeout = 600);

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    cr_assert_not_null(b);
    cr_assert_eq(fread(b, 1, (size_t)n, f), (size_t)n);
    b[n] = '\0';
    fclose(f);
    return b;
}

/* Runs `radixkv ARGS`; returns the exit status, stdout and stderr. */
static int run(const char *args, char **out, char **err)
{
    char cmd[4 * PATH_MAX];
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s/out' 2>'%s/err' </dev/null", exe,
             args, tmpdir, tmpdir);
    int st = system(cmd);
    cr_assert(WIFEXITED(st), "'%s' did not exit normally", cmd);
    char p[PATH_MAX + 8];
    snprintf(p, sizeof p, "%s/out", tmpdir);
    *out = slurp(p);
    snprintf(p, sizeof p, "%s/err", tmpdir);
    *err = slurp(p);
    return WEXITSTATUS(st);
}

static void write_file(const char *name, const char *text, char *path,
                       size_t cap)
{
    snprintf(path, cap, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

Test(cli, help_and_usage_errors)
{
    char *out, *err;
    cr_assert_eq(run("help", &out, &err), 0);
    cr_assert(strstr(out, "usage: radixkv replay") != NULL);
    cr_assert(strstr(out, "--capacity-tokens") != NULL);
    cr_assert(strstr(out, "roofline") != NULL, "help documents the cost model");
    free(out);
    free(err);
    cr_assert_eq(run("--help", &out, &err), 0);
    cr_assert(strstr(out, "usage:") != NULL);
    free(out);
    free(err);

    static const char *const bad[] = {
        "", "frobnicate", "replay --bogus", "replay --page-size", "replay --page-size 0",
        "replay --page-size x", "replay --order random", "replay --eviction lfu",
        "replay --policy nope", "replay --capacity-tokens -5",
        "replay --capacity-tokens 1.5", "replay --json=1x --bogus",
        "replay a.jsonl b.jsonl", "replay --workload agentic x.jsonl",
        "sweep --capacities ''", "replay --capacities 1e6", "replay --mfu 2",
        "replay --page-size 4097", "sweep --capacity-tokens 1e6",
        "replay --model-layers=0", "replay --page-size 0x10",
        "replay --page-size ' 16'", "replay --page-size 16x", "replay --seed +1",
        "replay --mfu 0x1p-1", "replay --mfu inf", "sweep --capacities 1e5,,1e6",
        "sweep --capacities ,1e6", "sweep --policies lpm,", "replay --svg x.svg",
        "sweep --policy lpm", "replya", "replay --capasity-tokens 1e6",
        "replay --json=1", "help frobnicate", "--version extra",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(run(bad[i], &out, &err), 2, "'radixkv %s' should be a usage "
                     "error; stderr: %s", bad[i], err);
        cr_assert(strncmp(err, "radixkv: ", 9) == 0, "%s", err);
        cr_assert(strstr(err, "radixkv help") != NULL ||
                      strstr(err, "--help'") != NULL, "%s", err);
        cr_assert_str_empty(out);
        free(out);
        free(err);
    }
    /* a flag given as --flag=value is named without its value */
    cr_assert_eq(run("replay --model-layers=0", &out, &err), 2);
    cr_assert(strstr(err, "radixkv: --model-layers: ") != NULL, "%s", err);
    free(out);
    free(err);
}

Test(cli, bad_trace_lines_name_file_and_line)
{
    static const struct {
        const char *text;
        const char *needle;
    } cases[] = {
        {"{\"timestamp\":0,\"input_length\":600,\"output_length\":5,\"hash_ids\":[1,2]}\n"
         "{\"timestamp\":1,\"input_length\":600,\"output_length\":5,\"hash_ids\":[1,2]}\n"
         "{\"timestamp\":2,\"input_length\":-600,\"output_length\":5,\"hash_ids\":[1,2]}\n",
         ":3: negative input_length"},
        {"{\"timestamp\":0,\"input_length\":600,\"output_length\":5,\"hash_ids\":[1,2]}\n"
         "{\"timestamp\":1,\"input_length\":600,\"output_length\":5}\n",
         ":2: missing field \"hash_ids\""},
        {"{\"timestamp\":0,\"input_length\":600,\"output_length\":5,\"hash_ids\":[1,2]\n",
         ":1: malformed JSON"},
        {"\n\n{\"timestamp\":0,\"input_length\":600,\"output_length\":\"5\",\"hash_ids\":[1,2]}\n",
         ":3: output_length: expected an integer"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[PATH_MAX], args[2 * PATH_MAX], want[2 * PATH_MAX];
        write_file("bad.jsonl", cases[i].text, path, sizeof path);
        for (int order = 0; order < 2; order++) {
            snprintf(args, sizeof args, "replay '%s' --order %s", path,
                     order ? "sched" : "file");
            char *out, *err;
            cr_assert_eq(run(args, &out, &err), 1, "case %zu: %s", i, err);
            snprintf(want, sizeof want, "radixkv: %s%s", path, cases[i].needle);
            cr_assert(strncmp(err, want, strlen(want)) == 0,
                      "case %zu: stderr '%s', expected '%s...'", i, err, want);
            cr_assert_str_empty(out);
            free(out);
            free(err);
        }
    }
    char *out, *err;
    cr_assert_eq(run("replay /nonexistent/dir/trace.jsonl", &out, &err), 1);
    cr_assert(strstr(err, "radixkv: /nonexistent/dir/trace.jsonl: No such file") == err,
              "%s", err);
    free(out);
    free(err);
}

static void assert_json_object(const char *out)
{
    size_t n = strlen(out);
    cr_assert_gt(n, 2);
    cr_assert_eq(out[0], '{', "%s", out);
    cr_assert_eq(out[n - 1], '\n');
    cr_assert_eq(out[n - 2], '}');
    cr_assert(strchr(out, '\n') == out + n - 1, "exactly one line: %s", out);
}

Test(cli, json_contract)
{
    char *out, *err;
    cr_assert_eq(run("replay --order file --json --limit 300 --page-size 16 "
                     "--capacity-tokens 2e5", &out, &err), 0, "%s", err);
    assert_json_object(out);
    static const char *const file_keys[] = {"\"requests\":300", "\"prompt_tokens\":",
                                            "\"hit_tokens\":", "\"hit_rate\":0.",
                                            "\"capacity_tokens\":200000"};
    for (size_t i = 0; i < sizeof file_keys / sizeof file_keys[0]; i++)
        cr_assert(strstr(out, file_keys[i]) != NULL, "%s missing in %s",
                  file_keys[i], out);
    free(out);
    free(err);

    cr_assert_eq(run("replay --json --limit 150 --capacity-tokens 1e6", &out, &err), 0,
                 "%s", err);
    assert_json_object(out);
    static const char *const keys[] = {
        "\"requests\":150", "\"prompt_tokens\":", "\"hit_tokens\":", "\"hit_rate\":",
        "\"ttft_ms\":{\"p50\":", "\"p90\":", "\"p99\":", "\"latency_ms\":{\"p50\":",
        "\"preemptions\":", "\"peak_blocks\":", "\"sched_us_per_step\":",
        "\"order\":\"sched\""};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        cr_assert(strstr(out, keys[i]) != NULL, "%s missing in %s", keys[i], out);
    free(out);
    free(err);

    /* Synthetic workloads run too, and a human report is the default. */
    cr_assert_eq(run("replay --workload agentic --sessions 6 --seed 3", &out, &err),
                 0, "%s", err);
    cr_assert(strstr(out, "hit rate") != NULL && strstr(out, "TTFT") != NULL,
              "%s", out);
    free(out);
    free(err);
    cr_assert_eq(run("replay --workload fewshot --requests 100 --order file", &out,
                     &err), 0, "%s", err);
    cr_assert(strstr(out, "hit rate") != NULL, "%s", out);
    free(out);
    free(err);
}

Test(cli, sweep_writes_table_and_svg)
{
    char args[2 * PATH_MAX], svg[PATH_MAX + 16];
    snprintf(svg, sizeof svg, "%s/s.svg", tmpdir);
    snprintf(args, sizeof args, "sweep --limit 200 --capacities 2e5,1e6,unbounded "
             "--policies fcfs,lpm --svg '%s'", svg);
    char *out, *err;
    cr_assert_eq(run(args, &out, &err), 0, "%s", err);
    cr_assert(strstr(out, "file hit%") != NULL, "%s", out);
    cr_assert(strstr(out, "lpm ttft50") != NULL, "%s", out);
    cr_assert(strstr(out, "unbounded") != NULL, "%s", out);
    char *s = slurp(svg);
    cr_assert(strstr(s, "<svg") != NULL && strstr(s, "</svg>") != NULL);
    cr_assert(strstr(s, "polyline") != NULL, "lines are drawn");
    cr_assert(strstr(s, "sched lpm") != NULL, "legend names the series");
    cr_assert(strstr(s, "hit rate") != NULL, "axis label");
    free(s);
    free(out);
    free(err);
}

/* Issue 10 item 6: an endless line ends with a clear error naming
 * FILE:LINE (it used to grow until killed). */
Test(cli, dev_zero_is_refused_with_file_and_line)
{
    char *out, *err;
    cr_assert_eq(run("replay /dev/zero --no-progress", &out, &err), 1, "%s", err);
    cr_assert(strstr(err, "radixkv: /dev/zero:1: line longer than 1048576 bytes") ==
                  err, "%s", err);
    cr_assert_str_empty(out);
    free(out);
    free(err);
}

/* Issue 10 item 8: an empty or blank-only file is named; a long path is
 * not cut in FILE:LINE messages. */
Test(cli, empty_file_and_long_path_are_named)
{
    char path[PATH_MAX], args[2 * PATH_MAX], want[2 * PATH_MAX];
    char *out, *err;
    write_file("blank.jsonl", "\n   \n", path, sizeof path);
    snprintf(args, sizeof args, "replay '%s'", path);
    cr_assert_eq(run(args, &out, &err), 1, "%s", err);
    snprintf(want, sizeof want, "radixkv: %s: no requests", path);
    cr_assert(strncmp(err, want, strlen(want)) == 0, "%s", err);
    free(out);
    free(err);

    /* two directories of 200 bytes (a name is at most 255) */
    char dir[500];
    memset(dir, 'd', 200);
    dir[200] = '\0';
    snprintf(path, sizeof path, "%s/%s", tmpdir, dir);
    cr_assert_eq(mkdir(path, 0700), 0);
    snprintf(path + strlen(path), sizeof path - strlen(path), "/%s", dir);
    cr_assert_eq(mkdir(path, 0700), 0);
    snprintf(dir, sizeof dir, "%s/bad.jsonl", path + strlen(tmpdir) + 1);
    write_file(dir, "{\"timestamp\":0}\n", path, sizeof path);
    cr_assert_gt(strlen(path), 300);
    snprintf(args, sizeof args, "replay '%s'", path);
    cr_assert_eq(run(args, &out, &err), 1, "%s", err);
    snprintf(want, sizeof want, "radixkv: %s:1: missing field", path);
    cr_assert(strncmp(err, want, strlen(want)) == 0, "%s", err);
    free(out);
    free(err);
}

/* Issue 15 item 7: getopt_long parsing -- version, '--', per-subcommand
 * help, suggestions, options of the other subcommand named as such. */
Test(cli, parsing_version_help_suggestions)
{
    char *out, *err;
    char want[64];
    snprintf(want, sizeof want, "radixkv %s\n", rkv_version());
    cr_assert_eq(run("--version", &out, &err), 0, "%s", err);
    cr_assert_str_eq(out, want);
    free(out);
    free(err);
    cr_assert_eq(run("replay --version", &out, &err), 0, "%s", err);
    cr_assert_str_eq(out, want);
    free(out);
    free(err);

    cr_assert_eq(run("replay --help", &out, &err), 0);
    cr_assert(strstr(out, "--capacity-tokens") && !strstr(out, "--capacities"),
              "replay's help is replay's: %s", out);
    free(out);
    free(err);
    cr_assert_eq(run("sweep -h", &out, &err), 0);
    cr_assert(strstr(out, "--capacities") && !strstr(out, "--capacity-tokens"),
              "sweep's help is sweep's: %s", out);
    free(out);
    free(err);
    cr_assert_eq(run("help sweep", &out, &err), 0);
    cr_assert(strstr(out, "--svg") != NULL);
    free(out);
    free(err);

    static const struct {
        const char *args, *needle;
    } cases[] = {
        {"replay --capasity-tokens 1e6", "did you mean '--capacity-tokens'?"},
        {"replay --polcy lpm", "did you mean '--policy'?"},
        {"replya", "did you mean 'replay'?"},
        {"replay --capacities 1e6", "--capacities is an option of 'sweep', not of 'replay'"},
        {"sweep --svg", "--svg needs a value"},
        {"replay --svg a.svg", "--svg is an option of 'sweep'"},
        {"sweep --capacity-tokens 1e6", "--capacity-tokens is an option of 'replay'"},
        {"sweep --capacities 1e5,,1e6", "--capacities: empty item 2"},
        {"replay --page-size 0x10", "--page-size: expected a whole number"},
        {"replay --time-scale ' 2'", "--time-scale: expected a number"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_assert_eq(run(cases[i].args, &out, &err), 2, "%s: %s", cases[i].args, err);
        cr_assert(strstr(err, cases[i].needle) != NULL, "%s: %s", cases[i].args, err);
        free(out);
        free(err);
    }

    /* '--' ends the options: a trace named like an option is a file. */
    char path[PATH_MAX], args[2 * PATH_MAX];
    write_file("-odd.jsonl",
               "{\"timestamp\":0,\"input_length\":600,\"output_length\":5,\"hash_ids\":[1,2]}\n",
               path, sizeof path);
    snprintf(args, sizeof args, "replay --order file --json -- '%s'", path);
    cr_assert_eq(run(args, &out, &err), 0, "%s", err);
    cr_assert(strstr(out, "\"requests\":1") != NULL, "%s", out);
    free(out);
    free(err);
    snprintf(args, sizeof args, "replay --order file -- -odd.jsonl");
    cr_assert_eq(run(args, &out, &err), 1, "a relative name from another dir");
    cr_assert(strstr(err, "-odd.jsonl: No such file") != NULL, "%s", err);
    free(out);
    free(err);
}
