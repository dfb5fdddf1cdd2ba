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
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "radixkv.h"
#include "tests/support/cli_run.h"

static void setup(void)
{
    rkv_cli_setup("rkv_cli_test");
}

TestSuite(cli, .init = setup, .fini = rkv_cli_cleanup, .timeout = 600);

static int run(const char *args, char **out, char **err)
{
    return rkv_cli_run(args, out, err);
}

/* Runs 'sweep OPTS --svg TMPDIR/NAME', which must succeed; the plot's path
 * goes to svg, the report to *out and *err. */
static void sweep_svg(const char *name, const char *opts, char *svg,
                      size_t cap, char **out, char **err)
{
    char args[2 * PATH_MAX];
    snprintf(svg, cap, "%s/%s", rkv_cli_tmpdir, name);
    snprintf(args, sizeof args, "sweep %s --svg '%s'", opts, svg);
    cr_assert_eq(run(args, out, err), 0, "%s", *err);
}

static void write_file(const char *name, const char *text, char *path,
                       size_t cap)
{
    snprintf(path, cap, "%s/%s", rkv_cli_tmpdir, name);
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
    char svg[PATH_MAX + 16];
    char *out, *err;
    sweep_svg("s.svg", "--limit 200 --capacities 2e5,1e6,unbounded "
              "--policies fcfs,lpm", svg, sizeof svg, &out, &err);
    cr_assert(strstr(out, "file hit%") != NULL, "%s", out);
    cr_assert(strstr(out, "lpm ttft50") != NULL, "%s", out);
    cr_assert(strstr(out, "unbounded") != NULL, "%s", out);
    char *s = rkv_cli_slurp(svg);
    cr_assert(strstr(s, "<svg") != NULL && strstr(s, "</svg>") != NULL);
    cr_assert(strstr(s, "polyline") != NULL, "lines are drawn");
    cr_assert(strstr(s, "sched lpm") != NULL, "legend names the series");
    cr_assert(strstr(s, "hit rate") != NULL, "axis label");
    free(s);
    free(out);
    free(err);
}

/* Issue 12: a host-tier sweep runs a fleet per point with --instances /
 * --route (it was refused): one column per route x instance count in the
 * table, the JSON and the plot. */
