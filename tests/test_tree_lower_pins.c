/*
 * tests/test_tree_lower_pins.c -- pins that live on in the lower tiers
 * (residency/lowered_pins.c, issue 13): device pressure lowers a pin instead
 * of revoking it (the oldest pin first among equal deadlines), its pages
 * are demoted but the lowest tier never drops
 * them, each lower medium caps its pinned pages, lowered pins expire,
 * extend and release like others, are revoked (counted) when their pages
 * leave the tree anyway (failed store, corrupt read, an insert that
 * diverges inside them), a re-insert of the prefix (whole, or its start:
 * the lower rest stays, and so do pinned lower branches that leave its
 * path at a node boundary) or a load back keeps the pin lowered on the new
 * device copy (counted in pinned_lowered_on_device, demoted again when
 * evicted) and a retain by its owner re-leases it;
 * drop_pinned keeps the old behaviour (revoke). A randomized run checks a
 * small reference of live pins and rkv_tree_check after every operation,
 * with disjoint sequences and with sequences sharing prefixes.
 *
 * Expected values come from the scenarios or the reference in this file.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "radix/tree_debug.h"
#include "radixkv.h"
#include "tests/support/handles.h"
#include "tests/support/tree_tier_fixture.h"
#include "tier/store.h"

#define TP 4u
#define NSEQ 8u
#define SEQ_PAGES 8u
#define LONG_PAGES 16u /* the longest sequence a test inserts */
#define PIN_PCT 50u    /* max_pinned_pct of every case */
#define OK(expr) cr_assert_eq((expr), RKV_OK, "%s: %s", #expr, rkv_last_error())

typedef struct lp {
    tt_fixture fx; /* pool, tree, host (and disk) */
    int32_t tok[NSEQ][SEQ_PAGES * TP]; /* distinct from page 0 */
} lp;

/* A pool of `blocks`, a host of host_cap blocks, a disk of disk_cap (0:
 * none) below it, pin cap pct (lp_open: PIN_PCT), drop_pinned. */
static void lp_open_pct(lp *s, uint32_t blocks, uint32_t host_cap,
                        uint32_t disk_cap, int drop_pinned, uint32_t pct)
{
    rkv_tree_config tc;
    rkv_tree_config_init(&tc);
    tc.max_pinned_pct = pct;
    rkv_tier_config cfg;
    rkv_tier_config_init(&cfg);
    cfg.drop_pinned = drop_pinned;
    tt_open(&s->fx, &(tt_spec){.pool_blocks = blocks, .page_size = TP,
                               .tree = &tc, .host_blocks = host_cap,
                               .disk_blocks = disk_cap, .tier = &cfg});
    for (uint32_t a = 0; a < NSEQ; a++)
        for (uint32_t j = 0; j < SEQ_PAGES * TP; j++)
            s->tok[a][j] = (int32_t)(a * 1000 + j + 1);
}

static void lp_open(lp *s, uint32_t blocks, uint32_t host_cap,
                    uint32_t disk_cap, int drop_pinned)
{
    lp_open_pct(s, blocks, host_cap, disk_cap, drop_pinned, PIN_PCT);
}

/* Caches n pages of toks on the device (allocating under pressure). */
static rkv_status lp_try_insert_toks(lp *s, const int32_t *toks, uint32_t n)
{
    cr_assert_leq(n, LONG_PAGES);
    return tt_try_cache(&s->fx, 5, toks, n, NULL);
}

static rkv_status lp_try_insert(lp *s, uint32_t a, uint32_t n)
{
    return lp_try_insert_toks(s, s->tok[a], n);
}

/* The steps of the targeted cases: each must succeed, and each is followed
 * by tt_check. */

/* Caches n pages of toks (the caller's own tokens). */
static void lp_insert_toks(lp *s, const int32_t *toks, uint32_t n)
{
    OK(lp_try_insert_toks(s, toks, n));
    tt_check(&s->fx);
}

/* Caches the first n pages of sequence a. */
static void lp_insert(lp *s, uint32_t a, uint32_t n)
{
    lp_insert_toks(s, s->tok[a], n);
}

/* Pins the first n pages of toks for owner until now + ttl; all n pinned. */
static void lp_pin_toks(lp *s, const int32_t *toks, uint32_t n,
                        uint64_t owner, uint64_t ttl, uint64_t now)
{
    rkv_retention r = tu_pin((size_t)n * TP, ttl, owner);
    rkv_retain_result out;
    OK(rkv_tree_retain(s->fx.tree, 5, toks, (size_t)n * TP, &r, now, &out));
    cr_assert_eq(out.pinned_pages, n);
    tt_check(&s->fx);
}

static void lp_pin(lp *s, uint32_t a, uint32_t n, uint64_t owner,
                   uint64_t ttl, uint64_t now)
{
    lp_pin_toks(s, s->tok[a], n, owner, ttl, now);
}

/* The start of most cases: lp_open with a pool of 8 blocks, then sequence
 * 0's first n pages cached and pinned by owner 1 until 1000. */
static void lp_open_pinned(lp *s, uint32_t host_cap, uint32_t disk_cap,
                           int drop_pinned, uint32_t n)
{
    lp_open(s, 8, host_cap, disk_cap, drop_pinned);
    lp_insert(s, 0, n);
    lp_pin(s, 0, n, 1, 1000, 0);
}

/* Pressure: takes every block of the pool and gives them back. */
static void lp_take_all(lp *s)
{
    uint32_t n = rkv_pool_num_blocks(s->fx.pool);
    rkv_block_id *b = malloc(n * sizeof *b);
    cr_assert_not_null(b);
    OK(rkv_tree_alloc_blocks(s->fx.tree, n, b));
    OK(rkv_pool_unref_n(s->fx.pool, n, b));
    free(b);
}

