/*
 * sim/replay_file.c -- `--order file`: the cache alone, requests in file
 * order (see replay.h for the exact per-request protocol).
 *
 * Invariant between requests: the replay holds no block reference and no
 * lock; every used pool block is held by the tree alone (checked with
 * rkv_tree_check / rkv_pool_check every cfg->check_every requests).
 */
#include <stdlib.h>
#include <string.h>

#include "sim/replay_internal.h"
#include "sim/replay_retain.h"
#include "common/status.h"

typedef struct file_bufs {
    int32_t *tokens;
    rkv_block_id *blocks; /* matched + new blocks, one per full page */
    rkv_block_id *dups;
} file_bufs;

/* Retention after request i's insert (sim/replay.h "Retention"): its
 * retention on its prompt's cached part at the clock arrival_ms *
 * time_scale (kept monotonic: a trace's lines may go back in time), then
 * its end. A pin the cap refuses leaves the request unpinned (the tree
 * counts it). */
static rkv_status file_retain(rkv_tree *tree, const rkv_workload *wl,
                              const rkv_replay_config *cfg,
                              const rkv_retention_plan *plan, size_t i,
                              uint64_t pool_tokens, uint64_t *now,
                              rkv_replay_result *res)
{
    const rkv_wl_request *q = &wl->reqs[i];
    double t = q->arrival_ms * cfg->time_scale;
    if (t > (double)*now)
        *now = t < RKV_REPLAY_MAX_SIM_MS ? (uint64_t)t
                                         : (uint64_t)RKV_REPLAY_MAX_SIM_MS;
    uint64_t len = q->input_length < pool_tokens ? q->input_length : pool_tokens;
    rkv_retention r;
    rkv_status st;
    if (rkv_retention_plan_for(plan, wl, cfg, i, &r)) {
        if (r.prio_end > len)
            r.prio_end = (size_t)len;
        if (r.pin_tokens > len)
            r.pin_tokens = (size_t)len;
        if ((st = rkv_workload_prompt_n(wl, i, (uint32_t)len, plan->ctx)) !=
            RKV_OK)
            return st;
        st = rkv_tree_retain(tree, 0, plan->ctx, (size_t)len, &r, *now, NULL);
        if (st != RKV_OK && st != RKV_ERR_PIN_CAP)
            return st;
    } else if ((st = rkv_tree_set_time(tree, *now)) != RKV_OK) {
        return st;
    }
    return rkv_retention_plan_ended(plan, wl, cfg, tree, i, 0,
                                    &res->ended_pages);
}

static void file_bufs_free(file_bufs *b)
{
    free(b->tokens);
    free(b->blocks);
    free(b->dups);
}

/* Serves request i: match, lock, allocate, insert, release. On failure the
 * replay's own references and lock are already released. */
