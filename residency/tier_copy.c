/*
 * residency/tier_copy.c -- the tier's asynchronous copies on a CUDA pool: the
 * two phases of rkv_tree_tier_poll. A poll first finishes the batches in
 * flight whose event completed (oldest first: one stream, so they complete
 * in order), then issues ONE batch: every queued store (device block ->
 * host slot, cudaMemcpy2DAsync per block) and every queued load (host slot
 * or pinned staging -> device block) that is not in flight yet, followed
 * by one event. A later poll that finds the event complete commits the
 * stores (the host copy is counted and becomes readable) and makes the
 * loads READY, so rkv_tree_tier_poll reports a load's ticket only after
 * its own batch completed: a request waits for its load, never for
 * another's (its batch holds only copies queued up to its poll).
 * A host pool never comes here (residency/tier.c keeps memcpy / pread,
 * completing in the same poll).
 *
 * Why these choices. A batch per poll, not per load: one event per poll is
 * what the scheduler's step cadence needs, and the table bound
 * (RKV_TCOPY_BATCHES) is then a bound on polls in flight. Disk loads are
 * verified in the disk store's one staging buffer (the record checksum must
 * pass before a byte reaches the device, as on the synchronous path) and
 * copied to pinned staging pages, released in FIFO order with their batch;
 * a load whose disk pages do not fit reads synchronously when reported
 * (never lost, only not overlapped). Stores into a disk-only tier stay
 * synchronous (the disk store writes whole records from its own buffer).
 *
 * Failure (at issue: a copy or the event record; at completion: the event
 * query or sync) fails the items exactly like the synchronous path: a
 * store frees its slot (the device page keeps its bytes, no host copy), a
 * load is READY with the error (its pages go back to LOWER at report, the
 * device blocks are freed, the request computes). Before anything whose
 * copies may still run is freed, the stream is synchronised.
 *
 * Invariants (rkv_tier_copy_check): at most RKV_TCOPY_BATCHES batches in
 * flight, ids next_id - blen .. next_id - 1; a live queued store or a
 * load with a batch names one of them; the staging pages in use are
 * exactly those of the batches in flight; nothing is in flight unless on.
 */
#include <stdlib.h>
#include <string.h>

#include "alloc/pool_internal.h"
#include "common/status.h"
#include "residency/tier_debug.h"
#include "residency/tier.h"

#define TC_N RKV_TCOPY_BATCHES

static rkv_status rkv_tier_copy_inject(uint32_t *k, const char *what)
{
    if (*k == 0 || --*k != 0)
        return RKV_OK;
    return rkv_set_error(RKV_ERR_CUDA, "%s: injected failure", what);
}

/* The stream copies go on: the caller's, else the tier's own (made now). */
static rkv_status rkv_tier_copy_stream(rkv_tree *t, void **out)
{
    rkv_tcopy *c = &t->tiers.tier->cp;
    *out = t->tiers.tier_stream;
    if (*out != NULL)
        return RKV_OK;
    if (c->own_stream == NULL) {
        rkv_status st = c->be->stream_create(c->device, &c->own_stream);
        if (st != RKV_OK) {
            c->own_stream = NULL;
            return rkv_cuda_status(c->be, st);
        }
    }
    *out = c->own_stream;
    return RKV_OK;
}

/* Waits for everything queued on the current stream (errors ignored: the
 * caller is failing or dropping what it waits for anyway). */
static void rkv_tier_copy_sync(rkv_tree *t)
{
    rkv_tcopy *c = &t->tiers.tier->cp;
    void *s = t->tiers.tier_stream != NULL ? t->tiers.tier_stream : c->own_stream;
    if (s != NULL)
        (void)c->be->stream_sync(c->device, s);
}

void *rkv_tier_copy_sync_stream(rkv_tree *t)
{
    void *s = NULL;
    if (!t->tiers.tier->cp.on || rkv_tier_copy_stream(t, &s) != RKV_OK)
        return NULL; /* the legacy stream: block by block, still correct */
    return s;
}

void rkv_tier_copy_init(rkv_tree *t)
{
    rkv_tcopy *c = &t->tiers.tier->cp;
    memset(c, 0, sizeof *c);
    c->next_id = 1;
    c->be = rkv_pool_cuda_backend(t->pool);
    c->device = t->pool->cfg.cuda_device;
    c->on = c->be != NULL && t->pool->kv_bytes != 0 && t->tiers.tier->block_bytes != 0;
}

