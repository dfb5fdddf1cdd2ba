/*
 * tests/support/cli_run.c -- see cli_run.h. Test-only: the state here is
 * per test process (Criterion runs each test in its own process).
 */
#include "tests/support/cli_run.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

char rkv_cli_exe[PATH_MAX];
char rkv_cli_tmpdir[RKV_CLI_TMPDIR_CAP];

void rkv_cli_setup(const char *prefix)
{
    ssize_t n = readlink("/proc/self/exe", rkv_cli_exe, sizeof rkv_cli_exe - 16);
    cr_assert_gt(n, 0);
    rkv_cli_exe[n] = '\0';
    char *slash = strrchr(rkv_cli_exe, '/');
    cr_assert_not_null(slash);
    strcpy(slash + 1, "radixkv");
    if (access(rkv_cli_exe, X_OK) != 0)
        cr_skip_test("radixkv binary not built next to the test (%s)", rkv_cli_exe);
    snprintf(rkv_cli_tmpdir, sizeof rkv_cli_tmpdir, "/tmp/%s_XXXXXX", prefix);
    cr_assert_not_null(mkdtemp(rkv_cli_tmpdir));
}

void rkv_cli_cleanup(void)
{
    char cmd[PATH_MAX + 16];
    /* Still the template (or empty) when setup skipped or failed. */
    if (rkv_cli_tmpdir[0] != '\0' && strstr(rkv_cli_tmpdir, "XXXXXX") == NULL) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", rkv_cli_tmpdir);
        cr_assert_eq(system(cmd), 0);
    }
}

char *rkv_cli_slurp(const char *path)
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

int rkv_cli_run(const char *args, char **out, char **err)
{
    char cmd[4 * PATH_MAX];
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s/out' 2>'%s/err' </dev/null", rkv_cli_exe,
             args, rkv_cli_tmpdir, rkv_cli_tmpdir);
    int st = system(cmd);
    cr_assert(WIFEXITED(st), "'%s' did not exit normally", cmd);
    char p[PATH_MAX + 8];
    snprintf(p, sizeof p, "%s/out", rkv_cli_tmpdir);
    *out = rkv_cli_slurp(p);
    snprintf(p, sizeof p, "%s/err", rkv_cli_tmpdir);
    *err = rkv_cli_slurp(p);
    return WEXITSTATUS(st);
}

enum rkv_cli_action rkv_cli_parse_line(const char *args, rkv_cli_options *o, char *err,
                                       size_t cap)
{
    static char buf[512]; /* *o may point into the words after the return */
    snprintf(buf, sizeof buf, "%s", args);
    char *argv[32];
    int argc = 0;
    argv[argc++] = "radixkv";
    for (char *t = strtok(buf, " "); t && argc < 31; t = strtok(NULL, " "))
        argv[argc++] = t;
    argv[argc] = NULL;
    return rkv_cli_parse(argc, argv, o, err, cap);
}