static void lp_squeeze(lp *s)
{
    lp_take_all(s);
    tt_check(&s->fx);
}

/* lp_open_pinned with 2 pages, the device's other 6 blocks filled with
 * sequence 1, then pressure: all 8 pages go down (the pin lowered, or
 * revoked with drop_pinned). */
static void lp_open_full_squeezed(lp *s, uint32_t host_cap, uint32_t disk_cap,
                                  int drop_pinned)
{
    lp_open_pinned(s, host_cap, disk_cap, drop_pinned, 2);
    lp_insert(s, 1, 6);
    lp_squeeze(s);
}

/* Full rounds of sequences first..last-1 (8 pages each) through the
 * device: each pushes everything else down a tier. */
static void lp_rounds(lp *s, uint32_t first, uint32_t last)
{
    for (uint32_t a = first; a < last; a++) {
        lp_insert(s, a, SEQ_PAGES);
        lp_squeeze(s);
    }
}

/* Device + lower tokens of the first n pages of sequence a. */
static size_t lp_cached(lp *s, uint32_t a, uint32_t n, rkv_tier_match *tm)
{
    rkv_match m;
    rkv_tier_match t2;
    if (tm == NULL)
        tm = &t2;
    OK(rkv_tree_match_tiers(s->fx.tree, 5, s->tok[a], (size_t)n * TP, NULL,
                            RKV_MATCH_PEEK, &m, tm));
    return m.matched_tokens + tm->lower_tokens;
}

/* Device tokens of the first n pages of sequence a. */
static size_t lp_on_device(lp *s, uint32_t a, uint32_t n)
{
    rkv_match m;
    OK(rkv_tree_match(s->fx.tree, 5, s->tok[a], (size_t)n * TP, NULL,
                      RKV_MATCH_PEEK, &m));
    return m.matched_tokens;
}

static rkv_retention_stats lp_rs(lp *s)
{
    rkv_retention_stats rs;
    OK(rkv_tree_retention_stats(s->fx.tree, &rs));
    return rs;
}

/* Loads the first n pages of sequence a back; the transfer ends in want. */
static void lp_load(lp *s, uint32_t a, uint32_t n, rkv_status want)
{
    rkv_load ld;
    OK(rkv_tree_load(s->fx.tree, 5, s->tok[a], (size_t)n * TP, UINT32_MAX, NULL,
                     &ld));
    cr_assert_neq(ld.ticket, 0);
    rkv_transfer_done done;
    uint32_t nd = 0;
    OK(rkv_tree_tier_poll(s->fx.tree, &done, 1, &nd));
    cr_assert_eq(nd, 1);
    cr_assert_eq(done.status, want);
    OK(rkv_tree_unlock(s->fx.tree, &ld.lease));
    tt_check(&s->fx);
}

/* ---- expected pin state --------------------------------------------------- */

/* The retention counters the cases check, by name. */
typedef enum lp_key {
    PINS,       /* pins                                   */
    MADE,       /* pins_made                              */
    RENEWED,    /* pins_renewed                           */
    EXPIRED,    /* pins_expired                           */
    REVOKED,    /* pins_revoked                           */
    DEMOTED,    /* pins_demoted                           */
    LOWERED,    /* pins_lowered                           */
    DEV_PINNED, /* pinned_blocks: device pages under pins */
    HOST,       /* pinned_by_medium[HOST]                 */
    DISK,       /* pinned_by_medium[DISK]                 */
    LOWER,      /* HOST + DISK                            */
    CAP_DEV,    /* pin_cap_by_medium[DEVICE]              */
    CAP_HOST,   /* pin_cap_by_medium[HOST]                */
    CAP_DISK,   /* pin_cap_by_medium[DISK]                */
    ON_DEV,     /* pinned_lowered_on_device               */
    KEY_END
} lp_key;

static const char *const lp_key_name[KEY_END] = {
    "pins", "pins_made", "pins_renewed", "pins_expired", "pins_revoked",
    "pins_demoted", "pins_lowered", "pinned_blocks", "pinned on host",
    "pinned on disk", "pinned on host + disk", "device pin cap",
    "host pin cap", "disk pin cap", "pinned_lowered_on_device",
};

typedef struct lp_want {
    lp_key key;
    uint64_t value;
} lp_want;

static uint64_t lp_stat(const rkv_retention_stats *rs, lp_key k)
{
    switch (k) {
    case PINS: return rs->pins;
    case MADE: return rs->pins_made;
    case RENEWED: return rs->pins_renewed;
    case EXPIRED: return rs->pins_expired;
    case REVOKED: return rs->pins_revoked;
    case DEMOTED: return rs->pins_demoted;
    case LOWERED: return rs->pins_lowered;
    case DEV_PINNED: return rs->pinned_blocks;
    case HOST: return rs->pinned_by_medium[RKV_MEDIUM_HOST];
    case DISK: return rs->pinned_by_medium[RKV_MEDIUM_DISK];
    case LOWER:
        return rs->pinned_by_medium[RKV_MEDIUM_HOST] +
               rs->pinned_by_medium[RKV_MEDIUM_DISK];
    case CAP_DEV: return rs->pin_cap_by_medium[RKV_MEDIUM_DEVICE];
    case CAP_HOST: return rs->pin_cap_by_medium[RKV_MEDIUM_HOST];
    case CAP_DISK: return rs->pin_cap_by_medium[RKV_MEDIUM_DISK];
    case ON_DEV: return rs->pinned_lowered_on_device;
    default: break;
    }
    cr_assert_fail("unknown key %d", (int)k);
    return 0;
}

static void lp_expect_at(int line, lp *s, const char *why, const lp_want *w)
{
    rkv_retention_stats rs = lp_rs(s);
    for (; w->key != KEY_END; w++) {
        uint64_t got = lp_stat(&rs, w->key);
        cr_assert_eq(got, w->value, "line %d: %s is %llu, want %llu%s%s",
                     line, lp_key_name[w->key], (unsigned long long)got,
                     (unsigned long long)w->value, why ? ": " : "",
                     why ? why : "");
    }
}

