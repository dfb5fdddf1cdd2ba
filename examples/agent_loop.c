/*
 * examples/agent_loop.c -- an agentic server loop on the tree API.
 *
 * Four agents share a system prompt (their tool descriptions) and each
 * works on its own task, turn after turn: the prompt of a turn is the whole
 * conversation so far (system prompt, task, every earlier model output and
 * tool result), so nearly all of it was computed by the previous turn.
 * Every three turns each agent starts a new task. The agents' turns of a
 * round run as one batch. Per turn the loop does what a server embedding
 * radixkv does:
 *
 *   match    the longest cached prefix of the prompt;
 *   lock     it (a lease), so eviction cannot take it while the turn runs;
 *   alloc    blocks for the rest of the turn's KV, rounded up to whole
 *            pages (rkv_tree_alloc_blocks evicts unlocked LRU prefixes when
 *            the pool is short);
 *   compute  the uncached part of the prompt and the output (here a stand-
 *            in for the model: the output is a hash of the context);
 *   insert   the prompt + output whose KV now exists;
 *   release  this turn's own block references, every one exactly once;
 *   unlock   the lease.
 *
 * It prints the hit rate of every turn, checks every status, and after
 * every turn verifies the tree and the pool and that the pool holds nothing
 * but the tree's pages (no reference leaked, none released twice). The
 * first round shows duplicates (four turns compute the same system prompt
 * at once); the pool is deliberately small, so new tasks evict old ones;
 * in turn 5 one agent's turn is interrupted before the model runs and
 * given up (turn_release without an insert), and asked again in turn 6.
 * Exit status: 0 when everything held, 1 otherwise.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <radixkv.h>

#define EXAMPLE_NAME "agent_loop"
#include "check.h"

enum {
    NUM_AGENTS = 4,
    NUM_TURNS = 6,
    TASK_TURNS = 3,   /* an agent starts a new task every 3 turns        */
    SYSTEM_LEN = 70,  /* tokens of the shared system prompt             */
    TASK_LEN = 20,    /* tokens of agent 0's task; agent a's: + 5a      */
    OUTPUT_LEN = 12,  /* tokens the model generates per turn             */
    TOOL_LEN = 15,    /* tokens a tool call returns, appended per turn   */
    INTERRUPT_TURN = 5, /* in this turn ...                              */
    INTERRUPT_AGENT = 1, /* ... this agent's turn is given up            */
    MAX_CONTEXT = SYSTEM_LEN + TASK_LEN + 5 * (NUM_AGENTS - 1) +
                  (TASK_TURNS + 1) * (OUTPUT_LEN + TOOL_LEN)
};

/* One tenant: agents share hits with each other, not with other tenants. */
static const rkv_namespace TENANT = 7;

/* A deterministic token in 1..31999 for (stream, index). */
static int32_t token_at(uint64_t stream, uint64_t i)
{
    uint64_t z = stream * 0x9E3779B97F4A7C15ull + i + 1;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (int32_t)((z ^ (z >> 31)) % 31999u) + 1;
}

/* The model stand-in: writes n output tokens after the n_ctx context
 * tokens (a real server runs the model over ctx[from..n_ctx) here, writing
 * their K and V into the turn's blocks, then decodes the output). */
static void compute(int32_t *ctx, size_t n_ctx, size_t from, size_t n)
{
    (void)from;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n_ctx; i++)
        h = (h ^ (uint32_t)ctx[i]) * 1099511628211ull;
    for (size_t i = 0; i < n; i++)
        ctx[n_ctx + i] = token_at(h, i);
}

/* One agent's turn in flight. */
typedef struct turn {
    int32_t *ctx;          /* the prompt, then room for the output       */
    size_t n_prompt, n_out;
    rkv_block_id *blocks;  /* the turn's block table (room for its KV)   */
    rkv_block_id *dups;
    rkv_match m;
    rkv_lease lease;
    uint32_t own;          /* blocks[m.num_blocks ..] hold our reference */
    uint32_t dup_blocks;
} turn;

/* ANCHOR: turn */
/* Before the model runs: reuse the cached prefix and get blocks for the
 * rest. On failure the turn holds nothing. */
