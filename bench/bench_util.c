/*
 * bench/bench_util.c -- see bench_util.h.
 */
#include "bench/bench_util.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double rkv_bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int rkv_bench_parse_u64(const char *s, uint64_t *out)
{
    char *end;
    if (*s < '0' || *s > '9')
        return 0;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0')
        return 0;
    *out = v;
    return 1;
}

char *rkv_bench_find_trace(const char *arg)
{
    if (arg != NULL)
        return strdup(arg);
    const char *env = getenv("RKV_TRACE");
    if (env != NULL && *env)
        return strdup(env);
    char dir[PATH_MAX];
    if (getcwd(dir, sizeof dir) == NULL)
        return NULL;
    for (;;) {
        char path[PATH_MAX + sizeof RKV_BENCH_TRACE_REL + 1];
        snprintf(path, sizeof path, "%s/%s", dir, RKV_BENCH_TRACE_REL);
        if (access(path, R_OK) == 0)
            return strdup(path);
        char *slash = strrchr(dir, '/');
        if (slash == NULL || slash == dir)
            break;
        *slash = '\0';
    }
    return NULL;
}