/* EXPECT(&s, why or NULL, {KEY, value}, ...): the tree's retention
 * counters now; a failure names the line, the counter and why. */
#define EXPECT(s, why, ...)                                                    \
    lp_expect_at(__LINE__, (s), (why),                                         \
                 (const lp_want[]){__VA_ARGS__, {KEY_END, 0}})

/* ---- targeted cases ------------------------------------------------------- */

/* A pinned prefix under device pressure goes to the host pinned; later
 * pressure on the host drops the unpinned pages and keeps it. */
Test(lower_pins, demoted_to_host_not_dropped)
{
    lp s;
    lp_open_full_squeezed(&s, 8, 0, 0); /* lowers the pin */
    EXPECT(&s, "no device page is pinned now", {PINS, 1}, {DEMOTED, 1},
           {LOWERED, 1}, {REVOKED, 0}, {DEV_PINNED, 0}, {HOST, 2},
           {CAP_HOST, 4}, {CAP_DEV, 4}, {DISK, 0});
    lp_rounds(&s, 2, 4); /* two more full rounds: only the pin survives */
    cr_assert_eq(lp_cached(&s, 0, 2, NULL), 2 * TP, "pinned pages stay");
    cr_assert_eq(lp_cached(&s, 1, 6, NULL), 0, "unpinned ones went");
    EXPECT(&s, NULL, {LOWERED, 1}, {REVOKED, 0});
    tt_close(&s.fx);
}

/* drop_pinned: device pressure revokes (the old behaviour) and the host
 * drops the pages like any other. */
Test(lower_pins, drop_pinned_revokes)
{
    lp s;
    lp_open_full_squeezed(&s, 8, 0, 1);
    EXPECT(&s, NULL, {PINS, 0}, {DEMOTED, 0}, {REVOKED, 1});
    lp_rounds(&s, 2, 4);
    cr_assert_eq(lp_cached(&s, 0, 2, NULL), 0);
    tt_close(&s.fx);
}

/* The cap per medium: a host of 4 blocks at 50 % holds 2 pinned pages; a
 * 3-page pin is revoked when its pages reach the host. */
Test(lower_pins, cap_per_medium)
{
    lp s;
    lp_open_pinned(&s, 4, 0, 0, 3);
    lp_insert(&s, 1, 1);
    lp_pin(&s, 1, 1, 2, 1000, 0);
    lp_squeeze(&s);
    EXPECT(&s, "the 3-page pin passed the host cap", {DEMOTED, 2},
           {REVOKED, 1}, {PINS, 1}, {HOST, 1}, {CAP_HOST, 2});
    tt_close(&s.fx);
    /* a cap of 0 on the host: pins are revoked, not lowered */
    lp_open_pinned(&s, 1, 0, 0, 2);
    lp_squeeze(&s);
    EXPECT(&s, NULL, {DEMOTED, 0}, {REVOKED, 1});
    tt_close(&s.fx);
}

/* Expiry, extension and release of lowered pins. */
Test(lower_pins, expiry_extension_release)
{
    lp s;
    lp_open(&s, 8, 8, 0, 0);
    for (uint32_t a = 0; a < 2; a++) {
        lp_insert(&s, a, 2);
        lp_pin(&s, a, 2, a + 1, 100, 0);
    }
    lp_squeeze(&s);
    EXPECT(&s, NULL, {LOWERED, 2}, {HOST, 4});
    uint32_t n = 0;
    OK(rkv_tree_pins_extend(s.fx.tree, 1, 500, 50, &n));
    cr_assert_eq(n, 1, "a lowered pin extends");
    OK(rkv_tree_set_time(s.fx.tree, 150));
    tt_check(&s.fx);
    EXPECT(&s, NULL, {EXPIRED, 1}, {LOWERED, 1}, {HOST, 2});
    /* the expired one is droppable again, the extended one is not */
    lp_rounds(&s, 2, 3);
    cr_assert_eq(lp_cached(&s, 0, 2, NULL), 2 * TP);
    cr_assert_eq(lp_cached(&s, 1, 2, NULL), 0);
    OK(rkv_tree_pins_release(s.fx.tree, 1, &n));
    cr_assert_eq(n, 1, "a lowered pin releases");
    tt_check(&s.fx);
    EXPECT(&s, NULL, {PINS, 0}, {LOWERED, 0}, {HOST, 0});
    lp_rounds(&s, 3, 4);
    cr_assert_eq(lp_cached(&s, 0, 2, NULL), 0, "released: dropped");
    /* reset drops a lowered pin too */
    lp_insert(&s, 4, 2);
    lp_pin(&s, 4, 2, 3, 100, 200);
    lp_squeeze(&s);
    EXPECT(&s, NULL, {LOWERED, 1});
    OK(rkv_tree_reset(s.fx.tree));
    tt_check(&s.fx);
    EXPECT(&s, NULL, {PINS, 0});
    tt_close(&s.fx);
}

/* A store that fails while the pinned pages are demoted: they leave the
 * tree and the pin is revoked (counted). */
Test(lower_pins, failed_store_revokes)
{
    lp s;
    lp_open_pinned(&s, 8, 0, 0, 2);
    rkv_store_fail_after(s.fx.host, 1);
    lp_squeeze(&s);
    EXPECT(&s, NULL, {DEMOTED, 1}, {REVOKED, 1}, {PINS, 0}, {HOST, 0});
    rkv_tier_stats ts;
    OK(rkv_tree_tier_stats(s.fx.tree, &ts));
    cr_assert_eq(ts.failed_stores, 1);
    tt_close(&s.fx);
}

