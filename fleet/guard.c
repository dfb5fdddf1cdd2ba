/*
 * fleet/guard.c -- subject ids and the snapshot-request token bucket
 * (fleet/guard.h).
 */
#include "fleet/guard.h"

#include <string.h>

int rkv_fleet_subject_id(const char *subject, const char *prefix, uint64_t *id)
{
    if (!subject || !prefix || !id)
        return 0;
    size_t n = strlen(prefix);
    if (strncmp(subject, prefix, n) != 0)
        return 0;
    const char *p = subject + n;
    if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] != 0))
        return 0;
    uint64_t v = 0;
    for (; *p; p++) {
        if (*p < '0' || *p > '9')
            return 0;
        uint64_t d = (uint64_t)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return 0;
        v = v * 10 + d;
    }
    *id = v;
    return 1;
}

void rkv_fleet_bucket_init(rkv_fleet_bucket *b, uint32_t burst, uint64_t now_ms)
{
    b->tokens = burst;
    b->last_ms = now_ms;
}

int rkv_fleet_bucket_take(rkv_fleet_bucket *b, uint32_t burst, uint64_t interval_ms,
                          uint64_t now_ms)
{
    if (b->tokens >= burst || now_ms < b->last_ms) {
        /* full (or the clock went back): the refill starts from now */
        if (b->tokens > burst)
            b->tokens = burst;
        b->last_ms = now_ms;
    } else if (interval_ms) {
        uint64_t add = (now_ms - b->last_ms) / interval_ms;
        if (add >= burst - b->tokens) {
            b->tokens = burst;
            b->last_ms = now_ms;
        } else {
            b->tokens += (uint32_t)add;
            b->last_ms += add * interval_ms;
        }
    } else {
        b->tokens = burst;
    }
    if (b->tokens == 0)
        return 0;
    b->tokens--;
    return 1;
}