Test(cli, host_sweep_with_fleet)
{
    char args[2 * PATH_MAX], svg[PATH_MAX + 16];
    char *out, *err;
    sweep_svg("hf.svg", "--limit 300 --instances 2 --route kv,round-robin "
              "--host-capacities 1e5,1e6", svg, sizeof svg, &out, &err);
    cr_assert(strstr(out, "fleet replays") != NULL, "%s", out);
    cr_assert(strstr(out, "kv x2 hit%") != NULL, "%s", out);
    cr_assert(strstr(out, "round-robin x2 ttft99") != NULL, "%s", out);
    cr_assert(strstr(out, "1000000") != NULL, "%s", out);
    char *s = rkv_cli_slurp(svg);
    cr_assert(strstr(s, "sched kv x2") != NULL, "legend names the fleet");
    cr_assert(strstr(s, "round-robin x2 p99") != NULL);
    cr_assert(strstr(s, "host tier capacity") != NULL, "x axis");
    free(s);
    free(out);
    free(err);
    snprintf(args, sizeof args, "sweep --limit 300 --instances 2 --route "
             "kv,round-robin --host-capacities 1e5,1e6 --json");
    cr_assert_eq(run(args, &out, &err), 0, "%s", err);
    cr_assert(strstr(out, "\"host_capacity_tokens\":1000000") != NULL, "%s",
              out);
    cr_assert(strstr(out, "\"kv x2\":{\"instances\":2,\"route\":\"kv\"") !=
                  NULL, "%s", out);
    cr_assert(strstr(out, "\"round-robin x2\":{\"instances\":2") != NULL,
              "%s", out);
    cr_assert(strstr(out, "\"file\":null") != NULL, "sched only: %s", out);
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
    snprintf(path, sizeof path, "%s/%s", rkv_cli_tmpdir, dir);
    cr_assert_eq(mkdir(path, 0700), 0);
    snprintf(path + strlen(path), sizeof path - strlen(path), "/%s", dir);
    cr_assert_eq(mkdir(path, 0700), 0);
    snprintf(dir, sizeof dir, "%s/bad.jsonl", path + strlen(rkv_cli_tmpdir) + 1);
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

/* Runs `radixkv ARGS` with stdout redirected as REDIR (a shell
 * redirection); returns the exit status and stderr. */
static int run_redir(const char *args, const char *redir, char **err)
{
    char cmd[4 * PATH_MAX];
    snprintf(cmd, sizeof cmd, "'%s' %s %s 2>'%s/err' </dev/null", rkv_cli_exe, args,
             redir, rkv_cli_tmpdir);
    int st = system(cmd);
    cr_assert(WIFEXITED(st), "'%s' did not exit normally", cmd);
    char p[PATH_MAX + 8];
    snprintf(p, sizeof p, "%s/err", rkv_cli_tmpdir);
    *err = rkv_cli_slurp(p);
    return WEXITSTATUS(st);
}

/* Runs it with stdout a pipe whose reading end is already closed, SIGPIPE
 * at its default (as from a shell): the write must fail with EPIPE and be
 * reported, not kill the process silently. */
static int run_broken_pipe(const char *args, char **err)
{
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    close(fds[0]);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        signal(SIGPIPE, SIG_DFL);
        dup2(fds[1], 1);
        close(fds[1]);
        char cmd[4 * PATH_MAX];
        snprintf(cmd, sizeof cmd, "exec '%s' %s 2>'%s/err' </dev/null", rkv_cli_exe, args,
                 rkv_cli_tmpdir);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st), "killed by signal %d", WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    char p[PATH_MAX + 8];
    snprintf(p, sizeof p, "%s/err", rkv_cli_tmpdir);
    *err = rkv_cli_slurp(p);
    return WEXITSTATUS(st);
}

/* Issue 15 item 8: a failed write to stdout is an error, for every
 * subcommand. */
Test(cli, failed_stdout_writes_are_errors)
{
    char args[3][2 * PATH_MAX];
    const char *cmds[9] = {"help", "--version", "sweep --help",
                           "replay --order file --limit 50",
                           "replay --limit 30 --json --capacity-tokens 1e6"};
    snprintf(args[0], sizeof args[0],
             "sweep --limit 30 --order file --capacities 1e5 --svg '%s/s.svg'", rkv_cli_tmpdir);
    snprintf(args[1], sizeof args[1],
             "sweep --limit 30 --order file --capacities 1e5 --json --svg '%s/s.svg'",
             rkv_cli_tmpdir);
    cmds[5] = args[0];
    cmds[6] = args[1];
    static const char *const redirs[] = {">/dev/full", ">&-"};
    for (size_t c = 0; c < 7; c++) {
        for (size_t r = 0; r < 2; r++) {
            char *err;
            cr_assert_eq(run_redir(cmds[c], redirs[r], &err), 1, "%s %s: %s",
                         cmds[c], redirs[r], err);
            cr_assert(strstr(err, "radixkv: writing to standard output failed") != NULL,
                      "%s %s: %s", cmds[c], redirs[r], err);
            free(err);
        }
        char *err;
        cr_assert_eq(run_broken_pipe(cmds[c], &err), 1, "%s: %s", cmds[c], err);
        cr_assert(strstr(err, "writing to standard output failed: Broken pipe") != NULL,
                  "%s: %s", cmds[c], err);
        free(err);
    }
}

/* Issue 15 item 8: --json records the inputs and the version, null where
 * there is no data; a run that refused every request fails and says so. */
