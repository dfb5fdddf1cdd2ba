/*
 * tier/store.c -- the common part of every block store: configuration,
 * the O(1) slot allocator, the per-slot (hash, ns) record and its
 * verification, the moves between a store and the device pool or another
 * store, attachment to one tree, failure injection and rkv_store_check.
 * The media (tier/host_store.c, tier/disk_store.c) only move bytes.
 *
 * The slot table (one record of state, free-stack link, hash, ns per
 * slot) grows as slots are first handed out (tier/store_internal.h), so
 * the capacity costs nothing up front.
 *
 * Why the store keeps (hash, ns) in memory even for a disk file: a read
 * is refused before any I/O when the slot does not hold the block the
 * caller names, and a metadata-only store (block_bytes 0, the simulator's)
 * gets exactly the same checks and failure paths as a real one.
 *
 * Failure semantics: write_from_pool / copy_slot that fail leave the
 * destination slot allocated but EMPTY (its previous content is no longer
 * trusted: a copy may have been half done) and everything else unchanged;
 * read_to_pool that fails leaves the store unchanged (the device block's
 * content is then undefined; the caller frees it).
 *
 * Injection points (rkv_store_fail_after counts them, per store):
 *   write_from_pool: "pool copy" then "commit" on the store;
 *   read_to_pool:    "load" then "pool copy" on the store;
 *   copy_slot:       "load" on src, then "commit" on dst.
 * Metadata-only stores have the same points (no bytes move at them).
 *
 * Design notes (the disk format, what was taken from SGLang HiCache, vLLM's
 * offloading connector and TensorRT-LLM, and what differs): tier/README.md.
 */
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "alloc/pool_copy.h"
#include "common/status.h"
#include "tier/store.h"
#include "tier/store_internal.h"

#define MAX_SLOTS (UINT32_MAX - 1u)
/* Slot metadata allocated at create (or the capacity when smaller); it
 * doubles from there as slots are first handed out. */
#define META_MIN 4096u

void rkv_store_config_init(rkv_store_config *cfg, int medium)
{
    if (cfg == NULL)
        return;
    /* The fields not named here are 0. */
    *cfg = (rkv_store_config){.medium = medium, .pinned = 1, .direct_io = 1, .io_uring = 1};
}

static rkv_status capacity_of(const rkv_store_config *cfg, uint32_t *cap)
{
    uint64_t blocks = cfg->capacity_blocks;
    if (cfg->capacity_bytes != 0 && cfg->block_bytes != 0) {
        uint64_t by_bytes = cfg->capacity_bytes / cfg->block_bytes;
        if (by_bytes == 0)
            return rkv_set_error(RKV_ERR_INVALID_ARG,
                                 "rkv_store_create: capacity_bytes %llu is less than "
                                 "one block of %zu bytes",
                                 (unsigned long long)cfg->capacity_bytes,
                                 cfg->block_bytes);
        if (blocks == 0 || by_bytes < blocks)
            blocks = by_bytes;
    }
    if (blocks == 0)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_store_create: capacity is 0 (set capacity_blocks, or "
                             "capacity_bytes with block_bytes > 0)");
    if (blocks > MAX_SLOTS)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_store_create: %llu blocks, more than the %u a store "
                             "can hold",
                             (unsigned long long)blocks, MAX_SLOTS);
    if (cfg->block_bytes != 0 && blocks > SIZE_MAX / 2 / cfg->block_bytes)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_store_create: %llu blocks of %zu bytes overflow the "
                             "address space",
                             (unsigned long long)blocks, cfg->block_bytes);
    *cap = (uint32_t)blocks;
    return RKV_OK;
}

static void free_meta(rkv_store *s)
{
    free(s->meta);
    s->meta = NULL;
    s->alloc_n = 0;
}

/* Grows the slot arrays (doubling, from META_MIN, at most cap entries).
 * A failure leaves alloc_n as it was (an array that did grow is only
 * larger) and every recorded slot intact. */