static int turn_begin(rkv_tree *tree, turn *t)
{
    const size_t P = rkv_pool_page_size(rkv_tree_pool(tree));
    /* The turn's KV: the prompt and every output token but the last, which
     * is sampled and never run through the model. */
    const size_t n_kv = t->n_prompt + t->n_out - 1;
    const uint32_t pages = (uint32_t)((n_kv + P - 1) / P); /* rounded up */

    /* Match at most n_prompt - 1 tokens: the last prompt token must run to
     * give the first output token. blocks[0 .. m.num_blocks) are then the
     * tree's pages: the turn holds no reference on them ... */
    CHECK(rkv_tree_match(tree, TENANT, t->ctx, t->n_prompt - 1, t->blocks, 0,
                         &t->m));
    /* ... so it locks them: a lease keeps the path from eviction. */
    CHECK(rkv_tree_lock(tree, t->m.node, &t->lease));

    /* One reference each on new blocks for the rest, the partial last page
     * included; evicts unlocked LRU prefixes if the pool is short. */
    t->own = pages - t->m.num_blocks;
    rkv_status st = rkv_tree_alloc_blocks(tree, t->own,
                                          t->blocks + t->m.num_blocks);
    if (st != RKV_OK) {
        (void)rkv_tree_unlock(tree, &t->lease);
        return failed("rkv_tree_alloc_blocks", st);
    }
    return 0;
}

/* Drops the turn's own reference on each block it allocated, once, and
 * releases the lease. After an insert a kept block lives on with the
 * tree's reference; duplicates and the partial last page are freed. (The
 * duplicates are among these blocks; releasing them again would drop a
 * reference the turn does not hold.) A turn given up before its insert
 * calls this alone: nothing is cached and its own blocks are freed.
 * Matched blocks need nothing either way. */
static int turn_release(rkv_tree *tree, turn *t)
{
    rkv_status rel = rkv_pool_unref_n(rkv_tree_pool(tree), t->own,
                                      t->blocks + t->m.num_blocks);
    rkv_status unl = rkv_tree_unlock(tree, &t->lease);
    if (rel != RKV_OK)
        return failed("rkv_pool_unref_n", rel);
    if (unl != RKV_OK)
        return failed("rkv_tree_unlock", unl);
    return 0;
}

/* After the model ran: cache what it computed, release, unlock. */
static int turn_end(rkv_tree *tree, turn *t)
{
    /* The tree takes its own reference on each block it keeps. A page that
     * is cached already under another block (another turn computed it at
     * the same time) is a duplicate: the tree keeps its block, lists ours
     * in dups and takes nothing on it. */
    rkv_insert_result ins;
    rkv_status st = rkv_tree_insert(tree, TENANT, t->ctx,
                                    t->n_prompt + t->n_out - 1, t->blocks,
                                    t->dups, &ins);
    t->dup_blocks = st == RKV_OK ? ins.num_dups : 0;
    int rc = turn_release(tree, t);
    if (st != RKV_OK)
        return failed("rkv_tree_insert", st);
    return rc;
}
/* ANCHOR_END: turn */

/* Every block in use is a tree page: the loop holds no reference between
 * turns. */
static int verify(rkv_tree *tree)
{
    rkv_pool *pool = rkv_tree_pool(tree);
    CHECK(rkv_tree_check(tree));
    CHECK(rkv_pool_check(pool));
    rkv_tree_stats ts;
    CHECK(rkv_tree_get_stats(tree, &ts));
    uint32_t used = rkv_pool_num_blocks(pool) - rkv_pool_num_free(pool);
    if (used != ts.cached_blocks || ts.locked_blocks != 0) {
        fprintf(stderr,
                "agent_loop: %u blocks in use but the tree caches %" PRIu64
                " (%" PRIu64 " locked): a reference leaked\n",
                used, ts.cached_blocks, ts.locked_blocks);
        return 1;
    }
    return 0;
}

/* Every round runs one turn of every agent as one batch, as a server
 * would: all begin, the model runs, all end. */