Test(cli, json_inputs_nulls_and_all_refused)
{
    char *out, *err;
    cr_assert_eq(run("replay --json --limit 40 --capacity-tokens 1e6 --seed 9", &out, &err),
                 0, "%s", err);
    char want[64];
    snprintf(want, sizeof want, "\"version\":\"%s\"", rkv_version());
    static const char *const keys[] = {
        "\"options\":{\"trace\":\"<embedded>\"", "\"workload\":\"trace\"",
        "\"seed\":null", "\"limit\":40", "\"capacity_tokens\":1000000",
        "\"policy\":\"lpm\"", "\"page_size\":16", "\"max_batch_tokens\":8192",
        "\"max_running\":", "\"dedup_min_tokens\":", "\"max_wait_ms\":",
        "\"time_scale\":", "\"time_scale_auto\":", "\"check\":0",
        "\"model_layers\":32", "\"gpu_tflops\":989", "\"mbu\":0.8",
        "\"step_overhead_ms\":", "\"cache_alone\":{", "\"regime\":"};
    cr_assert(strstr(out, want) != NULL, "%s", out);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        cr_assert(strstr(out, keys[i]) != NULL, "%s missing in %s", keys[i], out);
    free(out);
    free(err);

    char path[PATH_MAX], args[2 * PATH_MAX];
    write_file("big.jsonl",
               "{\"timestamp\":0,\"input_length\":600,\"output_length\":500,\"hash_ids\":[1,2]}\n"
               "{\"timestamp\":5,\"input_length\":900,\"output_length\":500,\"hash_ids\":[3,4]}\n",
               path, sizeof path);
    snprintf(args, sizeof args, "replay '%s' --json --capacity-tokens 1000", path);
    cr_assert_eq(run(args, &out, &err), 1, "%s", err);
    cr_assert(strstr(err, "radixkv: every request (2) was refused") == err, "%s", err);
    static const char *const nulls[] = {"\"hit_rate\":null", "\"ttft_ms\":null",
                                        "\"latency_ms\":null", "\"throughput\":null",
                                        "\"rejected_requests\":2", "\"requests\":0"};
    for (size_t i = 0; i < sizeof nulls / sizeof nulls[0]; i++)
        cr_assert(strstr(out, nulls[i]) != NULL, "%s missing in %s", nulls[i], out);
    free(out);
    free(err);
    snprintf(args, sizeof args, "replay '%s' --capacity-tokens 1000", path);
    cr_assert_eq(run(args, &out, &err), 1, "%s", err);
    cr_assert(strstr(out, "rejected       2 requests") != NULL, "%s", out);
    cr_assert(strstr(err, "every request (2) was refused") != NULL, "%s", err);
    free(out);
    free(err);
}

static void assert_utf8(const char *s, const char *what)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c < 0x80 ? 1 : (c >= 0xc2 && c <= 0xdf) ? 2
                 : (c >= 0xe0 && c <= 0xef) ? 3 : (c >= 0xf0 && c <= 0xf4) ? 4 : 0;
        cr_assert_gt(k, 0, "%s: invalid UTF-8 byte 0x%02x at %zu", what, c, i);
        for (size_t j = 1; j < k; j++)
            cr_assert(i + j < n && ((unsigned char)s[i + j] & 0xc0) == 0x80,
                      "%s: invalid UTF-8 at %zu", what, i);
        i += k;
    }
}

/* Issue 15 item 8: a name that is not UTF-8 (and holds JSON/XML
 * specials) is escaped in the JSON and in the SVG. */
Test(cli, names_not_utf8_are_escaped)
{
    char path[PATH_MAX], args[3 * PATH_MAX], svg[PATH_MAX + 16];
    write_file("n\xff\xfe<&\"q.jsonl",
               "{\"timestamp\":0,\"input_length\":600,\"output_length\":5,\"hash_ids\":[1,2]}\n",
               path, sizeof path);
    char *out, *err;
    snprintf(args, sizeof args, "replay --order file --json '%s'", path);
    cr_assert_eq(run(args, &out, &err), 0, "%s", err);
    assert_utf8(out, "json");
    cr_assert(strstr(out, "n\\ufffd\\ufffd<&\\\"q.jsonl") != NULL, "%s", out);
    free(out);
    free(err);
    snprintf(svg, sizeof svg, "%s/n.svg", rkv_cli_tmpdir);
    snprintf(args, sizeof args, "sweep --order file --capacities 1e5 --svg '%s' '%s'",
             svg, path);
    cr_assert_eq(run(args, &out, &err), 0, "%s", err);
    free(out);
    free(err);
    char *s = rkv_cli_slurp(svg);
    assert_utf8(s, "svg");
    cr_assert(strstr(s, "n\xef\xbf\xbd\xef\xbf\xbd&lt;&amp;&quot;q.jsonl") != NULL, "%s", s);
    free(s);
}