/* A corrupt host copy read at load: the pages leave the tree, the pin is
 * revoked. */
Test(lower_pins, corrupt_read_revokes)
{
    lp s;
    lp_open_pinned(&s, 8, 0, 0, 2);
    lp_squeeze(&s);
    EXPECT(&s, NULL, {LOWERED, 1});
    /* overwrite page 0's record with another hash */
    uint64_t h0 = rkv_block_hash(RKV_HASH_ROOT, 5, s.tok[0], TP);
    tt_corrupt_host_copy(&s.fx, h0, 5);
    lp_load(&s, 0, 2, RKV_ERR_CORRUPT);
    EXPECT(&s, NULL, {REVOKED, 1}, {PINS, 0});
    cr_assert_eq(lp_cached(&s, 0, 2, NULL), 0);
    tt_close(&s.fx);
}

/* An I/O error at load leaves the pages (and the pin) in the host. */
Test(lower_pins, failed_load_keeps_pin)
{
    lp s;
    lp_open_pinned(&s, 8, 0, 0, 2);
    lp_squeeze(&s);
    rkv_load ld;
    OK(rkv_tree_load(s.fx.tree, 5, s.tok[0], 2 * TP, UINT32_MAX, NULL, &ld));
    EXPECT(&s, "LOADING: on the device", {HOST, 0}, {ON_DEV, 2});
    rkv_store_fail_after(s.fx.host, 1);
    rkv_transfer_done done;
    uint32_t nd = 0;
    OK(rkv_tree_tier_poll(s.fx.tree, &done, 1, &nd));
    cr_assert_eq(done.status, RKV_ERR_IO);
    OK(rkv_tree_unlock(s.fx.tree, &ld.lease));
    tt_check(&s.fx);
    EXPECT(&s, NULL, {LOWERED, 1}, {HOST, 2}, {ON_DEV, 0});
    tt_close(&s.fx);
}

/* A lowered prefix recomputed chunk by chunk (chunked prefill inserts each
 * chunk): the first insert covers only its start, the lower copy past it
 * stays (re-hung under the new device pages), so the pin loses nothing;
 * the next chunk's insert covers the rest. With a disk below too. */
static void insert_chunks_keep_pin(uint32_t disk_cap)
{
    lp s;
    lp_open(&s, 8, 8, disk_cap, 0);
    lp_insert(&s, 0, 4);
    lp_pin(&s, 0, 2, 2, 1000, 0); /* its end is a node boundary */
    lp_pin(&s, 0, 4, 1, 1000, 0);
    lp_squeeze(&s);
    EXPECT(&s, NULL, {LOWERED, 2});
    lp_insert(&s, 0, 1); /* splits the lower node [0, 2) */
    EXPECT(&s, "the lower tail stays", {REVOKED, 0}, {PINS, 2}, {LOWER, 3},
           {ON_DEV, 1});
    rkv_tier_match tm;
    cr_assert_eq(lp_cached(&s, 0, 4, &tm), 4 * TP);
    cr_assert_eq(tm.lower_tokens, 3 * TP);
    lp_insert(&s, 0, 2); /* ends where a pin ends: that one is covered */
    EXPECT(&s, NULL, {REVOKED, 0}, {PINS, 2}, {LOWER, 2});
    cr_assert_eq(lp_cached(&s, 0, 4, NULL), 4 * TP);
    lp_insert(&s, 0, 4);
    EXPECT(&s, NULL, {REVOKED, 0}, {LOWERED, 2}, {LOWER, 0}, {ON_DEV, 4});
    lp_pin(&s, 0, 4, 1, 50, 10);
    lp_pin(&s, 0, 2, 2, 50, 10);
    EXPECT(&s, "both taken over by their owners", {PINS, 2}, {LOWERED, 0},
           {DEV_PINNED, 4}, {ON_DEV, 0});
    tt_close(&s.fx);
}

Test(lower_pins, insert_chunks_keep_pin)
{
    insert_chunks_keep_pin(0);
}

Test(lower_pins, insert_chunks_keep_pin_disk)
{
    insert_chunks_keep_pin(16);
}

/* The same prefix inserted again while it is in the host (the scheduler
 * recomputed it): the pin survives on the new device copy, still lowered,
 * goes down pinned again, and its owner's retain takes it over. */
Test(lower_pins, insert_again_keeps_pin)
{
    lp s;
    lp_open_pinned(&s, 8, 0, 0, 2);
    lp_squeeze(&s);
    EXPECT(&s, NULL, {HOST, 2});
    lp_insert(&s, 0, 2);
    EXPECT(&s, "the re-insert keeps the pin, lowered on the device copy; "
               "the host copy is dropped",
           {REVOKED, 0}, {PINS, 1}, {LOWERED, 1}, {DEV_PINNED, 0}, {HOST, 0},
           {ON_DEV, 2});
    cr_assert_eq(lp_on_device(&s, 0, 2), 2 * TP);
    lp_squeeze(&s);
    EXPECT(&s, "down pinned again, no new lowering: it had no lease",
           {HOST, 2}, {DEMOTED, 1}, {ON_DEV, 0});
    lp_insert(&s, 0, 2);
    lp_pin(&s, 0, 2, 1, 50, 10);
    EXPECT(&s, "taken over, not doubled", {PINS, 1}, {LOWERED, 0},
           {DEV_PINNED, 2}, {RENEWED, 1}, {REVOKED, 0});
    tt_close(&s.fx);
}

/* A longer context inserted over lowered pins of several depths (the
 * agentic case: the next turn recomputes the pinned context and more): the
 * new device path is cut where each pin ends, so every pin keeps exactly
 * its own pages; with a disk below the host too. */