static rkv_status grow_meta(rkv_store *s)
{
    uint64_t n = s->alloc_n == 0 ? META_MIN : (uint64_t)s->alloc_n * 2;
    if (n > s->cap)
        n = s->cap;
    if (n > SIZE_MAX / sizeof *s->meta)
        return RKV_ERR_NOMEM;
    void *p = realloc(s->meta, n * sizeof *s->meta);
    if (p == NULL)
        return RKV_ERR_NOMEM;
    s->meta = p;
    s->alloc_n = (uint32_t)n;
    return RKV_OK;
}

rkv_status rkv_store_create(const rkv_store_config *cfg, rkv_store **out)
{
    if (out != NULL)
        *out = NULL;
    if (cfg == NULL || out == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_store_create: NULL argument");
    if (cfg->medium != RKV_MEDIUM_HOST && cfg->medium != RKV_MEDIUM_DISK)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_store_create: medium %d is not RKV_MEDIUM_HOST (%d) or "
                             "RKV_MEDIUM_DISK (%d)",
                             cfg->medium, RKV_MEDIUM_HOST, RKV_MEDIUM_DISK);
    uint32_t cap = 0;
    rkv_status st = capacity_of(cfg, &cap);
    if (st != RKV_OK)
        return st;
    if (cfg->medium == RKV_MEDIUM_DISK && cfg->block_bytes != 0 &&
        (cfg->path == NULL || cfg->path[0] == '\0'))
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_store_create: a disk store needs a path (a file or a "
                             "directory)");

    if (cfg->warm_restart &&
        (cfg->medium != RKV_MEDIUM_DISK || cfg->block_bytes == 0 || cfg->page_tokens == 0))
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_store_create: warm_restart is for disk stores with bytes "
                             "(block_bytes > 0) whose records carry their tokens "
                             "(page_tokens = the tree's page size)");
    if (cfg->page_tokens > RKV_STORE_MAX_PAGE_TOKENS)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_store_create: page_tokens %u (at most %u)", cfg->page_tokens,
                             RKV_STORE_MAX_PAGE_TOKENS);
    if (cfg->mac_key != NULL && cfg->medium != RKV_MEDIUM_DISK)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_store_create: mac_key is for disk stores (a host "
                             "store's memory is the process's own)");
#ifndef RKV_HAVE_SODIUM
    if (cfg->mac_key != NULL)
        return rkv_set_error(RKV_ERR_UNSUPPORTED,
                             "rkv_store_create: mac_key given, but radixkv was built "
                             "without libsodium (RKV_SODIUM=OFF): records cannot be "
                             "authenticated");
#endif

    rkv_store *s = calloc(1, sizeof *s);
    if (s == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_store_create: out of memory");
    s->medium = cfg->medium;
    s->block_bytes = cfg->block_bytes;
    s->cap = cap;
    s->top = 0;
    s->free_head = RKV_NO_SLOT;
    s->disk.fd = -1;
    if (grow_meta(s) != RKV_OK) {
        free_meta(s);
        free(s);
        return rkv_set_error(RKV_ERR_NOMEM,
                             "rkv_store_create: out of memory for the slot table");
    }
    if (cfg->block_bytes != 0) {
        st = cfg->medium == RKV_MEDIUM_HOST ? rkv_host_store_open(s, cfg)
                                             : rkv_disk_store_open(s, cfg);
        if (st != RKV_OK) {
            free_meta(s);
            free(s);
            return st;
        }
    }
    *out = s;
    return RKV_OK;
}

void rkv_store_destroy(rkv_store *store)
{
    if (store == NULL)
        return;
    if (store->ops != NULL)
        store->ops->destroy(store);
    free_meta(store);
    free(store);
}

uint64_t rkv_store_capacity_blocks(const rkv_store *store)
{
    return store == NULL ? 0 : store->cap;
}

uint64_t rkv_store_used_blocks(const rkv_store *store)
{
    return store == NULL ? 0 : store->used;
}

int rkv_store_medium(const rkv_store *s)
{
    return s == NULL ? -1 : s->medium;
}

size_t rkv_store_block_bytes(const rkv_store *s)
{
    /* a synthetic store's bytes are its own: to the tree it holds none */
    return s == NULL || s->synth ? 0 : s->block_bytes;
}