/* Issue 15 item 9: the SVG path is checked before the work; the report
 * says where the plot went; capacities beyond the GPU are marked. */
Test(cli, sweep_svg_checked_early_and_marks)
{
    char *out, *err;
    cr_assert_eq(run("sweep --limit 100 --svg /nonexistent/dir/s.svg", &out, &err), 1);
    cr_assert(strstr(err, "radixkv: /nonexistent/dir/s.svg: cannot write the plot "
                          "there") == err, "%s", err);
    cr_assert_str_empty(out);
    free(out);
    free(err);

    char args[2 * PATH_MAX], svg[PATH_MAX + 16], want[PATH_MAX + 64];
    snprintf(args, sizeof args, "sweep --limit 100 --svg '%s'", rkv_cli_tmpdir);
    cr_assert_eq(run(args, &out, &err), 1);
    cr_assert(strstr(err, "cannot write the plot there: it names a directory") != NULL,
              "%s", err);
    cr_assert_str_empty(out);
    free(out);
    free(err);
    sweep_svg("m.svg", "--limit 60 --order file --capacities 1e5,1e6,unbounded",
              svg, sizeof svg, &out, &err);
    char *real = realpath(svg, NULL);
    cr_assert_not_null(real);
    snprintf(want, sizeof want, "plot written to %s\n", real);
    cr_assert(strstr(out, want) != NULL, "%s", out);
    cr_assert(strstr(out, " 100000 ") != NULL, "%s", out);
    cr_assert(strstr(out, "1000000*") != NULL, "%s", out);
    cr_assert(strstr(out, "unbounded*") != NULL, "%s", out);
    cr_assert(strstr(out, "* beyond the simulated GPU's memory") != NULL, "%s", out);
    char *s = rkv_cli_slurp(svg);
    cr_assert(strstr(s, "GPU memory") != NULL, "the plot marks the GPU's capacity");
    free(s);
    free(out);
    free(err);

    snprintf(args, sizeof args, "sweep --limit 60 --order file --capacities "
             "1e5,1e6 --json --svg '%s'", svg);
    cr_assert_eq(run(args, &out, &err), 0, "%s", err);
    snprintf(want, sizeof want, "\"svg\":\"%s\"", real);
    cr_assert(strstr(out, want) != NULL, "%s", out);
    cr_assert(strstr(out, "\"capacity_tokens\":100000,\"unbounded\":false,"
                          "\"beyond_gpu_memory\":false") != NULL, "%s", out);
    cr_assert(strstr(out, "\"capacity_tokens\":1000000,\"unbounded\":false,"
                          "\"beyond_gpu_memory\":true") != NULL, "%s", out);
    free(real);
    free(out);
    free(err);
}

/* Issue 15 item 10: 'replay -' reads standard input (gzip too, when built
 * with zlib). */