static void insert_longer_keeps_pins(uint32_t disk_cap)
{
    static const uint32_t pages[4] = {0, 1, 3, 4}; /* owner o's pin */
    lp s;
    lp_open(&s, 16, 8, disk_cap, 0);
    lp_insert(&s, 0, 6);
    for (uint64_t o = 1; o <= 3; o++)
        lp_pin(&s, 0, pages[o], o, 1000, 0);
    lp_squeeze(&s);
    EXPECT(&s, NULL, {LOWERED, 3}, {LOWER, 4});
    lp_insert(&s, 0, 7);
    EXPECT(&s, NULL, {REVOKED, 0}, {PINS, 3}, {LOWERED, 3});
    cr_assert_eq(lp_cached(&s, 0, 7, NULL), 7 * TP);
    lp_squeeze(&s);
    EXPECT(&s, "each pin holds its own pages, not the whole new path",
           {LOWER, 4});
    lp_insert(&s, 0, 7);
    for (uint64_t o = 1; o <= 3; o++)
        lp_pin(&s, 0, pages[o], o, 50, 10); /* ends on a node: taken over */
    EXPECT(&s, NULL, {PINS, 3}, {LOWERED, 0}, {RENEWED, 3}, {DEV_PINNED, 4},
           {REVOKED, 0});
    tt_close(&s.fx);
}

Test(lower_pins, insert_longer_keeps_pins)
{
    insert_longer_keeps_pins(0);
}

Test(lower_pins, insert_longer_keeps_pins_disk)
{
    insert_longer_keeps_pins(16);
}

/* A lower branch that leaves the insert's path at a node boundary (page 2
 * of sequence 0, where sequence 1 goes its own way) is not overwritten by
 * the insert: it is kept, re-hung under the new device node that ends
 * there, and its pin keeps its pages; so is one that leaves where the
 * lower path ends and the insert goes on with new pages. */
static void insert_keeps_branch(uint32_t disk_cap)
{
    lp s;
    lp_open(&s, 16, 16, disk_cap, 0);
    memcpy(s.tok[1], s.tok[0], 2 * TP * sizeof s.tok[1][0]);
    lp_insert(&s, 0, 4);
    lp_insert(&s, 1, 4); /* [0, 2) -> {seq 0's [2, 4), seq 1's [2, 4)} */
    lp_pin(&s, 1, 4, 1, 1000, 0);
    lp_pin(&s, 0, 3, 2, 1000, 0); /* on the insert's path, ends inside */
    lp_squeeze(&s);
    EXPECT(&s, NULL, {LOWERED, 2}, {LOWER, 5}, {ON_DEV, 0});
    lp_insert(&s, 0, 4); /* seq 0 recomputed */
    EXPECT(&s, "seq 1's branch stays below the new page 2",
           {REVOKED, 0}, {PINS, 2}, {LOWERED, 2}, {LOWER, 2}, {ON_DEV, 3});
    rkv_tier_match tm;
    cr_assert_eq(lp_cached(&s, 1, 4, &tm), 4 * TP);
    cr_assert_eq(tm.lower_tokens, 2 * TP);
    lp_squeeze(&s);
    EXPECT(&s, "all down pinned again", {REVOKED, 0}, {LOWER, 5},
           {ON_DEV, 0});
    /* seq 2 shares only page [0, 2): the lower path ends there, the
     * insert goes on with new pages; seq 1's branch leaves there, seq 0's
     * (unpinned since its owner released it) is dropped as before */
    OK(rkv_tree_pins_release(s.fx.tree, 2, NULL));
    tt_check(&s.fx);
    memcpy(s.tok[2], s.tok[0], 2 * TP * sizeof s.tok[2][0]);
    lp_insert(&s, 2, 6);
    EXPECT(&s, NULL, {REVOKED, 0}, {PINS, 1}, {LOWER, 2}, {ON_DEV, 2});
    cr_assert_eq(lp_cached(&s, 1, 4, NULL), 4 * TP);
    cr_assert_eq(lp_cached(&s, 0, 4, NULL), 2 * TP, "seq 0's rest went");
    tt_close(&s.fx);
}

Test(lower_pins, insert_keeps_branch)
{
    insert_keeps_branch(0);
}

Test(lower_pins, insert_keeps_branch_disk)
{
    insert_keeps_branch(16);
}

/* A re-insert that shares only the start of a lowered pin's prefix does
 * not cover it: its pages leave the tree, the pin is revoked (counted). */
Test(lower_pins, insert_diverging_revokes)
{
    lp s;
    lp_open_pinned(&s, 8, 0, 0, 4);
    lp_squeeze(&s);
    int32_t other[4 * TP];
    memcpy(other, s.tok[0], sizeof other);
    other[2 * TP] += 7; /* page 2 differs */
    lp_insert_toks(&s, other, 4);
    EXPECT(&s, NULL, {REVOKED, 1}, {PINS, 0});
    tt_close(&s.fx);
}

/* More pin ends inside the new path than one insert cuts (13): the pins
 * that would need a further cut are revoked (counted), the others kept.
 * 16-page sequence: a pin ending at each of pages 1..15. */
Test(lower_pins, insert_too_many_cuts_revokes_rest)
{
    lp s;
    lp_open(&s, 2 * LONG_PAGES, 2 * LONG_PAGES, 0, 0);
    int32_t tok[LONG_PAGES * TP];
    for (uint32_t j = 0; j < LONG_PAGES * TP; j++)
        tok[j] = (int32_t)(50000 + j);
    lp_insert_toks(&s, tok, LONG_PAGES);
    for (uint32_t k = 1; k < LONG_PAGES; k++)
        lp_pin_toks(&s, tok, k, k, 1000, 0);
    lp_squeeze(&s);
    EXPECT(&s, NULL, {LOWERED, LONG_PAGES - 1});
    lp_insert_toks(&s, tok, LONG_PAGES);
    EXPECT(&s, NULL, {PINS, 13}, {REVOKED, 2}, {LOWERED, 13});
    tt_close(&s.fx);
}

