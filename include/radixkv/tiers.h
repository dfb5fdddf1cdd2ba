/*
 * radixkv/tiers.h -- host and disk tiers below the device pool (tier/): the store, tier residency on the tree, loads, transfers and the store log.
 *
 * Part of the public API; include <radixkv.h> for all of it (the
 * conventions every call follows are stated there).
 */
#ifndef RADIXKV_TIERS_H
#define RADIXKV_TIERS_H

#include <stddef.h>
#include <stdint.h>

#include "radixkv/tree.h"
#include "radixkv/events.h"

RKV_BEGIN_DECLS

/*
 * A page evicted from the device pool can be kept in a lower tier -- host
 * memory, then a disk file -- and its node stays in the tree with its
 * residency recorded; only the lowest tier's eviction drops it. Each
 * lower tier evicts least recently used first; under RKV_EVICT_PRIORITY
 * lowest priority first, least recently used among equals (a page keeps
 * its priority below the device), as the device does. Design
 * notes (what was taken from SGLang HiCache, TensorRT-LLM and vLLM, and
 * what differs) are in docs/tiers.md and residency/tier.c.
 *
 * Residency invariant (rkv_tree_check verifies it):
 *   - every cached page is resident in at least one medium;
 *   - DEVICE residency is prefix-closed: a page on the device has its
 *     parent page on the device, so the device part of any path is a
 *     prefix of it and matching works exactly as without tiers;
 *   - below the device frontier a path continues in host and/or disk pages
 *     (in any mix); a page is dropped from the tree only when it leaves its
 *     last medium, and then only as a leaf (a page with cached children is
 *     demoted to the next tier down instead, or kept).
 *   - a page in a lower tier carries its chained hash and namespace with
 *     its KV bytes; a disk block records both and is verified when read
 *     back (a mismatch or short read is a miss, never wrong KV).
 *
 * Ownership: stores are created by the caller, attached to one tree
 * (rkv_tree_attach_tiers) which borrows them (they must outlive it) and
 * owns their slots from then on. One tree per store (RKV_ERR_BUSY).
 */
typedef struct rkv_store rkv_store;

typedef enum rkv_write_policy {
    RKV_WRITE_BACK = 0,      /* copy down when evicted from the device
                                (default)                                 */
    RKV_WRITE_THROUGH = 1,   /* copy down when inserted                   */
    RKV_WRITE_SELECTIVE = 2  /* copy down once a page was hit k times (a
                                hit: a non-peek rkv_tree_match_tiers that
                                matches it on the device; the scheduler's
                                admission is one)                         */
} rkv_write_policy;