static int run(rkv_tree *tree, rkv_block_id *tables, size_t table)
{
    static int32_t ctx[NUM_AGENTS][MAX_CONTEXT];
    size_t len[NUM_AGENTS];
    turn turns[NUM_AGENTS];
    for (int a = 0; a < NUM_AGENTS; a++) {
        for (size_t i = 0; i < SYSTEM_LEN; i++)
            ctx[a][i] = token_at(0, i); /* the same for every agent */
        memset(&turns[a], 0, sizeof turns[a]);
        turns[a].ctx = ctx[a];
        turns[a].n_out = OUTPUT_LEN;
        turns[a].blocks = tables + (size_t)(2 * a) * table;
        turns[a].dups = tables + (size_t)(2 * a + 1) * table;
    }
    printf("turn  agent  prompt  cached  hit rate  computed  dups\n");
    for (int r = 0; r < NUM_TURNS; r++) {
        size_t prompt_sum = 0, cached_sum = 0;
        if (r % TASK_TURNS == 0) { /* new tasks: only the system prompt is
                                      shared with what is cached */
            for (int a = 0; a < NUM_AGENTS; a++) {
                size_t task = TASK_LEN + 5 * (size_t)a;
                for (size_t i = 0; i < task; i++)
                    ctx[a][SYSTEM_LEN + i] =
                        token_at(1000 + (uint64_t)(a * 100 + r), i);
                len[a] = SYSTEM_LEN + task;
            }
        }
        for (int a = 0; a < NUM_AGENTS; a++) {
            turns[a].n_prompt = len[a];
            if (turn_begin(tree, &turns[a]) != 0) {
                while (a-- > 0) /* give back the turns already begun */
                    (void)turn_release(tree, &turns[a]);
                return 1;
            }
        }
        /* once, the user interrupts an agent before its model runs: the
         * turn is given up and asked again next round */
        const int stopped = r == INTERRUPT_TURN - 1 ? INTERRUPT_AGENT : -1;
        int rc = 0;
        for (int a = 0; a < NUM_AGENTS; a++) {
            if (a == stopped) {
                rc |= turn_release(tree, &turns[a]);
                continue;
            }
            compute(ctx[a], len[a], turns[a].m.matched_tokens, OUTPUT_LEN);
            rc |= turn_end(tree, &turns[a]);
        }
        if (rc != 0 || verify(tree) != 0)
            return 1;
        for (int a = 0; a < NUM_AGENTS; a++) {
            const turn *t = &turns[a];
            size_t cached = t->m.matched_tokens;
            printf("%4d  %5d  %6zu  %6zu  %7.1f%%  ", r + 1, a, t->n_prompt,
                   cached, 100.0 * (double)cached / (double)t->n_prompt);
            prompt_sum += t->n_prompt;
            cached_sum += cached;
            if (a == stopped) {
                printf("interrupted\n");
                continue;
            }
            printf("%8zu  %4u\n", t->n_prompt + t->n_out - 1 - cached,
                   t->dup_blocks);
            /* the output joins the context, and a tool answers it */
            len[a] += OUTPUT_LEN;
            for (size_t i = 0; i < TOOL_LEN; i++)
                ctx[a][len[a] + i] =
                    token_at(2000 + (uint64_t)(a * 100 + r), i);
            len[a] += TOOL_LEN;
        }
        printf("turn %d: hit rate %.1f%% (%zu of %zu prompt tokens cached)\n",
               r + 1, 100.0 * (double)cached_sum / (double)prompt_sum,
               cached_sum, prompt_sum);
    }
    rkv_tree_stats ts;
    CHECK(rkv_tree_get_stats(tree, &ts));
    printf("overall: %.1f%% of %" PRIu64 " looked-up tokens cached; %" PRIu64
           " pages evicted, %" PRIu64 " cached at the end\n",
           100.0 * (double)ts.hit_tokens / (double)ts.queried_tokens,
           ts.queried_tokens, ts.evicted_blocks, ts.cached_blocks);
    return 0;
}

int main(void)
{
    rkv_pool_config pc;
    rkv_pool_config_init(&pc);
    pc.num_blocks = 32;  /* too few for old tasks' history: evicts    */
    pc.page_size = 16;
    pc.num_layers = 0;   /* metadata only: this example runs no model */
    rkv_pool *pool = NULL;
    rkv_tree *tree = NULL;
    rkv_status st = rkv_pool_create(&pc, &pool);
    if (st != RKV_OK)
        return failed("rkv_pool_create", st);
    st = rkv_tree_create(pool, NULL, &tree);
    if (st != RKV_OK) {
        rkv_pool_destroy(pool);
        return failed("rkv_tree_create", st);
    }
    /* a block table and a duplicate list per agent, for its longest turn
     * at the pool's page size */
    size_t table = MAX_CONTEXT / rkv_pool_page_size(pool) + 1;
    rkv_block_id *tables = malloc(2 * NUM_AGENTS * table * sizeof *tables);
    int rc = 1;
    if (tables == NULL)
        fprintf(stderr, "agent_loop: out of memory\n");
    else
        rc = run(tree, tables, table);
    free(tables);
    rkv_tree_destroy(tree); /* drops the tree's references */
    if (rc == 0 && rkv_pool_num_free(pool) != rkv_pool_num_blocks(pool)) {
        fprintf(stderr, "agent_loop: %u blocks still held after the tree\n",
                rkv_pool_num_blocks(pool) - rkv_pool_num_free(pool));
        rc = 1;
    }
    rkv_pool_destroy(pool);
    return rc;
}