/* Loaded back, the pin stays lowered and goes down pinned again; a retain
 * by its owner takes it over as a device pin. */
Test(lower_pins, load_back_keeps_pin)
{
    lp s;
    lp_open_pinned(&s, 8, 0, 0, 2);
    lp_squeeze(&s);
    lp_load(&s, 0, 2, RKV_OK);
    EXPECT(&s, "still lowered on the device; write-back", {PINS, 1},
           {LOWERED, 1}, {HOST, 0}, {ON_DEV, 2}, {DEV_PINNED, 0});
    cr_assert_eq(lp_on_device(&s, 0, 2), 2 * TP);
    lp_squeeze(&s);
    EXPECT(&s, "down pinned again, no new lowering: it had no lease",
           {HOST, 2}, {DEMOTED, 1}, {ON_DEV, 0});
    lp_load(&s, 0, 2, RKV_OK);
    lp_pin(&s, 0, 2, 1, 50, 10); /* the owner uses the prefix again */
    EXPECT(&s, "taken over, not doubled", {PINS, 1}, {LOWERED, 0},
           {DEV_PINNED, 2}, {RENEWED, 1}, {MADE, 1}, {ON_DEV, 0});
    OK(rkv_tree_set_time(s.fx.tree, 999));
    EXPECT(&s, "the later deadline (1000) was kept", {PINS, 1});
    OK(rkv_tree_set_time(s.fx.tree, 1000));
    EXPECT(&s, NULL, {PINS, 0});
    tt_close(&s.fx);
}

/* A lowered pin's pages back on the device are evicted again like any
 * unpinned page, but demoted, never dropped, while the pin lives: with
 * unpinned pages in the host they are what the host gives up. Under a host
 * full of pinned pages (max_pinned_pct 100) no slot can be had: the pin is
 * revoked (counted) before its pages go, as on any failed demotion, and
 * the other pins keep theirs. */
Test(lower_pins, lowered_on_device_demoted_again)
{
    lp s;
    lp_open_pct(&s, 8, 4, 0, 0, 100);
    lp_insert(&s, 0, 2);
    lp_pin(&s, 0, 2, 1, 1000, 0);
    lp_insert(&s, 1, 2);
    lp_pin(&s, 1, 2, 2, 1000, 0);
    lp_squeeze(&s);
    EXPECT(&s, "the host is full of pinned pages", {LOWERED, 2}, {HOST, 4},
           {CAP_HOST, 4}, {ON_DEV, 0});
    lp_load(&s, 0, 2, RKV_OK);
    EXPECT(&s, NULL, {HOST, 2}, {ON_DEV, 2}, {DEV_PINNED, 0});
    /* room: the unpinned sequence 2 loses, the pin's pages go down */
    lp_insert(&s, 2, 2);
    lp_squeeze(&s);
    EXPECT(&s, "demoted, pinned again", {HOST, 4}, {ON_DEV, 0},
           {REVOKED, 0}, {LOWERED, 2});
    cr_assert_eq(lp_cached(&s, 0, 2, NULL), 2 * TP);
    cr_assert_eq(lp_cached(&s, 2, 2, NULL), 0);
    /* no room: sequence 3's pin fills the host's other half while
     * sequence 0 is locked on the device */
    lp_load(&s, 0, 2, RKV_OK);
    rkv_match m;
    rkv_lease lease;
    OK(rkv_tree_match(s.fx.tree, 5, s.tok[0], 2 * TP, NULL, 0, &m));
    OK(rkv_tree_lock(s.fx.tree, m.node, &lease));
    lp_insert(&s, 3, 2);
    lp_pin(&s, 3, 2, 3, 1000, 0);
    rkv_block_id b[6];
    OK(rkv_tree_alloc_blocks(s.fx.tree, 6, b));
    OK(rkv_pool_unref_n(s.fx.pool, 6, b));
    OK(rkv_tree_unlock(s.fx.tree, &lease));
    tt_check(&s.fx);
    EXPECT(&s, "sequence 3's pin lowered into the last free slots",
           {LOWERED, 3}, {DEMOTED, 3}, {HOST, 4}, {ON_DEV, 2}, {REVOKED, 0});
    lp_squeeze(&s);
    EXPECT(&s, "no slot: revoked before its pages left", {REVOKED, 1},
           {PINS, 2}, {LOWERED, 2}, {HOST, 4}, {ON_DEV, 0});
    cr_assert_eq(lp_cached(&s, 0, 2, NULL), 0);
    cr_assert_eq(lp_cached(&s, 1, 2, NULL), 2 * TP);
    cr_assert_eq(lp_cached(&s, 3, 2, NULL), 2 * TP);
    tt_close(&s.fx);
}

/* Host over disk: the host writes a pinned node down to the disk (a
 * demotion), the disk's LRU never drops it. */
Test(lower_pins, host_over_disk)
{
    lp s;
    lp_open_full_squeezed(&s, 4, 8, 0);
    lp_rounds(&s, 2, 6);
    rkv_tier_match tm;
    cr_assert_eq(lp_cached(&s, 0, 2, &tm), 2 * TP);
    cr_assert_eq(tm.disk_tokens, 2 * TP, "written down to the disk");
    EXPECT(&s, NULL, {LOWERED, 1}, {REVOKED, 0}, {DISK, 2}, {HOST, 0},
           {CAP_DISK, 4}, {CAP_HOST, 2});
    lp_load(&s, 0, 2, RKV_OK);
    EXPECT(&s, NULL, {DISK, 0});
    tt_close(&s.fx);
}

/* Retain's take-over of a lowered pin allocates nothing new, but a retain
 * that fails for memory changes nothing, lowered pins included. */