void rkv_tier_copy_drain(rkv_tree *t)
{
    rkv_tcopy *c = &t->tiers.tier->cp;
    if (!c->on)
        return;
    if (c->blen > 0)
        rkv_tier_copy_sync(t);
    c->blen = 0;
    c->stage_head = c->stage_used = 0;
    for (uint32_t i = 0; i < TC_N; i++)
        c->b[i].stage_pages = 0;
}

void rkv_tier_copy_fini(rkv_tree *t)
{
    rkv_tcopy *c = &t->tiers.tier->cp;
    rkv_tier_copy_drain(t);
    if (c->be == NULL)
        return;
    for (uint32_t i = 0; i < TC_N; i++) {
        c->be->event_destroy(c->device, c->b[i].event);
        c->b[i].event = NULL;
    }
    c->be->stream_destroy(c->device, c->own_stream);
    c->own_stream = NULL;
    free(c->pair_ids);
    free(c->pair_host);
    c->pair_ids = NULL;
    c->pair_host = NULL;
    c->pairs_cap = c->npairs = 0;
    if (c->stage != NULL)
        c->be->host_free(c->stage);
    c->stage = NULL;
}

/* ---- issue ------------------------------------------------------------------ */

/* Room for `need` staging pages (pinned memory made on first use). */
static int rkv_tier_copy_stage_room(rkv_tree *t, uint32_t need)
{
    rkv_tcopy *c = &t->tiers.tier->cp;
    if (need > RKV_TCOPY_STAGE_PAGES)
        return 0;
    if (c->stage == NULL) {
        void *p = NULL;
        if (c->stage_failed ||
            c->be->host_alloc((size_t)RKV_TCOPY_STAGE_PAGES * t->tiers.tier->block_bytes,
                              &p) != RKV_OK) {
            c->stage_failed = 1;
            return 0;
        }
        c->stage = p;
    }
    return c->stage_used + need <= RKV_TCOPY_STAGE_PAGES;
}

/* The (device block, host pointer) pairs of one direction of the batch
 * being issued (c->pairs), grown as needed. 0: out of memory. */
static int rkv_tier_copy_pair_room(rkv_tcopy *c, uint32_t need)
{
    if (need <= c->pairs_cap)
        return 1;
    uint32_t cap = c->pairs_cap ? c->pairs_cap : 64;
    while (cap < need)
        cap *= 2;
    rkv_block_id *ids = realloc(c->pair_ids, (size_t)cap * sizeof *ids);
    if (ids == NULL)
        return 0;
    c->pair_ids = ids;
    void **host = realloc(c->pair_host, (size_t)cap * sizeof *host);
    if (host == NULL)
        return 0;
    c->pair_host = host;
    c->pairs_cap = cap;
    return 1;
}

static int rkv_tier_copy_pair_add(rkv_tcopy *c, rkv_block_id b, void *host)
{
    if (!rkv_tier_copy_pair_room(c, c->npairs + 1))
        return 0;
    c->pair_ids[c->npairs] = b;
    c->pair_host[c->npairs++] = host;
    return 1;
}

/* Queues the gathered pairs in one call (the backend makes it one batched
 * copy where the runtime has one). The failure injection counts each pair
 * as one point: the pairs before an injected one are really queued (a
 * batch the backend took in part), then the call fails. *queued: some
 * copy may be on the stream. */
static rkv_status rkv_tier_copy_pairs(rkv_tree *t, void *stream, int to_host, int *queued)
{
    rkv_tcopy *c = &t->tiers.tier->cp;
    const char *what = to_host ? "tier stores: batched copy to host"
                               : "tier loads: batched copy from host";
    uint32_t n = c->npairs, m = n, hit = 0;
    if (c->fail_issue != 0 && c->fail_issue <= n) {
        m = c->fail_issue - 1;
        c->fail_issue = 0;
        hit = 1;
    } else if (c->fail_issue != 0) {
        c->fail_issue -= n;
    }
    rkv_status st = RKV_OK;
    if (m > 0) {
        st = rkv_pool_copy_async(t->pool, stream, m, c->pair_ids, c->pair_host, to_host);
        c->copy_calls++;
        c->copy_pages += m;
    }
    *queued = m > 0;
    if (st == RKV_OK && hit)
        st = rkv_set_error(RKV_ERR_CUDA, "%s: injected failure at copy %u of %u", what,
                           m + 1, n);
    c->npairs = 0;
    return st;
}