typedef struct rkv_store_config {
    int medium;               /* RKV_MEDIUM_HOST or RKV_MEDIUM_DISK        */
    uint64_t capacity_blocks; /* blocks the tier holds, >= 1 (or 0 and
                                 capacity_bytes set)                       */
    uint64_t capacity_bytes;  /* alternative: blocks = bytes / block_bytes;
                                 when both are set the smaller wins         */
    size_t block_bytes;       /* KV bytes per block: must equal the pool's
                                 rkv_pool_bytes_per_block; 0 = metadata
                                 only (a simulation: no memory, no file)   */
    const char *path;         /* DISK: a file, or a directory in which the
                                 file radixkv-tier.blocks is made; copied  */
    int pinned;               /* HOST: 1 (default) = page-locked memory via
                                 the CUDA backend when it is loaded, else
                                 aligned host memory; 0 = always aligned   */
    int direct_io;            /* DISK: 1 (default) = O_DIRECT where the
                                 filesystem allows it, buffered otherwise  */
    int io_uring;             /* DISK: 1 (default) = io_uring when built
                                 with liburing, pread/pwrite otherwise     */
    const unsigned char *mac_key; /* DISK: NULL (default) = records carry
                                 XXH3 checksums, which catch accidents but
                                 not tampering; else RKV_STORE_MAC_KEY_BYTES
                                 secret bytes: every record carries a keyed
                                 BLAKE2b MAC and one that fails it (forged,
                                 or from another file) is a miss. Copied at
                                 create (the caller may wipe its buffer
                                 then; the store wipes its copy at destroy).
                                 Needs libsodium at build time, else
                                 RKV_ERR_UNSUPPORTED; on a HOST store
                                 RKV_ERR_INVALID_ARG                       */
    int warm_restart;         /* DISK: 0 (default) = the file is started
                                 afresh at create and removed at destroy;
                                 1 = a file of the same identity (below)
                                 left by an earlier store is reopened and
                                 its valid records are re-indexed when the
                                 store is attached to a tree (the tree's
                                 paths hit again); a file of another
                                 identity is refused (RKV_ERR_INVALID_ARG,
                                 the field in the message) and kept at
                                 destroy. Needs page_tokens >= 1        */
    uint32_t page_tokens;     /* DISK: tokens per page (the tree's page
                                 size): records then carry their token ids
                                 and parent hash, which a warm restart
                                 rebuilds the tree from; 0 (default) =
                                 records carry none                       */
    uint64_t layout_id;       /* DISK: the embedder's fingerprint of the KV
                                 layout (layers, heads, head_dim, dtype;
                                 rkv_pool_layout_id gives one), kept in the
                                 file header and compared at warm restart */
    uint64_t model_id;        /* DISK: the embedder's model / namespace id,
                                 kept and compared likewise              */
} rkv_store_config;
#define RKV_STORE_MAC_KEY_BYTES 32
#define RKV_STORE_MAX_PAGE_TOKENS 65536u
/* A fingerprint of the pool's KV layout (page size, layers, KV heads,
 * head_dim, dtype, bytes per block) for rkv_store_config.layout_id: the
 * same layout gives the same id on every host. 0 for NULL. */
uint64_t rkv_pool_layout_id(const rkv_pool *pool);
/* medium's defaults; capacities are 0 and must be set. */
void rkv_store_config_init(rkv_store_config *cfg, int medium);
rkv_status rkv_store_create(const rkv_store_config *cfg, rkv_store **out);
void rkv_store_destroy(rkv_store *store); /* NULL is fine; not while attached */
uint64_t rkv_store_capacity_blocks(const rkv_store *store);
uint64_t rkv_store_used_blocks(const rkv_store *store);
rkv_status rkv_store_check(const rkv_store *store);
/* What a store is using now, for logs and reports. */
typedef struct rkv_store_info {
    int medium;               /* RKV_MEDIUM_HOST or RKV_MEDIUM_DISK        */
    uint64_t capacity_blocks, used_blocks;
    size_t block_bytes;       /* 0: metadata only                          */
    int pinned;               /* HOST: page-locked memory from the CUDA
                                 backend (0: aligned host memory)          */
    int direct_io;            /* DISK: O_DIRECT in use (0: buffered, as
                                 asked or after the filesystem refused it) */
    int io_uring;             /* DISK: io_uring in use (0: pread/pwrite, as
                                 asked, without liburing at build time, or
                                 when the kernel refuses a ring)           */
    const char *path;         /* DISK: the file (valid while the store
                                 lives); NULL otherwise                    */
    uint64_t file_bytes;      /* DISK: the file's size as sized at create  */
    int file_origin;          /* DISK: rkv_store_file_origin: how the store
                                 came by its file                           */
    int keyed;                /* DISK: records carry a keyed MAC           */
    uint64_t reads, writes;   /* DISK: records read / written so far       */
    uint64_t warm_records;    /* DISK, warm restart: records re-indexed
                                 into the tree at attach                  */
    uint64_t warm_skipped;    /* ... records that failed verification or
                                 could not be read (torn, corrupt, I/O)   */
    uint64_t warm_dropped;    /* ... valid records the tree did not take
                                 (orphans whose parent is missing,
                                 duplicates, no token ids)                */
} rkv_store_info;
rkv_status rkv_store_get_info(const rkv_store *store, rkv_store_info *out);
/* rkv_store_info.file_origin. An existing file is taken only when it is a
 * regular file (not a link), owned by the caller's user, readable and
 * writable by no one else, with one name, and empty or a tier file (an
 * intact, torn or zeroed header); anything else is refused
 * (RKV_ERR_INVALID_ARG) and left as it is. A file the store created or
 * took over from an earlier store is removed at destroy; an empty file
 * given by the caller stays. */