Test(lower_pins, oom_retain_with_lowered_pin)
{
    int64_t live0 = rkv_debug_live_tree_allocs_global();
    for (int64_t k = 0; k < 16; k++) {
        lp s;
        lp_open_pinned(&s, 8, 0, 0, 4);
        lp_squeeze(&s);
        lp_load(&s, 0, 4, RKV_OK);
        rkv_retention_stats before = lp_rs(&s);
        rkv_tree_debug_fail_alloc_after(s.fx.tree, k);
        rkv_retention r;
        rkv_retention_init(&r);
        r.pin_tokens = 2 * TP; /* splits the node: allocates */
        r.ttl_ms = 10;
        r.owner = 1;
        rkv_status st = rkv_tree_retain(s.fx.tree, 5, s.tok[0], 4 * TP, &r, 1,
                                        NULL);
        rkv_tree_debug_fail_alloc_after(s.fx.tree, -1);
        tt_check(&s.fx);
        if (st == RKV_ERR_NOMEM) {
            EXPECT(&s, "a failed retain changes nothing",
                   {PINS, before.pins}, {LOWERED, before.pins_lowered});
        } else {
            OK(st);
            EXPECT(&s, NULL, {PINS, 2});
        }
        tt_close(&s.fx);
        cr_assert_eq(rkv_debug_live_tree_allocs_global(), live0);
        if (st == RKV_OK)
            break;
    }
}

/* ---- randomized, against a reference of live pins ------------------------ */

typedef struct rpin {
    uint64_t owner, deadline;
    uint32_t a, pages;
    uint64_t revoked_at_make; /* tree's pins_revoked when made */
    int live;
} rpin;

#define RMAX 256

static uint64_t xs(uint64_t *r)
{
    *r ^= *r << 13;
    *r ^= *r >> 7;
    *r ^= *r << 17;
    return *r;
}

/* shared: sequence a > 0 starts with the first 1 + a % 3 pages of
 * sequence (a - 1) / 2, so inserts meet lower branches that leave their
 * path at node boundaries. */
static void random_run(uint64_t seed, uint32_t host_cap, uint32_t disk_cap,
                       int faults, int shared)
{
    lp s;
    lp_open(&s, 16, host_cap, disk_cap, 0);
    for (uint32_t a = 1; shared && a < NSEQ; a++)
        memcpy(s.tok[a], s.tok[(a - 1) / 2],
               (1 + a % 3) * TP * sizeof s.tok[a][0]);
    rpin ref[RMAX];
    uint32_t nref = 0;
    uint64_t r = seed, now = 0;
    for (int op = 0; op < 1500; op++) {
        uint32_t a = (uint32_t)(xs(&r) % NSEQ);
        uint32_t n = 1 + (uint32_t)(xs(&r) % SEQ_PAGES);
        uint64_t owner = 1 + xs(&r) % 4;
        switch (xs(&r) % 8) {
        case 0:
        case 1: {
            rkv_status st = lp_try_insert(&s, a, n);
            cr_assert(st == RKV_OK || st == RKV_ERR_NO_SPACE, "%s",
                      rkv_last_error());
            break;
        }
        case 2: {
            rkv_retention rt = tu_pin((size_t)n * TP, 1 + xs(&r) % 200, owner);
            rkv_retain_result out;
            uint64_t rev0 = 0;
            {
                rkv_retention_stats rs = lp_rs(&s);
                rev0 = rs.pins_revoked;
            }
            rkv_status st = rkv_tree_retain(s.fx.tree, 5, s.tok[a],
                                            (size_t)n * TP, &rt, now, &out);
            cr_assert(st == RKV_OK || st == RKV_ERR_PIN_CAP, "%s",
                      rkv_last_error());
            /* the reference's time moved with the call */
            for (uint32_t i = 0; i < nref; i++)
                if (ref[i].live && ref[i].deadline <= now)
                    ref[i].live = 0;
            if (st != RKV_OK || out.pinned_pages == 0)
                break;
            uint64_t dl = now + rt.ttl_ms;
            uint32_t i = 0;
            for (; i < nref; i++)
                if (ref[i].live && ref[i].owner == owner &&
                    ref[i].pages == out.pinned_pages &&
                    memcmp(s.tok[ref[i].a], s.tok[a],
                           (size_t)out.pinned_pages * TP *
                               sizeof s.tok[a][0]) == 0)
                    break; /* the same prefix (shared: maybe another a) */
            if (i < nref) {
                if (dl > ref[i].deadline)
                    ref[i].deadline = dl;
                ref[i].revoked_at_make = rev0 < ref[i].revoked_at_make
                                             ? rev0 : ref[i].revoked_at_make;
            } else if (nref < RMAX) {
                ref[nref++] = (rpin){owner, dl, a, out.pinned_pages, rev0, 1};
            }
            break;
        }
        case 3: {
            uint32_t c = 0;
            uint64_t ttl = 1 + xs(&r) % 200;
            OK(rkv_tree_pins_extend(s.fx.tree, owner, ttl, now, &c));
            for (uint32_t i = 0; i < nref; i++) {
                if (ref[i].live && ref[i].deadline <= now)
                    ref[i].live = 0;
                if (ref[i].live && ref[i].owner == owner &&
                    now + ttl > ref[i].deadline)
                    ref[i].deadline = now + ttl;
            }
            break;
        }
        case 4:
            if (xs(&r) % 4 == 0) {
                OK(rkv_tree_pins_release(s.fx.tree, owner, NULL));
                for (uint32_t i = 0; i < nref; i++)
                    if (ref[i].owner == owner)
                        ref[i].live = 0;
            }
            break;
        case 5:
            now += xs(&r) % 40;
            OK(rkv_tree_set_time(s.fx.tree, now));
            for (uint32_t i = 0; i < nref; i++)
                if (ref[i].live && ref[i].deadline <= now)
                    ref[i].live = 0;
            break;
        case 6: {
            rkv_load ld;
            if (faults && xs(&r) % 4 == 0)
                rkv_store_fail_after(s.fx.host, 1 + (uint32_t)(xs(&r) % 3));
            rkv_status st = rkv_tree_load(s.fx.tree, 5, s.tok[a],
                                          (size_t)n * TP, UINT32_MAX, NULL,
                                          &ld);
            cr_assert(st == RKV_OK || st == RKV_ERR_NO_SPACE, "%s",
                      rkv_last_error());
            if (st == RKV_OK && ld.ticket != 0) {
                rkv_transfer_done done;
                uint32_t nd = 0;
                OK(rkv_tree_tier_poll(s.fx.tree, &done, 1, &nd));
                cr_assert_eq(nd, 1);
                OK(rkv_tree_unlock(s.fx.tree, &ld.lease));
            }
            rkv_store_fail_after(s.fx.host, 0);
            break;
        }
        default:
            if (faults && xs(&r) % 3 == 0)
                rkv_store_fail_after(s.fx.host, 1 + (uint32_t)(xs(&r) % 4));
            lp_take_all(&s);
            rkv_store_fail_after(s.fx.host, 0);
            break;
        }
        tt_check(&s.fx);
        /* the reference: the tree never holds more pins than are live, and
         * a live pin's pages are all cached unless some pin was revoked
         * since it was made */
        rkv_retention_stats rs = lp_rs(&s);
        uint64_t live = 0;
        for (uint32_t i = 0; i < nref; i++) {
            if (!ref[i].live)
                continue;
            live++;
            if (rs.pins_revoked == ref[i].revoked_at_make)
                cr_assert_eq(lp_cached(&s, ref[i].a, ref[i].pages, NULL),
                             (size_t)ref[i].pages * TP,
                             "op %d: pin (owner %llu, seq %u, %u pages) lost "
                             "pages with no revocation", op,
                             (unsigned long long)ref[i].owner, ref[i].a,
                             ref[i].pages);
        }
        cr_assert_leq(rs.pins, live, "op %d", op);
        cr_assert_eq(rs.pins, rs.pins_made - rs.pins_expired -
                                  rs.pins_released - rs.pins_revoked,
                     "op %d", op);
        if (rs.pins_revoked == 0 && !faults)
            cr_assert_eq(rs.pins, live, "op %d: no revocation", op);
    }
    rkv_retention_stats rs = lp_rs(&s);
    cr_assert_gt(rs.pins_demoted, 0, "the run lowered pins");
    tt_close(&s.fx);
}