/* Every queued store not in flight: prepared (slot emptied, its bytes'
 * address) and queued in one batched copy; 0 when none is in flight after. */
static uint32_t rkv_tier_copy_issue_stores(rkv_tree *t, void *stream, uint64_t id)
{
    rkv_tier *tr = t->tiers.tier;
    rkv_tcopy *c = &tr->cp;
    uint32_t n = 0;
    c->npairs = 0;
    for (uint32_t k = 0; k < tr->qlen; k++) {
        rkv_queued_store *op = &tr->q[(tr->qhead + k) % tr->qcap];
        if (op->block == RKV_NIL || op->batch != 0)
            continue;
        if (tr->medium != RKV_MEDIUM_HOST) { /* a disk-only tier: synchronous */
            rkv_tier_run_op(t, op);
            continue;
        }
        void *dst = NULL;
        rkv_status st = rkv_store_write_begin(tr->host, op->slot, t->pool, op->block, &dst);
        if (st == RKV_OK && !rkv_tier_copy_pair_add(c, op->block, dst))
            st = rkv_set_error(RKV_ERR_NOMEM, "tier stores: out of memory for the batch");
        if (st != RKV_OK) {
            rkv_tier_store_done(t, op, st);
            continue;
        }
        op->batch = id; /* this batch's, unless its call fails */
        n++;
    }
    if (n == 0)
        return 0;
    int queued = 0;
    rkv_status st = rkv_tier_copy_pairs(t, stream, 1, &queued);
    for (uint32_t k = 0; k < tr->qlen; k++) {
        rkv_queued_store *op = &tr->q[(tr->qhead + k) % tr->qcap];
        if (op->block == RKV_NIL || op->batch != id)
            continue;
        if (st == RKV_OK) {
            if (op->ticket == 0)
                rkv_store_log_taken(t, op->block, op->hash);
            continue;
        }
        if (queued) {
            rkv_tier_copy_sync(t); /* no copy may land in a slot freed now */
            queued = 0;
        }
        op->batch = 0; /* never issued: done as a store that failed to start */
        rkv_tier_store_done(t, op, st);
    }
    return st == RKV_OK ? n : 0;
}

/* Load job's pages gathered into c's pairs (verified, disk pages staged).
 * 0: it is not in this batch (no staging: SYNC; a page failed: READY). */
static int rkv_tier_copy_gather_load(rkv_tree *t, rkv_load_job *job, uint64_t id,
                                     rkv_tbatch *b)
{
    rkv_tier *tr = t->tiers.tier;
    rkv_tcopy *c = &tr->cp;
    uint32_t need = 0;
    for (uint32_t y = job->node; y != job->top; y = t->nodes[y].parent)
        if (rkv_tier_node_medium(t, y) == RKV_MEDIUM_DISK)
            need += t->nodes[y].num_pages;
    if (need > 0 && !rkv_tier_copy_stage_room(t, need)) {
        job->state = RKV_TLOAD_SYNC; /* read when reported, never lost */
        return 0;
    }
    rkv_status st = RKV_OK;
    uint32_t first = c->npairs;
    job->bad_node = RKV_NIL;
    job->bad_page = 0;
    for (uint32_t y = job->node; y != job->top && st == RKV_OK;
         y = t->nodes[y].parent) {
        rkv_tnode *x = &t->nodes[y];
        rkv_block_id *xb = rkv_tnode_blocks(t, x);
        const rkv_page_residency *tp = rkv_tnode_tpages(t, x);
        int disk = rkv_tier_node_medium(t, y) == RKV_MEDIUM_DISK;
        for (uint32_t i = 0; i < x->num_pages; i++) {
            const void *src = NULL;
            st = rkv_store_read_begin(rkv_tier_node_store(t, y), tp[i].slot, t->pool,
                                      xb[i], rkv_tier_page_hash(t, x, i), job->ns,
                                      &src);
            if (st != RKV_OK) {
                job->bad_node = y;
                job->bad_page = i;
                break;
            }
            void *host = (void *)(uintptr_t)src;
            if (disk) {
                /* the record was verified in the store's buffer, which
                 * its next I/O reuses: into a pinned page for the DMA */
                uint32_t k = (c->stage_head + c->stage_used) % RKV_TCOPY_STAGE_PAGES;
                host = c->stage + (size_t)k * tr->block_bytes;
                memcpy(host, src, tr->block_bytes);
                c->stage_used++;
                b->stage_pages++;
            }
            if (!rkv_tier_copy_pair_add(c, xb[i], host)) {
                st = rkv_set_error(RKV_ERR_NOMEM, "tier loads: out of memory for the batch");
                break;
            }
        }
    }
    if (st != RKV_OK) {
        c->npairs = first; /* none of its copies was queued */
        job->state = RKV_TLOAD_READY;
        job->st = st;
        return 0;
    }
    job->state = RKV_TLOAD_INFLIGHT;
    job->batch = id;
    return 1;
}

