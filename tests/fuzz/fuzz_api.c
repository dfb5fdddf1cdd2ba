/*
 * tests/fuzz/fuzz_api.c -- libFuzzer harness: random sequences of public
 * API calls over one pool, its tree and a scheduler, decoded from the
 * input, as an embedding server that shares the tree with the scheduler
 * would make them (its own blocks, inserts, matches, locks, evictions,
 * resets, next to the scheduler's submit / step / commit / abort).
 *
 * Out-of-memory injection (sched/sched_debug.h, radix/tree_debug.h) is one
 * of the operations, so failure paths run too.
 *
 * Input: 4 bytes of configuration (pool size and page, whether the tree
 * stores 3-byte token ids -- then every id is near 2^24 and a prompt may
 * hold 2^24, refused --, policy and budgets), then operations of one opcode byte plus the bytes it reads
 * (reading past the end gives zeros, so every input is a valid program).
 *
 * The harness is an honest caller: it releases only leases it took, unrefs
 * only references it holds, gives only blocks it holds to insert; its only
 * misuse is what the library can detect (op_misuse): free blocks, a commit
 * with no plan, a second tree on the pool, and leases that are not held --
 * all-zero, already released, or from another tree (never a guessed id: a
 * guess could name a live lease, which is indistinguishable from holding
 * it). What must hold:
 *   - no call returns RKV_ERR_CORRUPT, and rkv_pool_check, rkv_tree_check
 *     and rkv_sched_check pass after every call;
 *   - a lease the harness took releases exactly once (and is zeroed); a
 *     lease not held is RKV_ERR_STATE and changes nothing;
 *   - every batch plan is well formed: at most max_running requests and
 *     max_batch_tokens tokens, distinct live request ids, monotone CSR
 *     arrays, last page lengths in 1..page_size, KV length = prefix +
 *     new tokens, every block of every table allocated, every slot the
 *     right position of its own table, slots distinct across the plan,
 *     written blocks referenced once (only the writer holds them), input
 *     tokens non-negative;
 *   - after the harness drops what it holds and destroys scheduler and
 *     tree, every block of the pool is free.
 * Any violation aborts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "radix/tree_debug.h"
#include "radixkv.h"
#include "tests/fuzz/fuzz_die.h"
#include "tests/fuzz/fuzz_input.h"
#include "sched/sched_debug.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_HELD 64u    /* block references the harness holds          */
#define MAX_NODES 32u   /* node handles it remembers                   */
#define MAX_LOCKS 16u   /* locks it holds                              */
#define MAX_IDS 16u     /* request ids 0..MAX_IDS-1                    */
#define MAX_TOKENS 48u  /* prompt / key length                         */
#define MAX_OPS 400u

typedef struct world {
    rkv_pool *pool;
    rkv_tree *tree;
    rkv_sched *sched;
    rkv_sched_config cfg;
    uint32_t P, nblocks;
    rkv_block_id held[MAX_HELD];
    uint32_t nheld;
    rkv_node nodes[MAX_NODES];
    uint32_t nnodes;
    rkv_lease locks[MAX_LOCKS];
    uint32_t nlocks;
    rkv_lease released[MAX_LOCKS]; /* copies of leases released already */
    uint32_t nreleased;
    rkv_pool *pool2;       /* a second pool and tree, holding one lease:  */
    rkv_tree *tree2;       /* its lease is "from another tree" here       */
    rkv_lease lease2;
    rkv_block_id block2;
    uint8_t live[MAX_IDS]; /* submitted and not finished / aborted       */
    uint32_t stamp[MAX_IDS];  /* submissions of the id so far           */
    uint32_t max_new[MAX_IDS], gen[MAX_IDS];
    uint32_t plan_stamp[MAX_IDS]; /* stamp of each pending plan request */
    const rkv_batch_plan *plan; /* awaiting commit, or NULL             */
    uint32_t op;           /* for messages                              */
} world;

#define die(w, ...) fuzz_die("fuzz_api", &(w)->op, __VA_ARGS__)

static void check_all(const world *w, const char *what)
{
    if (rkv_pool_check(w->pool) != RKV_OK)
        die(w, "%s: rkv_pool_check", what);
    if (rkv_tree_check(w->tree) != RKV_OK)
        die(w, "%s: rkv_tree_check", what);
    if (rkv_sched_check(w->sched) != RKV_OK)
        die(w, "%s: rkv_sched_check", what);
}

#include "tests/fuzz/fuzz_world.h"