Test(cli, stdin_trace)
{
    char path[PATH_MAX], cmd[4 * PATH_MAX];
    write_file("in.jsonl",
               "{\"timestamp\":0,\"input_length\":600,\"output_length\":5,\"hash_ids\":[1,2]}\n"
               "{\"timestamp\":1,\"input_length\":600,\"output_length\":5,\"hash_ids\":[1,2]}\n",
               path, sizeof path);
    snprintf(cmd, sizeof cmd, "'%s' replay - --order file --json <'%s' >'%s/out'", rkv_cli_exe,
             path, rkv_cli_tmpdir);
    cr_assert_eq(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s/out", rkv_cli_tmpdir);
    char *out = rkv_cli_slurp(cmd);
    cr_assert(strstr(out, "\"workload\":\"<stdin>\"") != NULL, "%s", out);
    cr_assert(strstr(out, "\"requests\":2") != NULL, "%s", out);
    cr_assert(strstr(out, "\"hit_tokens\":592") != NULL, "%s", out);
    free(out);
    if (system("command -v gzip >/dev/null") != 0)
        return;
    snprintf(cmd, sizeof cmd, "gzip -c '%s' | '%s' replay - --order file --json "
             ">'%s/out' 2>'%s/err'", path, rkv_cli_exe, rkv_cli_tmpdir, rkv_cli_tmpdir);
    int st = system(cmd);
    snprintf(cmd, sizeof cmd, "%s/out", rkv_cli_tmpdir);
    out = rkv_cli_slurp(cmd);
    snprintf(cmd, sizeof cmd, "%s/err", rkv_cli_tmpdir);
    char *err = rkv_cli_slurp(cmd);
#ifdef RKV_HAVE_ZLIB
    cr_assert_eq(WEXITSTATUS(st), 0, "%s", err);
    cr_assert(strstr(out, "\"requests\":2") != NULL, "%s", out);
#else
    cr_assert_eq(WEXITSTATUS(st), 1);
    cr_assert(strstr(err, "built without zlib") != NULL, "%s", err);
#endif
    free(out);
    free(err);
}

/* Issue 15 item 4: the default run is a load the simulated GPU sustains,
 * says so, and gives the cache-alone figure beside the scheduler's. */
Test(cli, default_run_is_a_sustained_operating_point)
{
    char *out, *err;
    /* The whole trace; a sanitizer build (10x slower, there for memory
     * errors, not figures) runs the same code on a slice. */
#if defined(__SANITIZE_ADDRESS__)
    const char *args = "replay --json --no-progress --limit 4000";
#else
    const char *args = "replay --json --no-progress";
#endif
    cr_assert_eq(run(args, &out, &err), 0, "%s", err);
    cr_assert(strstr(out, "\"time_scale_auto\":true") != NULL, "%s", out);
    cr_assert(strstr(out, "\"regime\":\"sustained\"") != NULL, "%s", out);
    cr_assert(strstr(out, "\"cache_alone\":{\"order\":\"file\"") != NULL, "%s", out);
    const char *ts = strstr(out, "\"time_scale\":{\"value\":");
    cr_assert_not_null(ts);
    double scale = atof(ts + strlen("\"time_scale\":{\"value\":"));
    cr_assert_gt(scale, 1.0, "the trace overloads one GPU at scale 1");
    const char *ld = strstr(out, "\"estimated_load\":");
    cr_assert_not_null(ld);
    cr_assert_leq(atof(ld + strlen("\"estimated_load\":")), 0.7 + 1e-9);
    /* TTFT is seconds at most, not the tens of minutes of a backlog */
    const char *t = strstr(out, "\"ttft_ms\":{\"p50\":");
    cr_assert_not_null(t);
    cr_assert_lt(atof(t + strlen("\"ttft_ms\":{\"p50\":")), 60e3, "%s", out);
    free(out);
    free(err);

    /* the text says the same (on a slice: the auto scale is the slice's) */
    cr_assert_eq(run("replay --no-progress --limit 3000", &out, &err), 0, "%s", err);
    cr_assert(strstr(out, "regime         sustained") != NULL, "%s", out);
    cr_assert(strstr(out, "cache alone    ") != NULL, "%s", out);
    cr_assert(strstr(out, "TTFT is mostly ") != NULL, "%s", out);
    cr_assert(strstr(out, " (auto)") != NULL, "%s", out);
    free(out);
    free(err);

    /* at scale 1 the report says the GPU is overloaded */
    cr_assert_eq(run("replay --no-progress --time-scale 1 --limit 2000", &out, &err), 0,
                 "%s", err);
    cr_assert(strstr(out, "regime         overloaded") != NULL, "%s", out);
    cr_assert(strstr(out, "TTFT is mostly queueing") != NULL, "%s", out);
    free(out);
    free(err);
}

/* `radixkv help router` / `help bridge` print what `radixkv router --help` /
 * `radixkv bridge --help` print (the usage line sends people there), or the
 * same "not built in" when the build lacks NATS / libzmq. */
Test(cli, help_names_the_daemons)
{
    static const char *const subs[] = {"router", "bridge"};
    for (size_t i = 0; i < 2; i++) {
        char args[32];
        char *out, *err, *hout, *herr;
        snprintf(args, sizeof args, "%s --help", subs[i]);
        int rc = run(args, &out, &err);
        snprintf(args, sizeof args, "help %s", subs[i]);
        int hrc = run(args, &hout, &herr);
        cr_assert_eq(hrc, rc, "help %s: exit %d, %s --help: %d (%s)", subs[i],
                     hrc, subs[i], rc, herr);
        cr_assert_str_eq(hout, out, "help %s prints %s --help", subs[i], subs[i]);
        cr_assert_str_eq(herr, err);
        cr_assert(rc == 0 ? strstr(out, "--model") != NULL
                          : strstr(err, "not available") != NULL,
                  "%s: %s%s", subs[i], out, err);
        free(out);
        free(err);
        free(hout);
        free(herr);
    }
    char *out, *err;
    cr_assert_eq(run("help", &out, &err), 0);
    cr_assert(strstr(out, "help [replay|sweep|router|bridge]") != NULL, "%s", out);
    free(out);
    free(err);
    cr_assert_eq(run("help frobnicate", &out, &err), 2);
    cr_assert(strstr(err, "'router' or 'bridge'") != NULL, "%s", err);
    free(out);
    free(err);
}

/* The fleet table writes durations as the single replay's report does
 * (rkv_fmt_duration: "637.9 ms", "3.11 s"), not bare milliseconds. */
Test(cli, fleet_table_durations_in_human_units)
{
    char *out, *err;
    cr_assert_eq(run("replay --limit 300 --instances 2 --route kv,round-robin "
                     "--no-progress", &out, &err), 0, "%s", err);
    size_t rows = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        unsigned inst;
        char route[16];
        unsigned long long reqs;
        double hit;
        if (sscanf(line, "%u %15s %llu %lf%%", &inst, route, &reqs, &hit) != 4)
            continue;
        /* after the hit rate: TTFT p50 and p99, each a number and a unit */
        const char *p = strchr(line, '%') + 1;
        double v1, v2;
        char u1[8], u2[8];
        cr_assert_eq(sscanf(p, "%lf %7s %lf %7s", &v1, u1, &v2, u2), 4, "%s", line);
        cr_assert(!strcmp(u1, "ms") || !strcmp(u1, "s") || !strcmp(u1, "min") ||
                      !strcmp(u1, "h"), "TTFT p50 has a unit: %s", line);
        cr_assert(!strcmp(u2, "ms") || !strcmp(u2, "s") || !strcmp(u2, "min") ||
                      !strcmp(u2, "h"), "TTFT p99 has a unit: %s", line);
        rows++;
    }
    cr_assert_eq(rows, 2, "one row per route");
    free(out);
    free(err);
}