static rkv_status serve(rkv_tree *tree, rkv_pool *pool, const rkv_workload *wl,
                        size_t i, file_bufs *b, rkv_replay_result *res,
                        rkv_replay_request_stats *per)
{
    const rkv_wl_request *q = &wl->reqs[i];
    uint32_t P = rkv_pool_page_size(pool);
    uint32_t pages = q->input_length / P;
    /* No more than the pool's pages can ever be matched or cached, so a
     * longer prompt is expanded (and inserted) only that far. */
    uint64_t pool_tokens = (uint64_t)rkv_pool_num_blocks(pool) * P;
    uint32_t len = q->input_length;
    int cut = pages > rkv_pool_num_blocks(pool);
    if (cut)
        pages = rkv_pool_num_blocks(pool);
    if (len > pool_tokens) /* also a partial page past a full pool */
        len = (uint32_t)pool_tokens;
    rkv_status st = rkv_workload_prompt_n(wl, i, len, b->tokens);
    if (st != RKV_OK)
        return st;

    uint64_t t0 = rkv_replay_now_ns();
    rkv_match m;
    rkv_tier_match tm;
    st = rkv_tree_match_tiers(tree, 0, b->tokens, len, b->blocks, 0, &m, &tm);
    if (st != RKV_OK)
        return st;
    res->hit_tokens_by_medium[RKV_MEDIUM_DEVICE] += m.matched_tokens;
    /* pages in the host tier: promote them (the replay waits for its
     * load at once: file order has no clock) */
    size_t loaded = 0, disk_loaded = 0;
    rkv_lease lease = {0};
    /* One load for the whole continuation, as the scheduler makes. (Under
     * write-back a page being loaded holds its host slot until it arrives
     * while the device evicts into the host to make room for it, so a load
     * of k pages may make the host LRU drop up to k pages. Loads in chunks
     * of 8 pages kept that overlap small but re-walked, re-locked and
     * re-touched the whole path for every chunk: quadratic in the prompt,
     * most of the replay's CPU with a tier, for 0.00-0.03 points of hit
     * rate either way on the embedded and agentic workloads.) */
    while (tm.lower_tokens > loaded) {
        rkv_load ld;
        /* its blocks follow the device prefix's in b->blocks */
        st = rkv_tree_load(tree, 0, b->tokens, len, UINT32_MAX,
                           b->blocks + (m.matched_tokens + loaded) / P, &ld);
        if (st == RKV_ERR_NO_SPACE) {
            st = RKV_OK; /* no room beside the locked paths: computed */
            break;
        }
        if (st != RKV_OK || ld.ticket == 0)
            break;
        rkv_transfer_done done;
        uint32_t nd = 0;
        st = rkv_tree_tier_poll(tree, &done, 1, &nd);
        if (st == RKV_OK && (nd != 1 || done.ticket != ld.ticket))
            st = rkv_set_error(RKV_ERR_CORRUPT, "replay: load %llu did not "
                               "complete at poll",
                               (unsigned long long)ld.ticket);
        /* the new lease (on the loaded path, or above it on failure)
         * covers the previous one's path */
        rkv_status ust = lease.id ? rkv_tree_unlock(tree, &lease) : RKV_OK;
        lease = ld.lease;
        if (st == RKV_OK)
            st = ust;
        if (st != RKV_OK)
            break;
        if (done.status != RKV_OK) {
            res->failed_loads += ld.num_pages;
            break;
        }
        loaded += (size_t)ld.num_pages * P;
        disk_loaded += (size_t)ld.disk_pages * P;
        res->load_blocks += ld.num_pages;
    }
    if (st == RKV_OK && loaded > 0) {
        /* The loaded path ends the device prefix (its children are all
         * lower) and the load's lease is on its deepest node: no second
         * walk of the prefix (a match) and no second lock. A debug build
         * checks that against a match. */
        m.matched_tokens += loaded;
        m.num_blocks = (uint32_t)(m.matched_tokens / P);
#ifndef NDEBUG
        rkv_match chk;
        st = rkv_tree_match(tree, 0, b->tokens, len, b->dups, RKV_MATCH_PEEK, &chk);
        if (st == RKV_OK &&
            (chk.matched_tokens != m.matched_tokens ||
             memcmp(b->dups, b->blocks, (size_t)chk.num_blocks * sizeof *b->dups) != 0))
            st = rkv_set_error(RKV_ERR_CORRUPT, "replay: the device prefix after "
                               "a load is %zu tokens, the load made it %zu",
                               chk.matched_tokens, m.matched_tokens);
#endif
    }
    if (st != RKV_OK) {
        if (lease.id)
            rkv_tree_unlock(tree, &lease);
        return st;
    }
    uint64_t t1 = rkv_replay_now_ns();
    res->hit_tokens += m.matched_tokens;
    res->hit_tokens_by_medium[RKV_MEDIUM_HOST] += loaded - disk_loaded;
    res->hit_tokens_by_medium[RKV_MEDIUM_DISK] += disk_loaded;
    if (per)
        per[i].hit_tokens = (uint32_t)m.matched_tokens;
    res->match_ns += (double)(t1 - t0);
    res->truncated_requests += cut;
    if (m.num_blocks >= pages)
        return lease.id ? rkv_tree_unlock(tree, &lease) : RKV_OK;

    if (loaded == 0) { /* else the load's lease locks the prefix's end */
        rkv_lease plain;
        if ((st = rkv_tree_lock(tree, m.node, &plain)) != RKV_OK) {
            if (lease.id)
                rkv_tree_unlock(tree, &lease);
            return st;
        }
        if (lease.id && (st = rkv_tree_unlock(tree, &lease)) != RKV_OK)
            return st;
        lease = plain;
    }
    uint32_t need = pages - m.num_blocks;
    st = rkv_tree_alloc_blocks(tree, need, b->blocks + m.num_blocks);
    if (st == RKV_ERR_NO_SPACE) {
        /* The prompt does not fit beside the locked path: cache the
         * prefix that does. */
        rkv_tree_stats ts;
        st = rkv_tree_get_stats(tree, &ts);
        if (st == RKV_OK) {
            uint64_t avail = rkv_pool_num_free(pool) + ts.evictable_blocks;
            need = avail < need ? (uint32_t)avail : need;
            res->truncated_requests += !cut;
            st = need ? rkv_tree_alloc_blocks(tree, need,
                                              b->blocks + m.num_blocks)
                      : RKV_OK;
        }
    }
    uint64_t t2 = rkv_replay_now_ns();
    res->alloc_ns += (double)(t2 - t1);
    if (st != RKV_OK) {
        rkv_tree_unlock(tree, &lease);
        return st;
    }
    uint64_t used = rkv_pool_num_blocks(pool) - rkv_pool_num_free(pool);
    if (used > res->peak_blocks)
        res->peak_blocks = res->peak_pool_blocks = used;
    if (need) {
        rkv_insert_result ir;
        size_t n = (size_t)(m.num_blocks + need) * P;
        st = rkv_tree_insert(tree, 0, b->tokens, n, b->blocks, b->dups, &ir);
        if (st == RKV_OK) {
            /* The tree took its own reference on each page it kept; ours
             * (from the allocation) go, which also frees the duplicates. */
            st = rkv_pool_unref_n(pool, need, b->blocks + m.num_blocks);
        } else {
            rkv_pool_unref_n(pool, need, b->blocks + m.num_blocks);
        }
    }
    uint64_t t3 = rkv_replay_now_ns();
    res->insert_ns += (double)(t3 - t2);
    rkv_status ust = rkv_tree_unlock(tree, &lease);
    return st != RKV_OK ? st : ust;
}