/* The scheduler and the harness agree on how many requests are live. */
static void check_model(const world *w)
{
    rkv_sched_stats st;
    if (rkv_sched_get_stats(w->sched, &st) != RKV_OK)
        die(w, "get_stats");
    uint64_t live = 0;
    for (uint32_t id = 0; id < MAX_IDS; id++)
        live += w->live[id];
    if (st.waiting + st.running != live)
        die(w, "scheduler has %llu waiting + %llu running, harness %llu live",
            (unsigned long long)st.waiting, (unsigned long long)st.running,
            (unsigned long long)live);
}

/* Tokens from a tiny alphabet, so prompts and keys share prefixes. */
/* The tree of this input stores 3-byte ids (rkv_tree_config.token_bytes):
 * letters are then ids just below 2^24. */
static int g_tok3;

static int32_t letter(uint32_t v)
{
    return g_tok3 ? (int32_t)(0xffffffu - v) : (int32_t)v;
}

static uint32_t get_tokens(in *s, int32_t *t, uint32_t min)
{
    uint32_t n = min + below(s, MAX_TOKENS - min + 1);
    uint8_t alpha = get8(s) % 4 + 1;
    for (uint32_t i = 0; i < n; i++)
        t[i] = letter(get8(s) % alpha);
    return n;
}

static void hold(world *w, rkv_block_id b)
{
    if (w->nheld >= MAX_HELD)
        die(w, "harness: too many held blocks");
    w->held[w->nheld++] = b;
}

/* ---- the plan ------------------------------------------------------------ */

static void validate_plan(world *w, const rkv_batch_plan *p)
{
    const uint32_t P = w->P;
    if (p->num_reqs == 0)
        return;
    if (p->num_reqs > w->cfg.max_running || p->num_reqs > MAX_IDS)
        die(w, "plan of %u requests", p->num_reqs);
    if (p->num_tokens > w->cfg.max_batch_tokens || p->num_prefill > p->num_reqs)
        die(w, "plan of %u tokens, %u prefills", p->num_tokens,
            p->num_prefill);
    if (p->qo_indptr[0] != 0 || p->kv_indptr[0] != 0 ||
        p->qo_indptr[p->num_reqs] != p->num_tokens)
        die(w, "plan CSR ends");
    uint32_t nslots = (uint32_t)w->nblocks * P;
    uint8_t *seen = calloc(nslots, 1);
    if (seen == NULL)
        die(w, "harness: out of memory");
    for (uint32_t r = 0; r < p->num_reqs; r++) {
        uint64_t id = p->req_ids[r];
        if (id >= MAX_IDS || !w->live[id])
            die(w, "plan names request %llu which is not live",
                (unsigned long long)id);
        for (uint32_t k = 0; k < r; k++)
            if (p->req_ids[k] == id)
                die(w, "request %llu twice in a plan", (unsigned long long)id);
        uint32_t q0 = p->qo_indptr[r], q1 = p->qo_indptr[r + 1];
        uint32_t k0 = p->kv_indptr[r], k1 = p->kv_indptr[r + 1];
        if (q1 <= q0 || q1 > p->num_tokens || k1 <= k0)
            die(w, "request %u: rows [%u, %u) pages [%u, %u)", r, q0, q1, k0,
                k1);
        if (r >= p->num_prefill && q1 - q0 != 1)
            die(w, "decode row of %u tokens", q1 - q0);
        uint32_t last = p->kv_last_page_len[r];
        if (last < 1 || last > P)
            die(w, "request %u: last page length %u", r, last);
        uint64_t kv = (uint64_t)(k1 - k0 - 1) * P + last;
        if (kv != (uint64_t)p->prefix_len[r] + (q1 - q0))
            die(w, "request %u: KV %llu != prefix %u + %u new", r,
                (unsigned long long)kv, p->prefix_len[r], q1 - q0);
        if (p->cached_len[r] > p->prefix_len[r])
            die(w, "request %u: cached %u > prefix %u", r, p->cached_len[r],
                p->prefix_len[r]);
        for (uint32_t k = k0; k < k1; k++) {
            rkv_block_id b = p->kv_indices[k];
            if (b >= w->nblocks || rkv_pool_refcount(w->pool, b) == 0)
                die(w, "request %u: table names block %u, not allocated", r,
                    b);
        }
        for (uint32_t row = q0; row < q1; row++) {
            uint32_t pos = p->prefix_len[r] + (row - q0);
            rkv_block_id b = p->kv_indices[k0 + pos / P];
            if (p->slots[row] != b * P + pos % P)
                die(w, "request %u row %u: slot %u, its table says %u", r,
                    row, p->slots[row], b * P + pos % P);
            if (seen[p->slots[row]]++)
                die(w, "slot %u written twice in one plan", p->slots[row]);
            if (rkv_pool_refcount(w->pool, b) != 1)
                die(w, "request %u writes block %u with %u references", r, b,
                    rkv_pool_refcount(w->pool, b));
            if (p->input_tokens[row] < 0 ||
                (g_tok3 && p->input_tokens[row] >= (1 << 24)))
                die(w, "input token %d the tree cannot store",
                    p->input_tokens[row]);
        }
    }
    free(seen);
}

