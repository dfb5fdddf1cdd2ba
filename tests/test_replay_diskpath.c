/*
 * tests/test_replay_diskpath.c -- `radixkv replay --disk-path` end to end:
 * the disk tier below the simulator's byte-less pool writes a real record
 * per page (a pattern of the page's hash, verified on every load), keeps
 * the file, and the next run on it re-indexes the records (warm restart)
 * and hits them; a record damaged between runs is skipped, never a hit.
 *
 * Runs the radixkv binary built next to this test (tests/support/
 * cli_run.h); skipped when it is not there.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/cli_run.h"

static void setup(void)
{
    rkv_cli_setup("rkv_diskpath");
}

TestSuite(diskpath, .init = setup, .fini = rkv_cli_cleanup, .timeout = 600);

/* The number after "key": (the first occurrence after `from`, if given). */
static double json_num(const char *json, const char *from, const char *key)
{
    if (from != NULL) {
        const char *f = strstr(json, from);
        cr_assert_not_null(f, "%s missing in %s", from, json);
        json = f;
    }
    char k[128];
    snprintf(k, sizeof k, "\"%s\":", key);
    const char *p = strstr(json, k);
    cr_assert_not_null(p, "%s missing in %s", k, json);
    return strtod(p + strlen(k), NULL);
}

/* The first 40 requests of the embedded trace: small enough for a
 * sanitizer build, long enough that pages leave the device pool. */
static void write_trace(const char *path)
{
    FILE *in = fopen(RKV_SOURCE_DIR "/bench/traces/mooncake_conversation_trace.jsonl",
                     "r");
    cr_assert_not_null(in);
    FILE *out = fopen(path, "w");
    cr_assert_not_null(out);
    char line[1 << 16];
    for (int i = 0; i < 40 && fgets(line, sizeof line, in) != NULL; i++)
        fputs(line, out);
    fclose(in);
    cr_assert_eq(fclose(out), 0);
}

/* Copies src to a new file dst with mode 0600 (as the store made it). */
static void copy_file(const char *src, const char *dst)
{
    int in = open(src, O_RDONLY);
    int out = open(dst, O_WRONLY | O_CREAT | O_EXCL, 0600);
    cr_assert(in >= 0 && out >= 0);
    char buf[1 << 16];
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0)
        cr_assert_eq(write(out, buf, (size_t)n), n);
    cr_assert_eq(n, 0);
    close(in);
    cr_assert_eq(close(out), 0);
}

/* Flips one payload byte of slot 0's record (tier/README.md, "The disk
 * file": a 4096-byte file header, then records with 128-byte headers). */
static void corrupt_slot0(const char *path)
{
    int fd = open(path, O_RDWR);
    cr_assert(fd >= 0);
    unsigned char c;
    off_t at = 4096 + 128 + 5;
    cr_assert_eq(pread(fd, &c, 1, at), 1);
    c ^= 0x40;
    cr_assert_eq(pwrite(fd, &c, 1, at), 1);
    close(fd);
}

static char *replay(const char *trace, const char *file)
{
    char args[1024], *out, *err;
    snprintf(args, sizeof args,
             "replay %s --no-progress --json --page-size 64 --capacity-tokens 8000 "
             "--disk-capacity-tokens 200000 --disk-path %s",
             trace, file);
    int rc = rkv_cli_run(args, &out, &err);
    cr_assert_eq(rc, 0, "%s: %s", args, err);
    free(err);
    return out;
}