rkv_status rkv_replay_file_order(const rkv_workload *wl,
                                 const rkv_replay_config *cfg,
                                 rkv_replay_result *out)
{
    if (!wl || !cfg || !out)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_replay_file_order: NULL argument");
    uint64_t w0 = rkv_replay_now_ns();
    rkv_replay_result res;
    memset(&res, 0, sizeof res);
    rkv_pool *pool = NULL;
    rkv_tree *tree = NULL;
    rkv_status st = rkv_replay_open_cache(wl, cfg, 0, &pool, &tree);
    if (st != RKV_OK)
        return st;
    rkv_store *host = NULL, *disk = NULL;
    st = rkv_replay_open_tier_chain(cfg, tree, &host, &disk);
    if (st != RKV_OK) {
        rkv_tree_destroy(tree);
        rkv_pool_destroy(pool);
        return st;
    }
    res.page_size = cfg->page_size;
    res.capacity_blocks = rkv_pool_num_blocks(pool);

    uint64_t max_in = rkv_workload_max_input(wl);
    uint64_t pool_tokens = (uint64_t)rkv_pool_num_blocks(pool) * cfg->page_size;
    if (max_in > pool_tokens)
        max_in = pool_tokens;
    rkv_retention_plan plan;
    memset(&plan, 0, sizeof plan);
    uint64_t now_ms = 0;
    if (cfg->retention != RKV_RETENTION_NONE &&
        (st = rkv_retention_plan_init(&plan, wl, pool_tokens)) != RKV_OK) {
        rkv_tree_destroy(tree);
        rkv_store_destroy(host);
        rkv_store_destroy(disk);
        rkv_pool_destroy(pool);
        return st;
    }
    plan.file_order = 1; /* pins are made at each arrival */
    file_bufs b;
    b.tokens = malloc(((size_t)max_in + 1) * sizeof *b.tokens);
    b.blocks = malloc(((size_t)max_in / cfg->page_size + 1) * sizeof *b.blocks);
    b.dups = malloc(((size_t)max_in / cfg->page_size + 1) * sizeof *b.dups);
    if (!b.tokens || !b.blocks || !b.dups)
        st = rkv_set_error(RKV_ERR_NOMEM, "replay: out of memory for a "
                                          "prompt of %llu tokens",
                           (unsigned long long)max_in);

    for (size_t i = 0; st == RKV_OK && i < wl->num_reqs; i++) {
        st = serve(tree, pool, wl, i, &b, &res, cfg->per_request);
        if (st == RKV_OK && cfg->retention != RKV_RETENTION_NONE)
            st = file_retain(tree, wl, cfg, &plan, i, pool_tokens, &now_ms,
                             &res);
        if (st == RKV_OK && (host != NULL || disk != NULL)) {
            /* queued copies (write-through, selective) run between
             * requests, as an engine's step would run them */
            uint32_t nd = 0;
            st = rkv_tree_tier_poll(tree, NULL, 0, &nd);
        }
        if (st != RKV_OK)
            break;
        res.requests++;
        res.prompt_tokens += wl->reqs[i].input_length;
        if (cfg->check_every && (i + 1) % cfg->check_every == 0) {
            st = rkv_tree_check(tree);
            if (st == RKV_OK)
                st = rkv_pool_check(pool);
        }
        if (cfg->progress && ((i & 255) == 0 || i + 1 == wl->num_reqs))
            cfg->progress(cfg->progress_ctx, i + 1, wl->num_reqs);
    }
    if (st == RKV_OK && cfg->check_every) {
        st = rkv_tree_check(tree);
        if (st == RKV_OK)
            st = rkv_pool_check(pool);
    }
    if (st == RKV_OK) {
        rkv_tree_stats ts;
        st = rkv_replay_add_tree_counters(tree, &res, &ts);
        if (st == RKV_OK) {
            /* The tree's own count of device hits must agree with ours. */
            if (ts.hit_tokens != res.hit_tokens_by_medium[RKV_MEDIUM_DEVICE])
                st = rkv_set_error(RKV_ERR_CORRUPT,
                                   "replay: tree counted %llu hit tokens, "
                                   "matches returned %llu",
                                   (unsigned long long)ts.hit_tokens,
                                   (unsigned long long)res.hit_tokens_by_medium
                                       [RKV_MEDIUM_DEVICE]);
        }
    }
    if (st == RKV_OK)
        st = rkv_replay_disk_finish(cfg, tree, disk, &res);
    file_bufs_free(&b);
    rkv_retention_plan_free(&plan);
    rkv_tree_destroy(tree);
    rkv_store_destroy(host);
    rkv_store_destroy(disk);
    rkv_pool_destroy(pool);
    if (st != RKV_OK)
        return st;
    if (res.requests) {
        res.match_ns /= (double)res.requests;
        res.alloc_ns /= (double)res.requests;
        res.insert_ns /= (double)res.requests;
    }
    res.hit_rate = res.prompt_tokens
                       ? (double)res.hit_tokens / (double)res.prompt_tokens
                       : 0.0;
    res.wall_s = (double)(rkv_replay_now_ns() - w0) * 1e-9;
    *out = res;
    return RKV_OK;
}