/* The loads of batch id are READY with st. */
static void rkv_tier_copy_end_loads(rkv_tree *t, uint64_t id, rkv_status st)
{
    rkv_tier *tr = t->tiers.tier;
    for (uint32_t j = 0; j < tr->njobs; j++) {
        rkv_load_job *job = &tr->jobs[j];
        if (job->state == RKV_TLOAD_INFLIGHT && job->batch == id) {
            job->state = RKV_TLOAD_READY;
            job->st = st;
            job->bad_node = RKV_NIL;
        }
    }
}

/* Every queued load: gathered, then queued in one batched copy. */
static uint32_t rkv_tier_copy_issue_loads(rkv_tree *t, void *stream, uint64_t id,
                                          rkv_tbatch *b)
{
    rkv_tier *tr = t->tiers.tier;
    rkv_tcopy *c = &tr->cp;
    uint32_t n = 0;
    c->npairs = 0;
    for (uint32_t j = 0; j < tr->njobs; j++)
        if (tr->jobs[j].state == RKV_TLOAD_QUEUED)
            n += (uint32_t)rkv_tier_copy_gather_load(t, &tr->jobs[j], id, b);
    if (n == 0)
        return 0;
    int queued = 0;
    rkv_status st = c->npairs > 0 ? rkv_tier_copy_pairs(t, stream, 0, &queued) : RKV_OK;
    if (st == RKV_OK)
        return n;
    if (queued)
        rkv_tier_copy_sync(t); /* its copies land before its blocks are freed */
    rkv_tier_copy_end_loads(t, id, st);
    return 0;
}

/* Ends the items of batch id with st (RKV_OK: their bytes arrived). */
static void rkv_tier_copy_end_batch(rkv_tree *t, uint64_t id, rkv_status st)
{
    rkv_tier *tr = t->tiers.tier;
    for (uint32_t k = 0; k < tr->qlen; k++) {
        rkv_queued_store *op = &tr->q[(tr->qhead + k) % tr->qcap];
        if (op->block != RKV_NIL && op->batch == id)
            rkv_tier_store_done(t, op, st);
    }
    rkv_tier_copy_end_loads(t, id, st);
}

/* Every queued store and load not in flight: failed with st (no stream or
 * event to issue them on). */
static void rkv_tier_copy_fail_queued(rkv_tree *t, rkv_status st)
{
    rkv_tier *tr = t->tiers.tier;
    for (uint32_t k = 0; k < tr->qlen; k++) {
        rkv_queued_store *op = &tr->q[(tr->qhead + k) % tr->qcap];
        if (op->block != RKV_NIL && op->batch == 0)
            rkv_tier_store_done(t, op, st);
    }
    for (uint32_t j = 0; j < tr->njobs; j++)
        if (tr->jobs[j].state == RKV_TLOAD_QUEUED) {
            tr->jobs[j].state = RKV_TLOAD_READY;
            tr->jobs[j].st = st;
            tr->jobs[j].bad_node = RKV_NIL;
        }
}

static int rkv_tier_copy_has_queued(const rkv_tier *tr)
{
    for (uint32_t k = 0; k < tr->qlen; k++) {
        const rkv_queued_store *op = &tr->q[(tr->qhead + k) % tr->qcap];
        if (op->block != RKV_NIL && op->batch == 0)
            return 1;
    }
    for (uint32_t j = 0; j < tr->njobs; j++)
        if (tr->jobs[j].state == RKV_TLOAD_QUEUED)
            return 1;
    return 0;
}