/* The harness's own model of which requests are live: a request ends at
 * the commit that samples its last token (max_new_tokens) or is told it
 * finished; a request aborted (and maybe resubmitted) after the step is
 * skipped by the commit, which the submission stamp tells apart. */
static void commit(world *w, in *s)
{
    const rkv_batch_plan *p = w->plan;
    int32_t next[MAX_IDS];
    uint8_t fin[MAX_IDS];
    for (uint32_t r = 0; r < p->num_reqs; r++) {
        next[r] = letter(get8(s) % 4);
        fin[r] = get8(s) < 24;
    }
    uint64_t ids[MAX_IDS];
    uint8_t emits[MAX_IDS];
    uint32_t n = p->num_reqs;
    for (uint32_t r = 0; r < n; r++) {
        ids[r] = p->req_ids[r];
        emits[r] = p->emits_token[r];
    }
    rkv_status st = called(w, rkv_sched_commit(w->sched, next, fin, w->op),
                           "commit");
    if (st != RKV_OK)
        die(w, "commit of a valid plan: %s", rkv_strerror(st));
    w->plan = NULL;
    for (uint32_t r = 0; r < n; r++) {
        uint64_t id = ids[r];
        if (!w->live[id] || w->stamp[id] != w->plan_stamp[r] || !emits[r])
            continue;
        w->gen[id]++;
        if (fin[r] || w->gen[id] >= w->max_new[id])
            w->live[id] = 0;
    }
}

/* ---- operations ------------------------------------------------------------ */

static void op_submit(world *w, in *s)
{
    int32_t t[MAX_TOKENS];
    uint32_t id = below(s, MAX_IDS);
    rkv_request_desc d;
    memset(&d, 0, sizeof d);
    d.id = id;
    d.ns = get8(s) % 2;
    d.prompt = t;
    d.prompt_len = get_tokens(s, t, 0);
    d.max_new_tokens = below(s, 12);
    d.priority = (int32_t)below(s, 5) - 2;
    d.arrival_ms = w->op;
    uint8_t bad = get8(s);
    if (bad == 255 && d.prompt_len > 0)
        t[0] = -1; /* a bad token: refused */
    if (bad == 254 && d.prompt_len > 0)
        t[0] = 1 << 24; /* refused by a 3-byte tree, fine in another */
    rkv_status st = called(w, rkv_sched_submit(w->sched, &d), "submit");
    if (st == RKV_OK) {
        if (w->live[id])
            die(w, "submit accepted live id %u", id);
        w->live[id] = 1;
        w->stamp[id]++;
        w->max_new[id] = d.max_new_tokens;
        w->gen[id] = 0;
    } else if (st == RKV_ERR_DUPLICATE && !w->live[id]) {
        die(w, "submit refused id %u as live", id);
    }
}

static void op_step(world *w, in *s)
{
    if (w->plan != NULL) {
        const rkv_batch_plan *p2;
        rkv_status st = called(w, rkv_sched_step(w->sched, w->op, &p2),
                               "second step");
        if (st != RKV_ERR_STATE)
            die(w, "a step while a plan awaits commit: %s",
                rkv_strerror(st));
        commit(w, s);
        return;
    }
    const rkv_batch_plan *p = NULL;
    rkv_status st = called(w, rkv_sched_step(w->sched, w->op, &p), "step");
    if (st != RKV_OK)
        return; /* NOMEM (injected): no plan, nothing changed */
    validate_plan(w, p);
    if (p->num_reqs > 0)
        w->plan = p;
    for (uint32_t r = 0; r < p->num_reqs; r++)
        w->plan_stamp[r] = w->stamp[p->req_ids[r]];
    if (w->plan != NULL && get8(s) < 192)
        commit(w, s); /* else commit later: other calls come in between */
}