typedef enum rkv_store_file_origin {
    RKV_STORE_FILE_CREATED = 0,   /* made by this store                     */
    RKV_STORE_FILE_EMPTY = 1,     /* an empty file the caller made          */
    RKV_STORE_FILE_REUSED = 2,    /* left by an earlier store (intact
                                     header): started afresh                */
    RKV_STORE_FILE_RECREATED = 3, /* left by a crash (torn or zeroed
                                     header, or an older format): started
                                     afresh                                 */
    RKV_STORE_FILE_WARM = 4       /* warm_restart: an intact file of the
                                     same identity, records kept            */
} rkv_store_file_origin;

typedef struct rkv_tier_config {
    rkv_store *host;          /* may be NULL                               */
    rkv_store *disk;          /* may be NULL; below host (or directly below
                                 the device when host is NULL)             */
    int write_policy;         /* rkv_write_policy                           */
    uint32_t selective_hits;  /* k for RKV_WRITE_SELECTIVE (default 2)      */
    uint32_t store_queue;     /* stores in flight at most (blocks; default
                                 1024); a store that finds it full is not
                                 made (a write-back eviction then drops the
                                 page instead of blocking)                 */
    int drop_pinned;          /* 0 (default): a pinned page may be demoted
                                 but is never dropped from the lowest tier
                                 while pinned (device pressure lowers
                                 pins, see Retention); 1: pins hold on the
                                 device only and device pressure revokes
                                 them (as before pins could be lowered)  */
} rkv_tier_config;
void rkv_tier_config_init(rkv_tier_config *cfg);

/* Attaches lower tiers to an EMPTY tree (nothing cached, no lease:
 * RKV_ERR_BUSY otherwise); NULL cfg or both stores NULL detaches. The
 * stores' block_bytes must match the pool (RKV_ERR_INVALID_ARG). Lower
 * tiers: a host store, a disk store alone (then "host" in the calls below
 * means that store: store_prefix swaps out to the disk), or both: the chain
 * device -> host -> disk, where the host's LRU writes what it evicts to the
 * disk (a node's pages at a time; on disk it stays in the tree) and only
 * the disk's LRU (leaves first, tail first) drops pages from the tree; a
 * load from the disk reads and verifies the records and frees the disk
 * copies (under every policy: a device page's copy is a host copy). With a tier attached, rkv_tree_evict /
 * rkv_tree_alloc_blocks demote instead of dropping: the least recently used
 * device-frontier page's KV goes to the host (write-back: unless already
 * there; the copy is made at once, as the device block must be free when
 * the call returns) and its node stays; the tail of a node is split off to
 * demote just what is needed when memory allows (else the whole node goes
 * down: more is freed than asked, nothing is lost). Under write-back the
 * tiers are exclusive (a completed load frees the host copy); through and
 * selective keep it. The lowest tier evicts least recently used leaf
 * pages, tail first (under RKV_EVICT_PRIORITY the host and the disk take
 * the lowest priority first, least recently used among equals, as the
 * device does). Pinned and locked pages are never demoted; a pin that
 * device pressure would revoke is lowered instead (drop_pinned 0): its
 * pages may then be demoted but the lowest tier never drops them while the
 * pin lives (see Retention). */
rkv_status rkv_tree_attach_tiers(rkv_tree *tree, const rkv_tier_config *cfg);

/* For a clean stop before a warm restart (rkv_store_config.warm_restart):
 * demotes every evictable device page (write-back, as rkv_tree_evict) and,
 * with a host store above the disk, writes every host page down to the
 * disk, so that the paths survive in the one tier that outlives the
 * process (without it a restart finds the disk's pages without their
 * parents, which were on the device or the host, and drops them). Locked
 * pages stay where they are. No tier: RKV_ERR_STATE. */
rkv_status rkv_tree_tier_flush(rkv_tree *tree);

/* Residency of a match: rkv_tree_match's matched_tokens / blocks_out are
 * the DEVICE prefix (as without tiers); rkv_tree_match_tiers also says how
 * far the path goes on in lower tiers. A non-peek call counts device hits
 * and lower hits separately in rkv_tier_stats. */