Test(lower_pins, random_host)
{
    for (uint64_t seed = 1; seed <= 4; seed++)
        random_run(seed * 0x9E3779B97F4A7C15ull, 24, 0, 0, 0);
}

Test(lower_pins, random_host_faults)
{
    for (uint64_t seed = 1; seed <= 4; seed++)
        random_run(seed * 0xD1B54A32D192ED03ull, 12, 0, 1, 0);
}

Test(lower_pins, random_host_disk)
{
    for (uint64_t seed = 1; seed <= 3; seed++)
        random_run(seed * 0x94D049BB133111EBull, 8, 24, 0, 0);
}

Test(lower_pins, random_shared_prefixes)
{
    for (uint64_t seed = 1; seed <= 4; seed++) {
        random_run(seed * 0xBF58476D1CE4E5B9ull, 24, 0, 0, 1);
        random_run(seed * 0x2545F4914F6CDD1Dull, 8, 24, 0, 1);
        random_run(seed * 0x9FB21C651E98DF25ull, 12, 0, 1, 1);
    }
}

/* Pressure lowers pins in the order it would revoke them: among equal
 * deadlines the oldest pin first. Sequences 2, 3, 1 are pinned in that
 * order, to expire together; pressure for two pages lowers 2's pin (its
 * pages go to the host), then for two more 3's; 1's stays on the device. */
Test(lower_pins, equal_deadlines_lower_the_oldest_pin_first)
{
    lp s;
    lp_open(&s, 16, 16, 0, 0);
    const uint32_t order[3] = {2, 3, 1};
    for (uint32_t i = 0; i < 3; i++)
        lp_insert(&s, order[i], 2);
    for (uint32_t i = 0; i < 3; i++)
        lp_pin(&s, order[i], 2, 10 + order[i], 1000, 0);
    rkv_block_id b[14];
    /* 10 free: 2 more blocks need one pin's pages */
    OK(rkv_tree_alloc_blocks(s.fx.tree, 12, b));
    tt_check(&s.fx);
    rkv_match m;
    uint32_t dev[4];
    for (uint32_t a = 1; a <= 3; a++) {
        OK(rkv_tree_match(s.fx.tree, 5, s.tok[a], 2 * TP, NULL, RKV_MATCH_PEEK, &m));
        dev[a] = m.num_blocks;
    }
    cr_assert(dev[2] == 0 && dev[3] == 2 && dev[1] == 2,
              "the oldest pin (2) lowered first: device pages %u %u %u", dev[2], dev[3],
              dev[1]);
    OK(rkv_tree_alloc_blocks(s.fx.tree, 2, b + 12));
    tt_check(&s.fx);
    for (uint32_t a = 1; a <= 3; a++) {
        OK(rkv_tree_match(s.fx.tree, 5, s.tok[a], 2 * TP, NULL, RKV_MATCH_PEEK, &m));
        dev[a] = m.num_blocks;
    }
    cr_assert(dev[3] == 0 && dev[1] == 2, "then 3: device pages %u %u", dev[3], dev[1]);
    rkv_retention_stats rs;
    OK(rkv_tree_retention_stats(s.fx.tree, &rs));
    cr_assert_eq(rs.pins, 3, "lowered, not revoked");
    OK(rkv_pool_unref_n(s.fx.pool, 14, b));
    tt_close(&s.fx);
}