static void op_abort(world *w, in *s)
{
    uint32_t id = below(s, MAX_IDS);
    rkv_status st = called(w, rkv_sched_abort(w->sched, id), "abort");
    if ((st == RKV_OK) != w->live[id])
        die(w, "abort of %s id %u: %s", w->live[id] ? "live" : "unknown", id,
            rkv_strerror(st));
    w->live[id] = 0;
    /* a pending plan stays valid for commit (abort's contract) */
}

static void op_alloc(world *w, in *s)
{
    uint32_t n = 1 + below(s, 4);
    if (w->nheld + n > MAX_HELD)
        return;
    rkv_block_id b[4];
    int evicting = get8(s) & 1;
    rkv_status st = evicting ? rkv_tree_alloc_blocks(w->tree, n, b)
                             : rkv_pool_alloc_n(w->pool, n, b);
    st = called(w, st, evicting ? "tree_alloc_blocks" : "pool_alloc_n");
    if (st == RKV_OK)
        for (uint32_t i = 0; i < n; i++)
            hold(w, b[i]);
}

static void op_ref_unref(world *w, in *s)
{
    if (w->nheld == 0)
        return;
    uint32_t i = below(s, w->nheld);
    if (get8(s) & 1) {
        if (w->nheld >= MAX_HELD)
            return;
        called(w, rkv_pool_ref(w->pool, w->held[i]), "ref");
        hold(w, w->held[i]);
    } else {
        drop_held(w, i);
    }
}

static void op_insert(world *w, in *s)
{
    int32_t t[MAX_TOKENS];
    uint64_t ns = get8(s) % 2;
    uint32_t n = get_tokens(s, t, 1);
    uint32_t pages = n / w->P;
    if (w->nheld == 0 || pages > w->nheld || pages > MAX_TOKENS)
        return;
    /* the harness's own blocks, distinct or not as the input says (a
     * repeated block is refused) */
    rkv_block_id b[MAX_TOKENS], dups[MAX_TOKENS];
    uint32_t first = below(s, w->nheld);
    for (uint32_t i = 0; i < pages; i++)
        b[i] = w->held[(first + i) % w->nheld];
    rkv_insert_result res;
    rkv_status st = called(w, rkv_tree_insert(w->tree, ns, t, n, b, dups,
                                              &res), "insert");
    if (st == RKV_OK)
        remember_node(w, res.node);
}

static void op_match(world *w, in *s)
{
    int32_t t[MAX_TOKENS];
    rkv_block_id b[MAX_TOKENS];
    uint64_t ns = get8(s) % 3;
    uint32_t n = get_tokens(s, t, 0);
    unsigned flags = get8(s) & 1 ? RKV_MATCH_PEEK : 0;
    rkv_match m;
    rkv_status st = called(w, rkv_tree_match(w->tree, ns, t, n, b, flags, &m),
                           "match");
    if (st == RKV_OK) {
        check_allocated(w, b, m.num_blocks, "match");
        remember_node(w, m.node);
    }
}

static void op_lock(world *w, in *s)
{
    rkv_lease l;
    if (lock_some_node(w, s, &l))
        w->locks[w->nlocks++] = l;
}

static void op_unlock(world *w, in *s)
{
    if (w->nlocks == 0)
        return;
    uint32_t i = below(s, w->nlocks);
    rkv_lease copy = w->locks[i];
    rkv_status st = called(w, rkv_tree_unlock(w->tree, &w->locks[i]),
                           "unlock");
    if (st != RKV_OK)
        die(w, "unlock of a lease the harness holds: %s", rkv_strerror(st));
    if (w->locks[i].id != 0)
        die(w, "unlock did not zero the lease");
    w->released[w->nreleased++ % MAX_LOCKS] = copy;
    w->locks[i] = w->locks[--w->nlocks];
}

static void op_evict(world *w, in *s)
{
    uint32_t freed = 0;
    called(w, rkv_tree_evict(w->tree, below(s, 8), &freed), "evict");
}

static void op_reset(world *w, in *s)
{
    (void)s;
    rkv_status st = called(w, rkv_tree_reset(w->tree), "reset");
    if (st == RKV_OK && w->nlocks > 0)
        die(w, "reset succeeded with %u locks held", w->nlocks);
}