typedef struct rkv_tier_match {
    size_t host_tokens;  /* after matched_tokens: tokens whose page is in
                            host (maybe also on disk)                      */
    size_t disk_tokens;  /* of the lower part, pages only on disk          */
    size_t lower_tokens; /* host_tokens + disk_tokens: the pages right after
                            the device prefix that a load can promote      */
    uint64_t loading_ticket; /* the pages right after the device prefix are
                            being promoted by a load in flight (another
                            caller's rkv_tree_load): its ticket, else 0;
                            they match on the device once it completes
                            (lower_tokens is then 0: they are not lower) */
    size_t loading_tokens; /* the tokens of that load this match covers   */
} rkv_tier_match;
rkv_status rkv_tree_match_tiers(rkv_tree *tree, rkv_namespace ns,
                                const int32_t *tokens, size_t n,
                                rkv_block_id *blocks_out, unsigned flags,
                                rkv_match *out, rkv_tier_match *tiers_out);

/*
 * Loads (promotion). rkv_tree_load promotes up to max_pages lower-tier
 * pages that follow the device prefix of tokens[0..n): it allocates device
 * blocks (evicting other pages, never this path), queues the copies and
 * returns a ticket and an owned lease on the path's deepest loading node
 * (the caller unlocks it once the ticket completed). The pages are LOADING until the
 * ticket completes: not matchable on the device, not evictable. Copies run
 * in rkv_tree_tier_poll (host backend: memcpy / pread; CUDA backend:
 * copies on a stream, completion by event). A request waits for its own
 * ticket, never for others'.
 * A load that fails (copy error, I/O error, verification failure, injected
 * fault) leaves each page where it was (a page whose disk copy failed
 * verification leaves that tier; if it was its last copy the page and the
 * lower-only pages under it leave the tree), frees the device blocks, and
 * the caller computes those tokens; nothing is lost or double-freed.
 * The load's lease cannot be released before its ticket completes
 * (rkv_tree_unlock: RKV_ERR_BUSY); after a failure it is on the node just
 * above the path (the device prefix the caller had). Poll reports a load
 * only when out[] has room for it (it stays queued otherwise).
 * Nothing to load: *out zeroed, RKV_OK.
 * blocks_out (may be NULL; room for min(max_pages, n / page_size) ids)
 * gets the num_pages DEVICE blocks the load copies into, in token order
 * (host pages before disk pages): the destinations an engine's copy
 * kernels write, and, once the ticket completed, the blocks a match
 * returns for those pages. They are the tree's blocks, valid while the
 * load's lease is held (a failed load frees them at poll).
 */
typedef struct rkv_load {
    uint64_t ticket;      /* 0: nothing queued                              */
    uint32_t num_pages;   /* pages being promoted                           */
    uint32_t disk_pages;  /* of them, read from disk                        */
    size_t device_tokens; /* the device prefix once the ticket completes   */
    rkv_lease lease;      /* on the deepest loading node; caller releases  */
} rkv_load;
rkv_status rkv_tree_load(rkv_tree *tree, rkv_namespace ns,
                         const int32_t *tokens, size_t n, uint32_t max_pages,
                         rkv_block_id *blocks_out, rkv_load *out);

/* Prefetch: the disk part of the lower continuation of tokens[0..n) (the
 * path's DISK nodes below its device and host parts) moves up to the host
 * tier now, whole nodes top-down while they fit in max_pages, so that a
 * later rkv_tree_load of it reads host memory. Synchronous (store to
 * store, each record verified as it leaves the disk); host slots are made
 * by the host LRU as for any store (pushing its frontier down to the
 * disk), never from the path itself. A node that cannot move stays on the
 * disk and ends the prefetch (a record that fails verification leaves the
 * tree, as on a load). *pages_out: pages moved. No host + disk chain, or
 * nothing on disk: 0, RKV_OK. */
rkv_status rkv_tree_prefetch(rkv_tree *tree, rkv_namespace ns,
                             const int32_t *tokens, size_t n, uint32_t max_pages,
                             uint32_t *pages_out);