static void rkv_tier_copy_issue(rkv_tree *t)
{
    rkv_tier *tr = t->tiers.tier;
    rkv_tcopy *c = &tr->cp;
    if (c->blen == TC_N || !rkv_tier_copy_has_queued(tr))
        return; /* a full table: everything waits for a later poll */
    uint64_t id = c->next_id;
    rkv_tbatch *b = &c->b[id % TC_N];
    b->stage_pages = 0;
    void *stream = NULL;
    rkv_status st = rkv_tier_copy_stream(t, &stream);
    if (st == RKV_OK && b->event == NULL) {
        st = c->be->event_create(c->device, &b->event);
        if (st != RKV_OK) {
            b->event = NULL;
            st = rkv_cuda_status(c->be, st);
        }
    }
    if (st != RKV_OK) {
        rkv_tier_copy_fail_queued(t, st);
        return;
    }
    uint32_t n = rkv_tier_copy_issue_stores(t, stream, id);
    n += rkv_tier_copy_issue_loads(t, stream, id, b);
    if (n == 0) {
        c->stage_used -= b->stage_pages; /* the newest pages: at the tail */
        b->stage_pages = 0;
        return;
    }
    st = rkv_tier_copy_inject(&c->fail_issue, "tier copies: cudaEventRecord");
    if (st == RKV_OK)
        st = rkv_cuda_status(c->be, c->be->event_record(c->device, b->event, stream));
    if (st != RKV_OK) {
        rkv_tier_copy_sync(t); /* no event to wait for: wait for the stream */
        rkv_tier_copy_end_batch(t, id, st);
        c->stage_used -= b->stage_pages;
        b->stage_pages = 0;
        return;
    }
    c->next_id++;
    c->blen++;
}

/* ---- completion --------------------------------------------------------------- */

static void rkv_tier_copy_complete(rkv_tree *t)
{
    rkv_tier *tr = t->tiers.tier;
    rkv_tcopy *c = &tr->cp;
    while (c->blen > 0 && !c->stall) {
        uint64_t id = c->next_id - c->blen;
        rkv_tbatch *b = &c->b[id % TC_N];
        int done = 0;
        rkv_status st = rkv_tier_copy_inject(&c->fail_query, "tier copies: cudaEventQuery");
        if (st == RKV_OK)
            st = rkv_cuda_status(c->be, c->be->event_query(c->device, b->event, &done));
        if (st == RKV_OK && !done)
            return; /* the later batches are behind it on the stream */
        if (st != RKV_OK)
            rkv_tier_copy_sync(t); /* nothing of it may still run when it is freed */
        rkv_tier_copy_end_batch(t, id, st);
        c->stage_head = (c->stage_head + b->stage_pages) % RKV_TCOPY_STAGE_PAGES;
        c->stage_used -= b->stage_pages;
        b->stage_pages = 0;
        c->blen--;
    }
}

/* Dead stores at the head of the ring leave it (live ones keep their
 * place: the ring is only ever appended to). */
static void rkv_tier_copy_pop_dead(rkv_tier *tr)
{
    while (tr->qlen > 0 && tr->q[tr->qhead].block == RKV_NIL) {
        tr->qhead = (tr->qhead + 1) % tr->qcap;
        tr->qlen--;
    }
    if (tr->qlen == 0)
        tr->qhead = 0;
}

void rkv_tier_copy_poll(rkv_tree *t)
{
    rkv_tier_copy_complete(t);
    rkv_tier_copy_issue(t);
    rkv_tier_copy_pop_dead(t->tiers.tier);
}

void rkv_tier_copy_wait_issued(rkv_tree *t)
{
    if (t->tiers.tier == NULL)
        return;
    rkv_tcopy *c = &t->tiers.tier->cp;
    if (c->on && c->blen > 0 && !c->stall)
        rkv_tier_copy_sync(t);
}

void rkv_tier_copy_wait_store(rkv_tree *t, rkv_queued_store *op)
{
    rkv_tcopy *c = &t->tiers.tier->cp;
    rkv_tbatch *b = &c->b[op->batch % TC_N];
    rkv_status st = rkv_tier_copy_inject(&c->fail_query, "tier store: cudaEventSynchronize");
    if (st == RKV_OK)
        st = rkv_cuda_status(c->be, c->be->event_sync(c->device, b->event));
    if (st != RKV_OK)
        rkv_tier_copy_sync(t);
    rkv_tier_store_done(t, op, st);
}

