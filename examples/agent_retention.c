/*
 * examples/agent_retention.c -- keeping an agent's context through a tool
 * call with retention (include/radixkv.h, "Retention").
 *
 * An agent (session 42) finishes a turn and calls a tool that takes 40 s.
 * Meanwhile other traffic fills a small cache several times over. The
 * program runs this twice on a fresh tree: once plain (LRU evicts the
 * agent's context; its next turn recomputes it) and once with retention:
 * the turn pins its context for the expected tool time (a cache
 * breakpoint, owned by the session), raises its system prompt's priority,
 * extends the pin when the tool turns out slow, and releases it when the
 * session ends. It then shows the cap: a pin that would take pinned pages
 * past max_pinned_pct is refused with RKV_ERR_PIN_CAP and changes nothing;
 * and expiry: a pin whose deadline passed leaves its pages to eviction.
 *
 * Time is the caller's (now_ms on every call that needs it; the library
 * reads no clock), so the run is deterministic. The pool is metadata-only
 * (num_layers 0): the tree and its retention work the same without KV
 * memory. Exit status: 0 when every expectation held, 1 otherwise.
 */
#include <stdio.h>
#include <string.h>

#include <radixkv.h>

#define EXAMPLE_NAME "agent_retention"
#include "check.h"

enum {
    PAGE = 16,
    BLOCKS = 64,          /* 1,024 tokens of cache                         */
    SYSTEM = 4 * PAGE,    /* the agent's system prompt and tool list       */
    CONTEXT = 24 * PAGE,  /* the agent's whole context after its turn      */
    OTHERS = 40,          /* other requests during the tool call ...       */
    OTHER_LEN = 6 * PAGE, /* ... of 6 pages each (240 pages in all)        */
};

static const rkv_namespace NS = 1;
static const uint64_t SESSION = 42;

/* Tokens of a stream: a deterministic sequence per stream id. */
static void tokens(int32_t *out, size_t n, uint32_t stream)
{
    for (size_t i = 0; i < n; i++)
        out[i] = (int32_t)((stream * 7919u + (uint32_t)i * 104729u) % 30000u) + 1;
}

/* What a request leaves in the cache: its full pages, computed into new
 * blocks (the pool evicts through the tree when short). */
static int cache(rkv_tree *tree, const int32_t *tok, size_t n)
{
    rkv_block_id blocks[BLOCKS];
    uint32_t pages = (uint32_t)(n / PAGE);
    CHECK(rkv_tree_alloc_blocks(tree, pages, blocks));
    CHECK(rkv_tree_insert(tree, NS, tok, n, blocks, NULL, NULL));
    CHECK(rkv_pool_unref_n(rkv_tree_pool(tree), pages, blocks));
    return 0;
}

/* Pages of tok[0..n) still cached (a peek: no recency update). */
static uint32_t cached(rkv_tree *tree, const int32_t *tok, size_t n)
{
    rkv_match m;
    if (rkv_tree_match(tree, NS, tok, n, NULL, RKV_MATCH_PEEK, &m) != RKV_OK)
        return 0;
    return m.num_blocks;
}

/* One run: the agent's turn, 40 s of other traffic, the agent's return.
 * *hit: pages of its context still cached when it comes back. */
