/*
 * tier/store_internal.h -- the structure of an rkv_store and the small
 * table of operations a medium (host memory, disk file) provides to the
 * common part (tier/store.c: slots, (hash, ns) records, verification,
 * attach, failure injection).
 *
 * Slot metadata grows as slots are first handed out, never up front: a
 * store of the largest capacity (2^32 - 2 slots, 24 bytes each) costs
 * nothing until pages arrive, so a capacity the machine could not hold as
 * metadata is still a valid store -- it holds as many pages as memory
 * allows, and slot_alloc says RKV_ERR_NOMEM (the tree then makes room
 * like for a full store) instead of the process dying.
 *
 * Invariants (verified by rkv_store_check):
 *   - slots 0..cap-1; slots top..cap-1 were never handed out (free, no
 *     metadata); top <= alloc_n <= cap, meta[] holds alloc_n entries;
 *   - meta[i].state (i < top) is SLOT_FREE, SLOT_EMPTY (allocated, holds
 *     nothing readable) or SLOT_FULL (allocated, holds the block whose
 *     (meta[i].hash, .ns) are recorded);
 *   - the free slots below top form a LIFO stack threaded through .next:
 *     exactly the SLOT_FREE ones, each once, top - used of them; an alloc
 *     pops it, or takes slot top when it is empty (so slots are handed
 *     out in the order a stack of all slots, 0 on top, would give);
 *   - block_bytes == 0 (metadata only) iff the medium holds no bytes: no
 *     memory (host), no file (disk); ops is then NULL;
 *   - owner is the tree the store is attached to, or NULL.
 */
#ifndef RKV_TIER_STORE_INTERNAL_H
#define RKV_TIER_STORE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <sys/types.h>

#include "common/cuda_loader.h"
#include "radixkv.h"
#include "tier/disk_record.h"

enum { SLOT_FREE = 0, SLOT_EMPTY = 1, SLOT_FULL = 2 };

/* The disk file's header before the first record (tier/disk_record.h). */
#define RKV_DISK_FILE_HEADER 4096u

/* What a medium with bytes provides. The common part has already checked
 * the slot, the (hash, ns) record and the block size. */
typedef struct rkv_store_ops {
    /* A buffer of block_bytes that will become slot's payload (host: the
     * slot's memory; disk: the staging buffer). Never fails. */
    void *(*stage)(rkv_store *s, uint32_t slot);
    /* Makes the staged payload the slot's content, recorded as (hash, ns)
     * (disk: header + checksum + pwrite; host: nothing to do). */
    rkv_status (*commit)(rkv_store *s, uint32_t slot, uint64_t hash,
                         uint64_t ns);
    /* Verified payload of slot (host: its memory; disk: read into the
     * staging buffer and verified against the record). */
    rkv_status (*load)(rkv_store *s, uint32_t slot, uint64_t hash,
                       uint64_t ns, const void **payload);
    void (*destroy)(rkv_store *s);
    rkv_status (*check)(const rkv_store *s);
} rkv_store_ops;

/* The host medium's state. */
typedef struct rkv_host_mem {
    void *base;          /* cap * block_bytes, 4096-aligned               */
    size_t bytes;
    int pinned;          /* 1: page-locked through the CUDA backend      */
    rkv_cuda_lib cuda;   /* held while pinned memory lives               */
} rkv_host_mem;

/* The disk medium's state. */
typedef struct rkv_disk_file {
    int fd;
    char *path;          /* the file (owned copy)                         */
    int made_file;       /* 1: the store removes the file at close (it
                            created it, or took it over from an earlier
                            store, and holds its lock)                   */
    int origin;          /* rkv_store_file_origin                          */
    dev_t dev;           /* the file's identity, so that close removes    */
    ino_t ino;           /* only the file the store opened                 */
    int keyed;           /* 1: records carry a keyed MAC (auth)            */
    rkv_record_auth auth; /* key and file id; wiped at close               */
    int direct;          /* 1: fd is O_DIRECT now                         */
    int direct_tried;    /* 1: O_DIRECT was asked for and opened          */
    int direct_verified; /* 1: an O_DIRECT I/O succeeded                  */
    size_t record_bytes; /* header + payload, rounded up to 4096           */
    void *staging;       /* one record, 4096-aligned                      */
    int simulate_einval; /* tests: the next O_DIRECT I/O says EINVAL     */
    void *ring;          /* struct io_uring when uring, else NULL         */
    int uring;           /* 1: I/O goes through the ring                  */
    uint64_t reads, writes, fallbacks;
    /* warm restart */
    uint32_t page_tokens; /* token ids a record carries at most (0: none)  */
    uint64_t layout_id, model_id;
    int warm;            /* 1: warm_restart (the file is kept at close)    */
    int warm_pending;    /* 1: reopened warm, records not scanned yet      */
    uint64_t warm_records, warm_skipped, warm_dropped;
    /* the chain of the next commit (rkv_store_set_chain) */
    uint32_t pend_slot;  /* RKV_NO_SLOT: none                              */
    uint32_t pend_n;
    uint64_t pend_parent;
    int32_t *pend_tokens; /* page_tokens entries, or NULL                  */
} rkv_disk_file;

/* A slot's table entry, all in one record: the tier's demotions free,
 * take and record a slot of a cold page at every step, and one cache line
 * a slot costs a miss where four parallel arrays (state, link, hash, ns)
 * cost up to four. */
typedef struct rkv_slot_meta {
    uint64_t hash;  /* recorded chained hash (FULL)                        */
    uint64_t ns;    /* recorded namespace (FULL)                           */
    uint32_t next;  /* free stack link                                     */
    uint8_t state;  /* SLOT_FREE / SLOT_EMPTY / SLOT_FULL                  */
} rkv_slot_meta;

struct rkv_store {
    int medium;
    size_t block_bytes;
    uint32_t cap;
    uint32_t used;
    uint32_t top;                /* slots ever handed out: 0..top-1        */
    uint32_t alloc_n;            /* entries the arrays below hold          */
    uint32_t free_head;          /* top of the free stack or RKV_NO_SLOT   */
    rkv_slot_meta *meta;         /* [alloc_n]                              */
    const void *owner;           /* attached tree or NULL                  */
    uint32_t fail_countdown;     /* injection: the call that hits 0 fails  */
    const rkv_store_ops *ops;    /* NULL when block_bytes == 0             */
    int synth;                   /* 1: synthetic payloads (store_synth.c)  */
    uint64_t synth_verified, synth_mismatches;
    rkv_host_mem host;
    rkv_disk_file disk;
};

/* Counts one I/O or copy call; RKV_ERR_IO with a message when the armed
 * injection fires on it (and disarms). `what` names the call. */
rkv_status rkv_store_inject(rkv_store *s, const char *what);

/* Synthetic payloads (tier/store_synth.c): the pattern of (hash, ns) into
 * buf; the check of a loaded payload against it (counted either way). */
void rkv_synth_fill(void *buf, size_t n, uint64_t hash, uint64_t ns);
rkv_status rkv_synth_verify(rkv_store *s, const void *payload, uint32_t slot,
                            uint64_t hash, uint64_t ns);

/* Medium constructors: fill s->ops and the medium state from cfg (which
 * rkv_store_create validated); s->cap and s->block_bytes are set. On
 * failure nothing is left allocated. */
rkv_status rkv_host_store_open(rkv_store *s, const rkv_store_config *cfg);
rkv_status rkv_disk_store_open(rkv_store *s, const rkv_store_config *cfg);

#endif