/* ---- check ------------------------------------------------------------------ */

rkv_status rkv_tier_copy_check(const rkv_tree *t)
{
    const rkv_tier *tr = t->tiers.tier;
    const rkv_tcopy *c = &tr->cp;
    uint64_t lo = c->next_id - c->blen;
    if (c->blen > TC_N || (!c->on && c->blen != 0))
        return rkv_set_error(RKV_ERR_CORRUPT, "rkv_tree_check: tiers: %u copy "
                             "batches in flight", c->blen);
    uint32_t pages = 0;
    for (uint64_t id = lo; id < c->next_id; id++)
        pages += c->b[id % TC_N].stage_pages;
    if (pages != c->stage_used || c->stage_used > RKV_TCOPY_STAGE_PAGES)
        return rkv_set_error(RKV_ERR_CORRUPT, "rkv_tree_check: tiers: %u staging "
                             "pages in use, batches hold %u", c->stage_used, pages);
    for (uint32_t k = 0; k < tr->qlen; k++) {
        const rkv_queued_store *op = &tr->q[(tr->qhead + k) % tr->qcap];
        if (op->block != RKV_NIL && op->batch != 0 &&
            (op->batch < lo || op->batch >= c->next_id))
            return rkv_set_error(RKV_ERR_CORRUPT, "rkv_tree_check: tiers: store of "
                                 "slot %u in batch %llu, not in flight", op->slot,
                                 (unsigned long long)op->batch);
    }
    for (uint32_t j = 0; j < tr->njobs; j++) {
        const rkv_load_job *job = &tr->jobs[j];
        if ((!c->on && job->state != RKV_TLOAD_QUEUED) ||
            (job->state == RKV_TLOAD_INFLIGHT &&
             (job->batch < lo || job->batch >= c->next_id)))
            return rkv_set_error(RKV_ERR_CORRUPT, "rkv_tree_check: tiers: load %llu "
                                 "in state %d, batch %llu",
                                 (unsigned long long)job->ticket, job->state,
                                 (unsigned long long)job->batch);
    }
    return RKV_OK;
}

/* ---- public and test hooks ------------------------------------------------- */

rkv_status rkv_tree_tier_set_stream(rkv_tree *tree, void *cuda_stream)
{
    if (tree == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_tree_tier_set_stream: NULL tree");
    if (tree->tiers.tier != NULL && tree->tiers.tier->cp.on && tree->tiers.tier->cp.blen > 0) {
        /* the batches in flight were recorded on the old stream: let them
         * land, so nothing of ours runs on a stream the caller may now
         * destroy */
        rkv_tcopy *c = &tree->tiers.tier->cp;
        void *s = tree->tiers.tier_stream != NULL ? tree->tiers.tier_stream : c->own_stream;
        rkv_status st = c->be->stream_sync(c->device, s);
        if (st != RKV_OK)
            return rkv_cuda_status(c->be, st);
    }
    tree->tiers.tier_stream = cuda_stream;
    return RKV_OK;
}

void rkv_tree_debug_copy_fail(rkv_tree *t, int which, uint32_t k)
{
    if (t == NULL || t->tiers.tier == NULL)
        return;
    if (which == RKV_DEBUG_COPY_ISSUE)
        t->tiers.tier->cp.fail_issue = k;
    else if (which == RKV_DEBUG_COPY_QUERY)
        t->tiers.tier->cp.fail_query = k;
}

void rkv_tree_debug_copy_stall(rkv_tree *t, int on)
{
    if (t != NULL && t->tiers.tier != NULL)
        t->tiers.tier->cp.stall = on != 0;
}

uint32_t rkv_tree_debug_copy_inflight(const rkv_tree *t)
{
    return t != NULL && t->tiers.tier != NULL ? t->tiers.tier->cp.blen : 0;
}

void rkv_tree_debug_copy_calls(const rkv_tree *t, uint64_t *calls, uint64_t *pages)
{
    int on = t != NULL && t->tiers.tier != NULL;
    *calls = on ? t->tiers.tier->cp.copy_calls : 0;
    *pages = on ? t->tiers.tier->cp.copy_pages : 0;
}

int rkv_tree_debug_copy_async(const rkv_tree *t)
{
    return t != NULL && t->tiers.tier != NULL && t->tiers.tier->cp.on;
}