/* Swap instead of recompute: copies the cached DEVICE pages of
 * tokens[0..n) that have no host copy yet down to the host tier now, ahead
 * of the write policy (a preempted request's context, inserted by the
 * scheduler, so that when device eviction takes it the host still has it
 * and a later rkv_tree_load restores it). Bounded by the store queue like
 * any store (pages that do not fit are skipped). *ticket gets a
 * RKV_TRANSFER_SWAP_OUT ticket reported by rkv_tree_tier_poll, or 0 when
 * nothing was queued; *pages (may be NULL) the pages queued. blocks_out
 * (may be NULL; room for n / page_size ids; its contents are undefined on
 * failure) gets the *pages queued pages' SOURCE device blocks, in token
 * order: the tree's blocks, cached pages an engine must not overwrite
 * before the ticket completes. No host tier: RKV_ERR_STATE. */
rkv_status rkv_tree_store_prefix(rkv_tree *tree, rkv_namespace ns,
                                 const int32_t *tokens, size_t n,
                                 rkv_block_id *blocks_out, uint64_t *ticket,
                                 uint32_t *pages);

typedef enum rkv_transfer_kind {
    RKV_TRANSFER_LOAD = 1,   /* lower tier -> device                         */
    RKV_TRANSFER_STORE = 2,  /* device -> host/disk, host -> disk            */
    RKV_TRANSFER_SWAP_OUT = 3, /* a preempted request's blocks -> host      */
    RKV_TRANSFER_SWAP_IN = 4   /* and back                                  */
} rkv_transfer_kind;

/* One completed ticket (loads and swaps; stores complete silently). */
typedef struct rkv_transfer_done {
    uint64_t ticket;
    int kind;            /* rkv_transfer_kind                               */
    rkv_status status;   /* RKV_OK or why it failed                         */
    uint32_t num_pages;  /* pages that arrived: 0 for a failed load; a
                            failed swap-out counts the pages whose store
                            succeeded (they are in the host tier)          */
} rkv_transfer_done;

/* Runs queued copies and reports completed tickets into out[0..max);
 * *n_out gets the count. Pending stores finish here too. Host pool: the
 * copies run (memcpy / pread) and complete in this call. CUDA pool: two
 * phases (docs/tiers.md, "Asynchronous copies"): a poll queues the copies
 * of the loads and stores queued since the last one on a stream and
 * records an event; a LATER poll that finds the event complete finishes
 * them (a load's ticket is reported then, a store's host copy counts from
 * then), so poll once per step and a load's ticket completes a poll or
 * more after rkv_tree_load. At most 32 batches are in flight (a poll that
 * finds them all running queues nothing new). rkv_tree_reset and detaching
 * the tiers forget swap-out tickets not yet reported (no later poll
 * reports them; their pages are gone with the rest): a caller that waits
 * for one treats the reset as its end. */
rkv_status rkv_tree_tier_poll(rkv_tree *tree, rkv_transfer_done *out,
                              uint32_t max, uint32_t *n_out);

/* The CUDA stream (a cudaStream_t) the tier's copies of a CUDA pool run
 * on; NULL (the default) = the library's own stream, a blocking stream it
 * creates on first use and destroys with the tiers (so it is ordered with
 * work on the legacy default stream only). Set the stream on which your
 * kernels write and read the KV blocks, so that a store copies a block
 * only after it was written and a load's block is not overwritten while
 * an earlier kernel still reads it. Ownership: the stream stays the
 * caller's and must live until the tree is destroyed or another stream is
 * set; the tree never destroys it. The setting belongs to the tree (kept
 * across attaching / detaching tiers). Copies in flight on the old stream
 * are waited for before this returns, so the caller may then destroy the
 * old stream. Ignored on a host pool. RKV_ERR_CUDA if waiting for the old
 * stream failed (the stream is then not changed). */
rkv_status rkv_tree_tier_set_stream(rkv_tree *tree, void *cuda_stream);