uint32_t rkv_store_free_slots(const rkv_store *s)
{
    return s == NULL ? 0 : s->cap - s->used;
}

uint32_t rkv_store_slot_span(const rkv_store *s)
{
    return s == NULL ? 0 : s->top;
}

size_t rkv_store_table_bytes(const rkv_store *s)
{
    return s == NULL ? 0
                     : (size_t)s->alloc_n * sizeof *s->meta;
}

int rkv_store_slot_holds(const rkv_store *s, uint32_t slot, uint64_t hash, uint64_t ns)
{
    return s != NULL && slot < s->top && s->meta[slot].state == SLOT_FULL &&
           s->meta[slot].hash == hash && s->meta[slot].ns == ns;
}

void rkv_store_fail_after(rkv_store *s, uint32_t k)
{
    if (s != NULL)
        s->fail_countdown = k;
}

rkv_status rkv_store_inject(rkv_store *s, const char *what)
{
    if (s->fail_countdown == 0 || --s->fail_countdown != 0)
        return RKV_OK;
    return rkv_set_error(RKV_ERR_IO, "%s store: injected failure at %s",
                         s->medium == RKV_MEDIUM_HOST ? "host" : "disk", what);
}

rkv_status rkv_store_get_info(const rkv_store *store, rkv_store_info *out)
{
    if (store == NULL || out == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_store_get_info: NULL argument");
    memset(out, 0, sizeof *out);
    out->medium = store->medium;
    out->capacity_blocks = store->cap;
    out->used_blocks = store->used;
    out->block_bytes = store->block_bytes;
    out->pinned = rkv_store_pinned(store);
    if (store->medium == RKV_MEDIUM_DISK && store->ops != NULL) {
        out->direct_io = store->disk.direct;
        out->io_uring = store->disk.uring;
        out->path = store->disk.path;
        out->file_bytes = RKV_DISK_FILE_HEADER + (uint64_t)store->cap * store->disk.record_bytes;
        out->file_origin = store->disk.origin;
        out->keyed = store->disk.keyed;
        out->reads = store->disk.reads;
        out->writes = store->disk.writes;
        out->warm_records = store->disk.warm_records;
        out->warm_skipped = store->disk.warm_skipped;
        out->warm_dropped = store->disk.warm_dropped;
    }
    return RKV_OK;
}

/* ---- slots ---------------------------------------------------------------- */

rkv_status rkv_store_slot_alloc(rkv_store *s, uint32_t *slot)
{
    if (s == NULL || slot == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_store_slot_alloc: NULL argument");
    rkv_status st = rkv_store_slot_take(s, slot);
    if (st == RKV_ERR_NO_SPACE)
        return rkv_set_error(RKV_ERR_NO_SPACE,
                             "rkv_store_slot_alloc: all %u slots are in use", s->cap);
    return st;
}

rkv_status rkv_store_slot_take(rkv_store *s, uint32_t *slot)
{
    uint32_t i = s->free_head;
    if (i != RKV_NO_SLOT) {
        s->free_head = s->meta[i].next;
    } else {
        if (s->top == s->cap)
            return RKV_ERR_NO_SPACE; /* the caller's usual case: no message */
        if (s->top == s->alloc_n && grow_meta(s) != RKV_OK)
            return rkv_set_error(RKV_ERR_NOMEM,
                                 "rkv_store_slot_alloc: out of memory for the table of "
                                 "slot %u of %u (the store holds %u blocks)",
                                 s->top, s->cap, s->used);
        i = s->top++;
        s->meta[i].hash = 0;
        s->meta[i].ns = 0;
    }
    s->meta[i].next = RKV_NO_SLOT;
    s->meta[i].state = SLOT_EMPTY;
    s->used++;
    *slot = i;
    return RKV_OK;
}

rkv_status rkv_store_slot_claim(rkv_store *s, uint32_t slot, uint64_t hash, uint64_t ns)
{
    if (s == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_store_slot_claim: NULL store");
    if (slot >= s->cap || slot < s->top)
        return rkv_set_error(RKV_ERR_STATE,
                             "rkv_store_slot_claim: slot %u is %s", slot,
                             slot >= s->cap ? "out of range" : "below slots handed out");
    while (s->alloc_n <= slot)
        if (grow_meta(s) != RKV_OK)
            return rkv_set_error(RKV_ERR_NOMEM,
                                 "rkv_store_slot_claim: out of memory for the table of "
                                 "slot %u of %u", slot, s->cap);
    /* the slots passed over were never handed out: free, on the stack */
    for (uint32_t i = s->top; i < slot; i++) {
        s->meta[i].state = SLOT_FREE;
        s->meta[i].hash = s->meta[i].ns = 0;
        s->meta[i].next = s->free_head;
        s->free_head = i;
    }
    s->top = slot + 1;
    s->meta[slot].state = SLOT_FULL;
    s->meta[slot].next = RKV_NO_SLOT;
    s->meta[slot].hash = hash;
    s->meta[slot].ns = ns;
    s->used++;
    return RKV_OK;
}

rkv_status rkv_store_slot_free(rkv_store *s, uint32_t slot)
{
    if (s == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_store_slot_free: NULL store");
    if (slot >= s->top || s->meta[slot].state == SLOT_FREE)
        return rkv_set_error(RKV_ERR_STATE,
                             "rkv_store_slot_free: slot %u is %s", slot,
                             slot >= s->cap ? "out of range" : "already free");
    s->meta[slot].state = SLOT_FREE;
    s->meta[slot].hash = 0;
    s->meta[slot].ns = 0;
    s->meta[slot].next = s->free_head;
    s->free_head = slot;
    s->used--;
    return RKV_OK;
}

rkv_status rkv_store_slot_recycle(rkv_store *s, uint32_t slot)
{
    if (slot >= s->top || s->meta[slot].state == SLOT_FREE)
        return rkv_set_error(RKV_ERR_STATE, "rkv_store_slot_recycle: slot %u is %s", slot,
                             slot >= s->cap ? "out of range" : "free");
    /* what slot_free then slot_take leave: free_head and used unchanged */
    s->meta[slot].state = SLOT_EMPTY;
    s->meta[slot].hash = 0;
    s->meta[slot].ns = 0;
    s->meta[slot].next = RKV_NO_SLOT;
    return RKV_OK;
}

/* ---- attachment ----------------------------------------------------------- */

rkv_status rkv_store_attach(rkv_store *s, const void *owner)
{
    if (s == NULL || owner == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_store_attach: NULL argument");
    if (s->owner != NULL && s->owner != owner)
        return rkv_set_error(RKV_ERR_BUSY,
                             "rkv_store_attach: the store is attached to another tree");
    s->owner = owner;
    return RKV_OK;
}

/* The tree's claims on the slots end with the attachment: every slot is
 * freed, so a store can be attached to a new tree afterwards. */
void rkv_store_detach(rkv_store *s, const void *owner)
{
    if (s == NULL || owner == NULL || s->owner != owner)
        return;
    s->owner = NULL;
    s->used = 0;
    s->top = 0; /* every slot is again one never handed out */
    s->free_head = RKV_NO_SLOT;
}

const void *rkv_store_owner(const rkv_store *s)
{
    return s == NULL ? NULL : s->owner;
}

/* ---- moves ------------------------------------------------------------------ */

static rkv_status check_dst_slot(const rkv_store *s, const char *fn, uint32_t slot)
{
    if (slot >= s->top || s->meta[slot].state == SLOT_FREE)
        return rkv_set_error(RKV_ERR_STATE, "%s: slot %u is %s", fn, slot,
                             slot >= s->cap ? "out of range" : "not allocated");
    return RKV_OK;
}

/* The read side's verification against the in-memory record. */
static rkv_status check_src_slot(const rkv_store *s, const char *fn, uint32_t slot,
                                 uint64_t hash, uint64_t ns)
{
    rkv_status st = check_dst_slot(s, fn, slot);
    if (st != RKV_OK)
        return st;
    if (s->meta[slot].state != SLOT_FULL)
        return rkv_set_error(RKV_ERR_CORRUPT, "%s: slot %u holds no block", fn, slot);
    if (s->meta[slot].hash != hash || s->meta[slot].ns != ns)
        return rkv_set_error(RKV_ERR_CORRUPT,
                             "%s: slot %u holds block %016llx of namespace %llu, not "
                             "%016llx of namespace %llu",
                             fn, slot, (unsigned long long)s->meta[slot].hash,
                             (unsigned long long)s->meta[slot].ns, (unsigned long long)hash,
                             (unsigned long long)ns);
    return RKV_OK;
}

/* The pool itself (block_ok: each block), split so a batch checks the
 * pool once. */
static rkv_status check_pool_blocks(const rkv_store *s, const char *fn, rkv_pool *pool)
{
    if (pool == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL pool", fn);
    if (rkv_pool_bytes_per_block(pool) != rkv_store_block_bytes(s))
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: the pool's blocks are %zu bytes, the store's %zu", fn,
                             rkv_pool_bytes_per_block(pool), rkv_store_block_bytes(s));
    return RKV_OK;
}

static rkv_status check_block(const char *fn, rkv_pool *pool, rkv_block_id block)
{
    /* rkv_pool_refcount is 0 for a block out of range */
    if (rkv_pool_refcount(pool, block) == 0)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: block %u is not an allocated block",
                             fn, block);
    return RKV_OK;
}

static rkv_status check_pool(const rkv_store *s, const char *fn, rkv_pool *pool,
                             rkv_block_id block)
{
    rkv_status st = check_pool_blocks(s, fn, pool);
    return st == RKV_OK ? check_block(fn, pool, block) : st;
}

static rkv_status commit(rkv_store *s, uint32_t slot, uint64_t hash, uint64_t ns)
{
    rkv_status st = rkv_store_inject(s, "commit");
    if (st == RKV_OK && s->ops != NULL)
        st = s->ops->commit(s, slot, hash, ns);
    if (st != RKV_OK)
        return st;
    s->meta[slot].state = SLOT_FULL;
    s->meta[slot].hash = hash;
    s->meta[slot].ns = ns;
    return RKV_OK;
}

static rkv_status load(rkv_store *s, uint32_t slot, uint64_t hash, uint64_t ns,
                       const void **payload)
{
    *payload = NULL;
    rkv_status st = rkv_store_inject(s, "load");
    if (st == RKV_OK && s->ops != NULL)
        st = s->ops->load(s, slot, hash, ns, payload);
    return st;
}

/* A checked slot emptied (so a copy that fails never leaves a stale
 * record), its fault point, and *dst = its staging bytes. */
static rkv_status write_empty(rkv_store *s, uint32_t slot, void **dst)
{
    s->meta[slot].state = SLOT_EMPTY;
    s->meta[slot].hash = 0;
    s->meta[slot].ns = 0;
    rkv_status st = rkv_store_inject(s, "pool copy");
    if (st == RKV_OK && s->ops != NULL)
        *dst = s->ops->stage(s, slot);
    return st;
}

/* The checks and slot reset shared by the synchronous and the asynchronous
 * write from a pool: the slot is emptied first so that a copy that fails
 * (now or when its event is queried) never leaves a stale record behind.
 * *dst is the slot's staging bytes (NULL for a store without bytes). */
static rkv_status write_prepare(rkv_store *s, const char *fn, uint32_t slot,
                                rkv_pool *pool, rkv_block_id block, void **dst)
{
    rkv_status st = check_dst_slot(s, fn, slot);
    if (st == RKV_OK)
        st = check_pool(s, fn, pool, block);
    if (st != RKV_OK)
        return st;
    return write_empty(s, slot, dst);
}

rkv_status rkv_store_write_from_pool(rkv_store *s, uint32_t slot, rkv_pool *pool,
                                     rkv_block_id block, uint64_t hash, uint64_t ns)
{
    static const char fn[] = "rkv_store_write_from_pool";
    if (s == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL store", fn);
    void *dst = NULL;
    rkv_status st = write_prepare(s, fn, slot, pool, block, &dst);
    if (st == RKV_OK && dst != NULL) {
        if (s->synth)
            rkv_synth_fill(dst, s->block_bytes, hash, ns);
        else
            st = rkv_pool_copy_to_host(pool, 1, &block, dst);
    }
    if (st != RKV_OK)
        return st;
    return commit(s, slot, hash, ns);
}

rkv_status rkv_store_write_begin(rkv_store *s, uint32_t slot, rkv_pool *pool,
                                 rkv_block_id block, void **dst)
{
    static const char fn[] = "rkv_store_write_begin";
    *dst = NULL;
    if (s == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL store", fn);
    if (s->medium != RKV_MEDIUM_HOST)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: only a host store takes asynchronous writes", fn);
    return write_prepare(s, fn, slot, pool, block, dst);
}

rkv_status rkv_store_write_end(rkv_store *s, uint32_t slot, uint64_t hash, uint64_t ns)
{
    rkv_status st = check_dst_slot(s, "rkv_store_write_end", slot);
    return st == RKV_OK ? commit(s, slot, hash, ns) : st;
}

/* The checks, load and fault point shared by the synchronous and the
 * asynchronous read into a pool: *payload is the verified record's bytes
 * (NULL for a store without bytes or on failure). */
static rkv_status read_prepare(rkv_store *s, const char *fn, uint32_t slot, rkv_pool *pool,
                               rkv_block_id block, uint64_t hash, uint64_t ns,
                               const void **payload)
{
    *payload = NULL;
    if (s == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL store", fn);
    rkv_status st = check_src_slot(s, fn, slot, hash, ns);
    if (st == RKV_OK)
        st = check_pool(s, fn, pool, block);
    if (st == RKV_OK)
        st = load(s, slot, hash, ns, payload);
    if (st == RKV_OK && s->synth) {
        /* nothing moves to the pool: the pattern check is the load */
        st = rkv_synth_verify(s, *payload, slot, hash, ns);
        *payload = NULL;
    }
    if (st == RKV_OK)
        st = rkv_store_inject(s, "pool copy");
    return st;
}

rkv_status rkv_store_read_begin(rkv_store *s, uint32_t slot, rkv_pool *pool,
                                rkv_block_id block, uint64_t hash, uint64_t ns,
                                const void **payload)
{
    return read_prepare(s, "rkv_store_read_begin", slot, pool, block, hash, ns, payload);
}

rkv_status rkv_store_read_to_pool(rkv_store *s, uint32_t slot, rkv_pool *pool,
                                  rkv_block_id block, uint64_t hash, uint64_t ns)
{
    const void *payload = NULL;
    rkv_status st = read_prepare(s, "rkv_store_read_to_pool", slot, pool, block, hash, ns,
                                 &payload);
    if (st == RKV_OK && payload != NULL)
        st = rkv_pool_copy_from_host(pool, 1, &block, payload);
    return st;
}

/* The arguments of a batched call. */
static rkv_status batch_args(const rkv_store *s, const char *fn, uint32_t n)
{
    if (s == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL store", fn);
    if (n > RKV_STORE_BATCH)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: %u blocks, at most %u a call", fn, n,
                             RKV_STORE_BATCH);
    return RKV_OK;
}

rkv_status rkv_store_write_from_pool_n(rkv_store *s, uint32_t n, const uint32_t *slots,
                                       rkv_pool *pool, const rkv_block_id *blocks,
                                       const uint64_t *hashes, uint64_t ns, void *stream,
                                       uint32_t *done)
{
    static const char fn[] = "rkv_store_write_from_pool_n";
    *done = 0;
    rkv_status st = batch_args(s, fn, n);
    if (st != RKV_OK)
        return st;
    if (s->medium != RKV_MEDIUM_HOST) { /* one staging buffer: record by record */
        for (uint32_t i = 0; i < n && st == RKV_OK; i++)
            if ((st = rkv_store_write_from_pool(s, slots[i], pool, blocks[i], hashes[i],
                                                ns)) == RKV_OK)
                ++*done;
        return st;
    }
    /* the slots before one that fails its checks are still written, as n
     * single calls would have written them */
    void *dst[RKV_STORE_BATCH];
    uint32_t m = 0;
    if (n > 0 && (st = check_pool_blocks(s, fn, pool)) != RKV_OK)
        return st;
    while (m < n && (st = check_dst_slot(s, fn, slots[m])) == RKV_OK &&
           (st = check_block(fn, pool, blocks[m])) == RKV_OK &&
           (st = write_empty(s, slots[m], &dst[m])) == RKV_OK)
        m++;
    rkv_status cst = RKV_OK;
    if (m > 0 && s->ops != NULL) {
        if (s->synth)
            for (uint32_t i = 0; i < m; i++)
                rkv_synth_fill(dst[i], s->block_bytes, hashes[i], ns);
        else
            cst = rkv_pool_copy_pairs(pool, stream, m, blocks, dst, 1);
    }
    if (cst != RKV_OK)
        return cst; /* no copy is known good: none is recorded */
    for (uint32_t i = 0; i < m; i++) {
        if ((cst = commit(s, slots[i], hashes[i], ns)) != RKV_OK)
            return cst;
        ++*done;
    }
    return st; /* the check that stopped it (its message still the last) */
}

rkv_status rkv_store_read_to_pool_n(rkv_store *s, uint32_t n, const uint32_t *slots,
                                    rkv_pool *pool, const rkv_block_id *blocks,
                                    const uint64_t *hashes, uint64_t ns, void *stream,
                                    uint32_t *bad)
{
    static const char fn[] = "rkv_store_read_to_pool_n";
    *bad = 0;
    rkv_status st = batch_args(s, fn, n);
    if (st != RKV_OK)
        return st;
    if (s->medium != RKV_MEDIUM_HOST) { /* one staging buffer: record by record */
        for (uint32_t i = 0; i < n; i++, ++*bad)
            if ((st = rkv_store_read_to_pool(s, slots[i], pool, blocks[i], hashes[i],
                                             ns)) != RKV_OK)
                return st;
        return RKV_OK;
    }
    const void *src[RKV_STORE_BATCH];
    for (uint32_t i = 0; i < n; i++, ++*bad)
        if ((st = read_prepare(s, fn, slots[i], pool, blocks[i], hashes[i], ns, &src[i])) !=
            RKV_OK)
            return st;
    if (n > 0 && src[0] != NULL) { /* a host store with bytes: every payload is a slot's */
        *bad = 0;
        if ((st = rkv_pool_copy_pairs(pool, stream, n, blocks, (void *const *)src, 0)) !=
            RKV_OK)
            return st;
    }
    *bad = n;
    return RKV_OK;
}

rkv_status rkv_store_copy_slot(rkv_store *dst, uint32_t dst_slot, rkv_store *src,
                               uint32_t src_slot, uint64_t hash, uint64_t ns)
{
    static const char fn[] = "rkv_store_copy_slot";
    if (dst == NULL || src == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL store", fn);
    if (dst == src && dst_slot == src_slot)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: slot %u onto itself", fn, dst_slot);
    if (rkv_store_block_bytes(dst) != rkv_store_block_bytes(src) ||
        (dst->synth && src->synth && dst->block_bytes != src->block_bytes))
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: blocks of %zu bytes into a store of %zu-byte blocks", fn,
                             src->block_bytes, dst->block_bytes);
    rkv_status st = check_src_slot(src, fn, src_slot, hash, ns);
    if (st == RKV_OK)
        st = check_dst_slot(dst, fn, dst_slot);
    if (st != RKV_OK)
        return st;
    const void *payload = NULL;
    /* the source is read before the destination is touched: a failed load
     * leaves both as they were */
    if ((st = load(src, src_slot, hash, ns, &payload)) != RKV_OK)
        return st;
    /* a synthetic source is verified as it leaves; into a metadata-only
     * store nothing more moves */
    if (src->synth && !dst->synth &&
        (st = rkv_synth_verify(src, payload, src_slot, hash, ns)) != RKV_OK)
        return st;
    dst->meta[dst_slot].state = SLOT_EMPTY;
    dst->meta[dst_slot].hash = 0;
    dst->meta[dst_slot].ns = 0;
    if (dst->ops != NULL) {
        void *buf = dst->ops->stage(dst, dst_slot);
        if (payload == NULL) /* from a metadata-only store: dst is synthetic */
            rkv_synth_fill(buf, dst->block_bytes, hash, ns);
        else if (buf != payload)
            memcpy(buf, payload, dst->block_bytes);
    }
    return commit(dst, dst_slot, hash, ns);
}

/* ---- check ------------------------------------------------------------------ */

rkv_status rkv_store_check(const rkv_store *s)
{
    if (s == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_store_check: NULL store");
    if (s->medium != RKV_MEDIUM_HOST && s->medium != RKV_MEDIUM_DISK)
        return rkv_set_error(RKV_ERR_CORRUPT, "rkv_store_check: medium %d", s->medium);
    if (s->used > s->top || s->top > s->alloc_n || s->alloc_n > s->cap)
        return rkv_set_error(RKV_ERR_CORRUPT,
                             "rkv_store_check: %u used, %u handed out, %u in the table, "
                             "capacity %u",
                             s->used, s->top, s->alloc_n, s->cap);
    if ((s->block_bytes == 0) != (s->ops == NULL))
        return rkv_set_error(RKV_ERR_CORRUPT,
                             "rkv_store_check: block_bytes %zu but %s byte medium",
                             s->block_bytes, s->ops == NULL ? "no" : "a");
    uint32_t used = 0;
    for (uint32_t i = 0; i < s->top; i++) {
        if (s->meta[i].state > SLOT_FULL)
            return rkv_set_error(RKV_ERR_CORRUPT, "rkv_store_check: slot %u state %u", i,
                                 s->meta[i].state);
        if (s->meta[i].state != SLOT_FREE)
            used++;
        if (s->meta[i].state != SLOT_FULL && (s->meta[i].hash != 0 || s->meta[i].ns != 0))
            return rkv_set_error(RKV_ERR_CORRUPT,
                                 "rkv_store_check: slot %u holds no block but records one",
                                 i);
    }
    if (used != s->used)
        return rkv_set_error(RKV_ERR_CORRUPT,
                             "rkv_store_check: %u slots allocated, %u counted", used,
                             s->used);
    /* the free stack: exactly the free slots below top, each once (a
     * chain longer than their count is a cycle or a used slot) */
    uint32_t nfree = 0;
    for (uint32_t i = s->free_head; i != RKV_NO_SLOT; i = s->meta[i].next) {
        if (i >= s->top)
            return rkv_set_error(RKV_ERR_CORRUPT,
                                 "rkv_store_check: free stack holds slot %u of %u handed "
                                 "out",
                                 i, s->top);
        if (s->meta[i].state != SLOT_FREE)
            return rkv_set_error(RKV_ERR_CORRUPT,
                                 "rkv_store_check: allocated slot %u on the free stack", i);
        if (++nfree > s->top - s->used)
            return rkv_set_error(RKV_ERR_CORRUPT,
                                 "rkv_store_check: free stack longer than the %u free "
                                 "slots (a cycle)",
                                 s->top - s->used);
    }
    if (nfree != s->top - s->used)
        return rkv_set_error(RKV_ERR_CORRUPT,
                             "rkv_store_check: %u slots on the free stack, %u free", nfree,
                             s->top - s->used);
    return s->ops != NULL ? s->ops->check(s) : RKV_OK;
}

uint64_t rkv_pool_layout_id(const rkv_pool *pool)
{
    rkv_pool_config c;
    if (pool == NULL || rkv_pool_get_config(pool, &c) != RKV_OK)
        return 0;
    /* each field in a fixed width, little-endian: the same id on every
     * host for the same layout */
    uint64_t f[6] = {c.page_size, c.num_layers, c.num_kv_heads, c.head_dim,
                     (uint64_t)c.dtype, rkv_pool_bytes_per_block(pool)};
    unsigned char b[sizeof f];
    for (size_t i = 0; i < 6; i++)
        for (int k = 0; k < 8; k++)
            b[8 * i + (size_t)k] = (unsigned char)(f[i] >> (8 * k));
    return XXH3_64bits(b, sizeof b);
}