static int run(int retain, uint32_t *hit)
{
    rkv_pool_config pc;
    rkv_pool_config_init(&pc);
    pc.num_blocks = BLOCKS;
    pc.page_size = PAGE;
    pc.num_layers = 0;
    rkv_pool *pool = NULL;
    CHECK(rkv_pool_create(&pc, &pool));
    rkv_tree_config tc;
    rkv_tree_config_init(&tc);
    tc.evict_policy = RKV_EVICT_PRIORITY; /* lowest priority, then LRU */
    tc.max_pinned_pct = 50;               /* pins take at most 32 pages */
    rkv_tree *tree = NULL;
    rkv_status st = rkv_tree_create(pool, &tc, &tree);
    if (st != RKV_OK) {
        rkv_pool_destroy(pool);
        return failed("rkv_tree_create", st);
    }
    int32_t ctx[CONTEXT], other[OTHER_LEN];
    tokens(ctx, CONTEXT, 0);
    int bad = cache(tree, ctx, CONTEXT);
    uint64_t now_ms = 1000;

    /* ANCHOR: tool_call */
    if (!bad && retain) {
        /* The turn ended in a tool call, expected back within 30 s: pin
         * the whole context for that long (a cache breakpoint owned by the
         * session) and keep the system prompt longer than other pages. */
        rkv_retention r;
        rkv_retention_init(&r);
        r.pin_tokens = CONTEXT;
        r.ttl_ms = 30000;
        r.owner = SESSION;
        r.priority = 90;
        r.prio_begin = 0;
        r.prio_end = SYSTEM;
        rkv_retain_result got;
        st = rkv_tree_retain(tree, NS, ctx, CONTEXT, &r, now_ms, &got);
        if (st == RKV_ERR_PIN_CAP) /* too much pinned: go on unpinned */
            fprintf(stderr, "pin refused: %s\n", rkv_last_error());
        else if (st != RKV_OK)
            bad = failed("rkv_tree_retain", st);
    }
    for (int i = 0; i < OTHERS && !bad; i++) {
        now_ms += 1000; /* one request a second while the tool runs */
        bad = rkv_tree_set_time(tree, now_ms) != RKV_OK; /* pins expire */
        tokens(other, OTHER_LEN, 100 + (uint32_t)i);
        bad = bad || cache(tree, other, OTHER_LEN);
        /* At 25 s the tool is still busy: push the deadline out. */
        if (!bad && retain && now_ms == 26000 &&
            (st = rkv_tree_pins_extend(tree, SESSION, 30000, now_ms, NULL)) !=
                RKV_OK)
            bad = failed("rkv_tree_pins_extend", st);
    }
    /* 40 s later the tool result is back: the next turn's prompt starts
     * with the whole context. */
    *hit = cached(tree, ctx, CONTEXT);
    /* The agent finished its task: the session's pins go. */
    if (!bad && retain &&
        (st = rkv_tree_pins_release(tree, SESSION, NULL)) != RKV_OK)
        bad = failed("rkv_tree_pins_release", st);
    /* ANCHOR_END: tool_call */

    if (!bad && retain) {
        /* The cap: session 7 asks to pin 40 pages, more than the 32 the
         * pool allows. Refused, nothing pinned. */
        int32_t big[40 * PAGE];
        tokens(big, 40 * PAGE, 7);
        bad = cache(tree, big, 40 * PAGE);
        rkv_retention r;
        rkv_retention_init(&r);
        r.pin_tokens = 40 * PAGE;
        r.ttl_ms = 5000;
        r.owner = 7;
        st = bad ? RKV_OK
                 : rkv_tree_retain(tree, NS, big, 40 * PAGE, &r, now_ms, NULL);
        rkv_retention_stats rs;
        if (!bad && (st != RKV_ERR_PIN_CAP ||
                     rkv_tree_retention_stats(tree, &rs) != RKV_OK ||
                     rs.pins != 0 || rs.pinned_blocks != 0)) {
            fprintf(stderr, "agent_retention: a pin past the cap was not "
                            "refused cleanly\n");
            bad = 1;
        }
        /* Expiry: a 1 s pin on 8 pages is gone 2 s later. */
        r.pin_tokens = 8 * PAGE;
        r.ttl_ms = 1000;
        if (!bad && (st = rkv_tree_retain(tree, NS, big, 8 * PAGE, &r,
                                          now_ms, NULL)) != RKV_OK)
            bad = failed("rkv_tree_retain", st);
        if (!bad && (rkv_tree_set_time(tree, now_ms + 2000) != RKV_OK ||
                     rkv_tree_retention_stats(tree, &rs) != RKV_OK ||
                     rs.pins != 0 || rs.pins_expired != 1)) {
            fprintf(stderr, "agent_retention: the 1 s pin did not expire\n");
            bad = 1;
        }
    }
    if (!bad && (st = rkv_tree_check(tree)) != RKV_OK)
        bad = failed("rkv_tree_check", st);
    rkv_tree_destroy(tree);
    rkv_pool_destroy(pool);
    return bad;
}

int main(void)
{
    uint32_t plain = 0, kept = 0;
    if (run(0, &plain) || run(1, &kept))
        return 1;
    printf("agent context after a 40 s tool call under other traffic: "
           "%u of %u pages cached with LRU alone, %u with a TTL pin\n",
           plain, CONTEXT / PAGE, kept);
    if (kept != CONTEXT / PAGE || plain >= kept) {
        fprintf(stderr, "agent_retention: expected the pin to keep all %u "
                        "pages and LRU to lose some\n", CONTEXT / PAGE);
        return 1;
    }
    return 0;
}