/* The slow runs say how long they take: replay at --time-scale 1 and the
 * default sweep (the help texts of replay and sweep). */
Test(cli, help_gives_run_times)
{
    char *out, *err;
    cr_assert_eq(run("help replay", &out, &err), 0);
    cr_assert(strstr(out, "Run time on the embedded trace") != NULL &&
                  strstr(out, "with --time-scale 1") != NULL, "%s", out);
    free(out);
    free(err);
    cr_assert_eq(run("help sweep", &out, &err), 0);
    cr_assert(strstr(out, "The default sweep takes about") != NULL, "%s", out);
    free(out);
    free(err);
}

/* --evict-policy's help entry names every policy the option takes. */
Test(cli, help_lists_eviction_policies)
{
    char *out, *err;
    cr_assert_eq(run("help replay", &out, &err), 0);
    char *entry = strstr(out, "--evict-policy NAME");
    cr_assert_not_null(entry, "%s", out);
    char *next = strstr(entry + 1, "\n  --");
    if (next)
        *next = '\0';
    static const char *const names[] = {"lru", "priority", "learned"};
    for (size_t i = 0; i < 3; i++)
        cr_assert(strstr(entry, names[i]) != NULL, "%s missing: %s", names[i],
                  entry);
    free(out);
    free(err);
}