typedef struct rkv_tier_stats {
    uint64_t resident_pages[RKV_MEDIUM_COUNT]; /* pages per medium         */
    uint64_t hit_tokens[RKV_MEDIUM_COUNT];     /* non-peek match_tiers hits,
                                                  by the fastest medium     */
    uint64_t loads_blocks[RKV_MEDIUM_COUNT];   /* promoted from the medium */
    uint64_t loads_bytes[RKV_MEDIUM_COUNT];
    uint64_t stores_blocks[RKV_MEDIUM_COUNT];  /* written into the medium  */
    uint64_t stores_bytes[RKV_MEDIUM_COUNT];
    uint64_t failed_loads;                     /* pages                    */
    uint64_t failed_stores;
    uint64_t stores_skipped;                   /* store queue full         */
    uint64_t evictions[RKV_MEDIUM_COUNT];      /* pages leaving the medium */
    uint64_t corrupt_blocks;                   /* disk reads that failed
                                                  verification              */
    uint64_t pending_stores, pending_loads;    /* in flight now (blocks)   */
} rkv_tier_stats;
rkv_status rkv_tree_tier_stats(const rkv_tree *tree, rkv_tier_stats *out);

/*
 * Store log: the blocks the tree's OWN stores read, for an engine that
 * issues the copies itself (the scheduler drains it into its plans' STORE
 * entries, see rkv_batch_plan.copies). Recorded, in order: a write-through
 * or selective store when it is queued (queued = 1: it runs in the next
 * rkv_tree_tier_poll, and its device block keeps the page's bytes until
 * then -- a demotion that meets it runs it first); a device eviction's
 * demotion store when it is made (queued = 0: the copy is done and the
 * block was freed right after, so it may hold another page by now); the
 * host tier's own writes to the disk below (from = HOST, block
 * RKV_NO_BLOCK). Not recorded: rkv_tree_store_prefix's swap-outs (its
 * blocks_out lists them) and stores skipped before they were queued or
 * made (rkv_tier_stats.stores_skipped); a queued store that fails at poll
 * stays recorded (rkv_tier_stats.failed_stores counts it).
 * Bounded: a record that finds the log full is dropped and counted in
 * lost[medium written]; recording never fails or blocks a store. Off by
 * default; one reader. A scheduler with use_tiers on a tree with tiers
 * attached owns it: it enables it at create (or at its first step after
 * the tiers are attached), drains it every step and turns it off at
 * destroy; the caller must not use it meanwhile.
 */
typedef struct rkv_store_record {
    uint64_t hash;       /* the page's chained block hash                   */
    rkv_block_id block;  /* from == RKV_MEDIUM_DEVICE: the device block read;
                            else RKV_NO_BLOCK                               */
    uint8_t from;        /* RKV_MEDIUM_DEVICE, or RKV_MEDIUM_HOST (host ->
                            disk)                                           */
    uint8_t medium;      /* written into: RKV_MEDIUM_HOST or RKV_MEDIUM_DISK */
    uint8_t queued;      /* 1: queued, runs at a later poll (its block holds
                            the page until then); 0: made, or taken since
                            (run, failed, or issued on the copy stream, at
                            a poll or by a demotion): the tree clears it
                            in place when the store is taken             */
    uint8_t reserved;
} rkv_store_record;
typedef struct rkv_store_log {
    const rkv_store_record *records; /* [num_records], oldest first; owned
                            by the tree, valid until the next clear, enable
                            or rkv_tree_destroy (stores append records and
                            clear a record's `queued` when taken)          */
    uint32_t num_records;
    uint64_t lost[RKV_MEDIUM_COUNT]; /* records dropped (log full) since the
                            last full clear, by medium written              */
} rkv_store_log;
/* capacity records (1 .. 2^24; 0 turns the log off and frees it). A new
 * capacity starts an empty log; RKV_ERR_NOMEM keeps the old one. */
rkv_status rkv_tree_store_log_enable(rkv_tree *tree, uint32_t capacity);
/* RKV_ERR_STATE while the log is off (*out zeroed). */
rkv_status rkv_tree_store_log_read(const rkv_tree *tree, rkv_store_log *out);
/* Drops the first n records (all of them, and the lost counts, when n >=
 * num_records). Nothing happens while the log is off. */
void rkv_tree_store_log_clear(rkv_tree *tree, uint32_t n);

RKV_END_DECLS

#endif /* RADIXKV_TIERS_H */