Test(diskpath, second_run_hits_the_first_runs_records)
{
    char trace[256], file[256], copy[256];
    snprintf(trace, sizeof trace, "%s/t.jsonl", rkv_cli_tmpdir);
    snprintf(file, sizeof file, "%s/tier.blocks", rkv_cli_tmpdir);
    snprintf(copy, sizeof copy, "%s/damaged.blocks", rkv_cli_tmpdir);
    write_trace(trace);

    char *r1 = replay(trace, file);
    const char *df = "\"disk_file\":";
    cr_assert_not_null(strstr(r1, "\"disk_file\":{\"warm_start\":false"), "%s", r1);
    double written = json_num(r1, df, "records_written");
    cr_assert_gt(written, 0, "%s", r1);
    cr_assert_eq(json_num(r1, df, "reindexed"), 0);
    cr_assert_eq(json_num(r1, df, "verify_failed"), 0);
    double hits1 = json_num(r1, "\"hit_tokens_by_medium\":", "disk");
    copy_file(file, copy);
    corrupt_slot0(copy);

    /* the same trace again on the kept file: the first run's pages come
     * back from the disk */
    char *r2 = replay(trace, file);
    cr_assert_not_null(strstr(r2, "\"disk_file\":{\"warm_start\":true"), "%s", r2);
    double reindexed = json_num(r2, df, "reindexed");
    cr_assert_gt(reindexed, 0, "%s", r2);
    cr_assert_eq(json_num(r2, df, "skipped"), 0, "%s", r2);
    cr_assert_eq(json_num(r2, df, "verify_failed"), 0, "%s", r2);
    cr_assert_gt(json_num(r2, df, "verified"), 0, "%s", r2);
    double hits2 = json_num(r2, "\"hit_tokens_by_medium\":", "disk");
    cr_assert_gt(hits2, hits1, "disk hits %g after a warm start, %g cold", hits2,
                 hits1);

    /* the same start from a copy with slot 0's payload damaged: that
     * record is skipped (its checksum fails), the rest re-indexed */
    char *r3 = replay(trace, copy);
    cr_assert_eq(json_num(r3, df, "skipped"), 1, "%s", r3);
    cr_assert_eq(json_num(r3, df, "reindexed"), reindexed - 1, "%s", r3);
    cr_assert_eq(json_num(r3, df, "verify_failed"), 0, "%s", r3);
    cr_assert_gt(json_num(r3, "\"hit_tokens_by_medium\":", "disk"), hits1, "%s", r3);
    free(r1);
    free(r2);
    free(r3);
}

Test(diskpath, text_report_and_refusals)
{
    char trace[256], file[256], args[1024], *out, *err;
    snprintf(trace, sizeof trace, "%s/t2.jsonl", rkv_cli_tmpdir);
    snprintf(file, sizeof file, "%s/t2.blocks", rkv_cli_tmpdir);
    write_trace(trace);
    snprintf(args, sizeof args,
             "replay %s --no-progress --order file --page-size 64 "
             "--capacity-tokens 8000 --disk-capacity-tokens 200000 --disk-path %s "
             "--disk-record-bytes 100",
             trace, file);
    cr_assert_eq(rkv_cli_run(args, &out, &err), 0, "%s", err);
    cr_assert_not_null(strstr(out, "disk file "), "%s", out);
    cr_assert_not_null(strstr(out, "warm restart   a new file: 0 records re-indexed"),
                       "%s", out);
    free(out);
    free(err);

    static const struct {
        const char *args, *msg;
    } bad[] = {
        {"replay --disk-path x", "--disk-path needs --disk-capacity-tokens"},
        {"replay --disk-capacity-tokens 1000 --disk-path x --instances 2",
         "--disk-path needs --disk-capacity-tokens and one instance"},
        {"replay --disk-capacity-tokens 1000 --disk-record-bytes 10",
         "--disk-record-bytes applies to --disk-path"},
        {"replay --disk-capacity-tokens 1000 --disk-path ''", "--disk-path: empty path"},
        {"sweep --disk-capacity-tokens 1000 --disk-path x", "disk-path"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(rkv_cli_run(bad[i].args, &out, &err), 2, "%s", bad[i].args);
        cr_assert_not_null(strstr(err, bad[i].msg), "%s: %s", bad[i].args, err);
        free(out);
        free(err);
    }
}
