/*
 * tests/fleet/test_fleet_guard.c -- fleet/guard.h: the instance id a
 * subject gives (exactly the publisher's decimal form after the exact
 * prefix, nothing else), and the snapshot-request token bucket (burst,
 * refill per interval, capped at the burst, a clock going back).
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>

#include "fleet/guard.h"

Test(fleet_guard, subject_ids)
{
    const char *p = "radixkv.m.kv.";
    uint64_t id = 99;
    cr_assert(rkv_fleet_subject_id("radixkv.m.kv.7", p, &id));
    cr_assert_eq(id, 7);
    cr_assert(rkv_fleet_subject_id("radixkv.m.kv.0", p, &id));
    cr_assert_eq(id, 0);
    cr_assert(rkv_fleet_subject_id("radixkv.m.kv.18446744073709551615", p, &id));
    cr_assert_eq(id, UINT64_MAX);
    id = 5;
    const char *bad[] = {"radixkv.m.kv.",  "radixkv.m.kv.07", "radixkv.m.kv.-1",
                         "radixkv.m.kv.+1", "radixkv.m.kv.1a", "radixkv.m.kv.1.2",
                         "radixkv.m.kv. 1", "radixkv.m.hb.1",  "radixkv.mm.kv.1",
                         "radixkv.m.kv.18446744073709551616", "radixkv.m.kv",
                         ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert(!rkv_fleet_subject_id(bad[i], p, &id), "%s", bad[i]);
    cr_assert_eq(id, 5, "untouched on a refusal");
    cr_assert(!rkv_fleet_subject_id(NULL, p, &id));
    /* every id the publisher writes reads back */
    uint64_t ids[] = {1, 9, 10, 12345678901234ull, UINT64_MAX - 1};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        char s[64];
        snprintf(s, sizeof s, "_INBOX.abc.%" PRIu64, ids[i]);
        cr_assert(rkv_fleet_subject_id(s, "_INBOX.abc.", &id));
        cr_assert_eq(id, ids[i]);
    }
}

Test(fleet_guard, bucket_burst_then_one_per_interval)
{
    rkv_fleet_bucket b;
    rkv_fleet_bucket_init(&b, 3, 1000);
    int got = 0;
    for (int i = 0; i < 10; i++)
        got += rkv_fleet_bucket_take(&b, 3, 500, 1000);
    cr_assert_eq(got, 3, "the burst, then nothing at the same time");
    cr_assert(!rkv_fleet_bucket_take(&b, 3, 500, 1499));
    cr_assert(rkv_fleet_bucket_take(&b, 3, 500, 1500));
    cr_assert(!rkv_fleet_bucket_take(&b, 3, 500, 1600));
    /* a long pause refills to the burst, no more */
    got = 0;
    for (int i = 0; i < 10; i++)
        got += rkv_fleet_bucket_take(&b, 3, 500, 100000);
    cr_assert_eq(got, 3);
    /* over a long run: burst + elapsed / interval at most */
    rkv_fleet_bucket_init(&b, 2, 0);
    got = 0;
    for (uint64_t t = 0; t <= 10000; t += 7)
        got += rkv_fleet_bucket_take(&b, 2, 250, t);
    cr_assert_leq(got, 2 + 10000 / 250);
    cr_assert_geq(got, 10000 / 250);
    /* a clock that goes back adds nothing */
    rkv_fleet_bucket_init(&b, 1, 5000);
    cr_assert(rkv_fleet_bucket_take(&b, 1, 1000, 5000));
    cr_assert(!rkv_fleet_bucket_take(&b, 1, 1000, 10));
    cr_assert(!rkv_fleet_bucket_take(&b, 1, 1000, 900));
    cr_assert(rkv_fleet_bucket_take(&b, 1, 1000, 1010));
}
