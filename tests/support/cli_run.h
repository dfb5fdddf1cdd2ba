/*
 * tests/support/cli_run.h -- running the `radixkv` command from the
 * end-to-end tests (tests/test_replay_cli.c, tests/test_retention_cli.c).
 *
 * The binary is the one built next to the test (found through
 * /proc/self/exe), so a test checks the command of its own build; the
 * test is skipped when it is not there (e.g. only the test target was
 * built). Each suite gets one fresh temporary directory, removed by
 * rkv_cli_cleanup; captured stdout / stderr go there.
 */
#ifndef RKV_TESTS_CLI_RUN_H
#define RKV_TESTS_CLI_RUN_H

#include <limits.h>
#include <stddef.h>

#include "cli/args.h"

/* Path of the radixkv binary and of the suite's temporary directory, set
 * by rkv_cli_setup. The directory's name is short so that callers can
 * format paths under it into fixed buffers (-Wformat-truncation sees it). */
#define RKV_CLI_TMPDIR_CAP 64
extern char rkv_cli_exe[PATH_MAX];
extern char rkv_cli_tmpdir[RKV_CLI_TMPDIR_CAP];

/* Suite .init: finds the binary (skips the test when absent) and creates
 * /tmp/PREFIX_XXXXXX. */
void rkv_cli_setup(const char *prefix);

/* Suite .fini: removes the temporary directory if one was made. */
void rkv_cli_cleanup(void);

/* The whole file as a NUL-terminated malloc'ed string (asserts it reads). */
char *rkv_cli_slurp(const char *path);

/* Runs `radixkv ARGS` (ARGS is shell text, stdin from /dev/null); returns
 * the exit status and sets *out / *err to malloc'ed stdout / stderr. */
int rkv_cli_run(const char *args, char **out, char **err);

/* rkv_cli_parse of "radixkv ARGS" in this process (ARGS split at spaces,
 * 31 words at most); err gets the message. Strings in *o point into a
 * static copy of ARGS, valid until the next call. */
enum rkv_cli_action rkv_cli_parse_line(const char *args, rkv_cli_options *o, char *err,
                                       size_t cap);

#endif