static void op_info(world *w, in *s)
{
    if (w->nnodes == 0)
        return;
    rkv_node_info info;
    rkv_node n = w->nodes[below(s, w->nnodes)];
    if (get8(s) == 0)
        n.gen ^= 1; /* a forged handle */
    called(w, rkv_tree_node_info(w->tree, n, &info), "node_info");
}

/* Out of memory: one of the next few allocations of the scheduler or of
 * the tree fails (the test-only injection; per thread for the scheduler,
 * per tree for the tree). Whatever call meets it must fail with NOMEM --
 * or absorb it where that is documented -- and leave everything
 * consistent, which the checks after every call verify. */
static void op_oom(world *w, in *s)
{
    uint8_t b = get8(s);
    if (b & 1)
        rkv_sched_debug_fail_alloc_after(b >> 4);
    else
        rkv_tree_debug_fail_alloc_after(w->tree, b >> 4);
}

/* Misuse the library can detect must be refused and change nothing: a
 * free or out-of-range block given to ref / unref / insert, a commit with
 * no plan pending. (Misuse it cannot tell from use -- releasing another
 * owner's reference -- is not attempted.) */
static void op_misuse(world *w, in *s)
{
    rkv_block_id b = below(s, w->nblocks + 2);
    int is_free = b >= w->nblocks || rkv_pool_refcount(w->pool, b) == 0;
    uint32_t free0 = rkv_pool_num_free(w->pool);
    switch (get8(s) % 8) {
    case 0:
        if (is_free && called(w, rkv_pool_unref(w->pool, b), "unref free") ==
                           RKV_OK)
            die(w, "unref of free block %u accepted", b);
        break;
    case 1:
        if (is_free && called(w, rkv_pool_ref(w->pool, b), "ref free") ==
                           RKV_OK)
            die(w, "ref of free block %u accepted", b);
        break;
    case 2: {
        int32_t t[MAX_TOKENS];
        rkv_block_id blocks[MAX_TOKENS];
        uint32_t n = w->P * (1 + below(s, 2));
        for (uint32_t i = 0; i < n; i++)
            t[i] = (int32_t)(get8(s) % 3);
        for (uint32_t i = 0; i < n / w->P; i++)
            blocks[i] = b;
        rkv_insert_result res;
        if (is_free && called(w, rkv_tree_insert(w->tree, 0, t, n, blocks,
                                                 NULL, &res), "insert free") ==
                           RKV_OK)
            die(w, "insert of free block %u accepted", b);
        break;
    }
    case 4: /* leases not held: nothing may change */
    case 5:
    case 6: {
        uint32_t k = below(s, 3);
        rkv_lease l = {0};
        if (k == 1 && w->nreleased > 0)
            l = w->released[below(s, w->nreleased < MAX_LOCKS
                                           ? w->nreleased : MAX_LOCKS)];
        else if (k == 2)
            l = w->lease2;
        rkv_lease before = l;
        rkv_tree_stats t0, t1;
        if (rkv_tree_get_stats(w->tree, &t0) != RKV_OK)
            die(w, "stats");
        if (called(w, rkv_tree_unlock(w->tree, &l), "unlock not held") !=
            RKV_ERR_STATE)
            die(w, "unlock of a lease not held (kind %u) not refused", k);
        if (l.id != before.id)
            die(w, "a refused unlock changed the lease");
        if (rkv_tree_get_stats(w->tree, &t1) != RKV_OK ||
            t1.locked_blocks != t0.locked_blocks ||
            t1.evictable_blocks != t0.evictable_blocks)
            die(w, "a refused unlock changed the tree");
        /* and this tree's own lease is foreign to the other tree */
        if (w->nlocks > 0) {
            rkv_lease mine = w->locks[below(s, w->nlocks)];
            if (rkv_tree_unlock(w->tree2, &mine) != RKV_ERR_STATE ||
                rkv_tree_check(w->tree2) != RKV_OK)
                die(w, "another tree released this tree's lease");
        }
        break;
    }
    default:
        if (get8(s) & 1) {
            rkv_tree *t2 = NULL;
            if (called(w, rkv_tree_create(w->pool, NULL, &t2),
                       "second tree") != RKV_ERR_BUSY || t2 != NULL)
                die(w, "a second tree on the pool was not refused (BUSY)");
        } else if (w->plan == NULL) {
            int32_t tok = 0;
            if (called(w, rkv_sched_commit(w->sched, &tok, NULL, w->op),
                       "commit without step") != RKV_ERR_STATE)
                die(w, "commit without a plan not refused with STATE");
        }
        break;
    }
    if (is_free && rkv_pool_num_free(w->pool) != free0)
        die(w, "a refused call changed the free count");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    in s = {data, size};
    world w;
    memset(&w, 0, sizeof w);
    uint8_t c0 = get8(&s);
    w.P = 1u << (c0 % 4);
    g_tok3 = (c0 >> 2) & 1;
    w.nblocks = 4 + below(&s, 60);
    rkv_pool_config pc;
    rkv_pool_config_init(&pc);
    pc.num_blocks = w.nblocks;
    pc.page_size = w.P;
    rkv_sched_config_init(&w.cfg);
    uint8_t c = get8(&s);
    w.cfg.policy = (rkv_policy)(c % 5);
    w.cfg.max_running = 1 + (c / 5) % 6;
    w.cfg.max_batch_tokens = 1 + below(&s, 64);
    w.cfg.dedup_min_tokens = (c & 0x80) ? w.P * (1 + c % 3) : 0;
    w.cfg.max_wait_ms = c % 7;
    w.cfg.aging_per_s = c % 11;
    rkv_tree_config tc;
    rkv_tree_config_init(&tc);
    tc.token_bytes = g_tok3 ? 3 : 4;
    if (rkv_pool_create(&pc, &w.pool) != RKV_OK ||
        rkv_tree_create(w.pool, &tc, &w.tree) != RKV_OK ||
        rkv_sched_create(w.tree, &w.cfg, &w.sched) != RKV_OK)
        die(&w, "setup failed");
    {
        rkv_pool_config pc2;
        rkv_pool_config_init(&pc2);
        pc2.num_blocks = 2;
        pc2.page_size = w.P;
        int32_t t2[8] = {0};
        rkv_insert_result r2;
        if (rkv_pool_create(&pc2, &w.pool2) != RKV_OK ||
            rkv_tree_create(w.pool2, NULL, &w.tree2) != RKV_OK ||
            rkv_pool_alloc(w.pool2, &w.block2) != RKV_OK ||
            rkv_tree_insert(w.tree2, 0, t2, w.P, &w.block2, NULL, &r2) !=
                RKV_OK ||
            rkv_tree_lock(w.tree2, r2.node, &w.lease2) != RKV_OK)
            die(&w, "setup of the second tree failed");
    }
    /* 32 opcode slots, fixed: a new operation takes a free (NULL) slot so
     * the meaning of existing corpus and regression inputs stays put */
    static void (*const ops[32])(world *, in *) = {
        op_submit, op_submit, op_step, op_step, op_step, op_abort,
        op_alloc, op_ref_unref, op_insert, op_match, op_lock, op_unlock,
        op_evict, op_reset, op_info, op_misuse,
        op_submit, op_step, op_step, op_match, op_insert, op_alloc,
        op_ref_unref, op_lock, op_unlock, op_abort, op_evict, op_oom,
    };
    const uint32_t nops = sizeof ops / sizeof ops[0];
    for (w.op = 0; s.n > 0 && w.op < MAX_OPS; w.op++) {
        void (*op)(world *, in *) = ops[get8(&s) % nops];
        if (op == NULL)
            continue;
        op(&w, &s);
        check_model(&w);
    }
    /* wind down: finish the pending plan, drop what the harness holds */
    rkv_sched_debug_fail_alloc_after(-1);
    rkv_tree_debug_fail_alloc_after(w.tree, -1);
    if (w.plan != NULL) {
        in none = {NULL, 0};
        commit(&w, &none);
    }
    while (w.nlocks > 0) {
        in none = {NULL, 0};
        op_unlock(&w, &none);
    }
    while (w.nheld > 0)
        drop_held(&w, w.nheld - 1);
    check_all(&w, "wind-down");
    rkv_sched_destroy(w.sched);
    if (rkv_tree_check(w.tree) != RKV_OK)
        die(&w, "tree check after the scheduler's destroy");
    destroy_tree_all_free(&w);
    rkv_pool_destroy(w.pool);
    if (rkv_tree_unlock(w.tree2, &w.lease2) != RKV_OK ||
        rkv_tree_check(w.tree2) != RKV_OK)
        die(&w, "the second tree's own lease");
    rkv_tree_destroy(w.tree2);
    if (rkv_pool_unref(w.pool2, w.block2) != RKV_OK ||
        rkv_pool_num_free(w.pool2) != 2)
        die(&w, "the second pool's blocks");
    rkv_pool_destroy(w.pool2);
    return 0;
}
