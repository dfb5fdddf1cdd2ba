/*
 * tier/host_store.c -- the host-memory medium: one allocation of
 * cap * block_bytes bytes, slot i at base + i * block_bytes. Blocks move
 * between it and the device pool through the pool's own copy calls
 * (tier/store.c), straight into / out of the slot's memory (no staging).
 *
 * Memory: page-locked (pinned) through the CUDA backend when cfg->pinned
 * is set and a backend with host_alloc loads and allocates (so a GPU pool's
 * copies are DMA, not bounced), otherwise 4096-byte aligned host memory.
 * Invariant: base != NULL, bytes == cap * block_bytes; host.cuda.be is
 * non-NULL iff pinned.
 */
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "tier/store.h"
#include "tier/store_internal.h"

#define HOST_ALIGN 4096u

static void *host_stage(rkv_store *s, uint32_t slot)
{
    return (char *)s->host.base + (size_t)slot * s->block_bytes;
}

static rkv_status host_commit(rkv_store *s, uint32_t slot, uint64_t hash, uint64_t ns)
{
    (void)s;
    (void)slot;
    (void)hash;
    (void)ns;
    return RKV_OK;
}

static rkv_status host_load(rkv_store *s, uint32_t slot, uint64_t hash, uint64_t ns,
                            const void **payload)
{
    (void)hash;
    (void)ns;
    *payload = host_stage(s, slot);
    return RKV_OK;
}

static void host_destroy(rkv_store *s)
{
    if (s->host.pinned) {
        s->host.cuda.be->host_free(s->host.base);
        rkv_cuda_unload(&s->host.cuda);
    } else {
        free(s->host.base);
    }
    s->host.base = NULL;
}

static rkv_status host_check(const rkv_store *s)
{
    if (s->host.base == NULL || s->host.bytes != (size_t)s->cap * s->block_bytes)
        return rkv_set_error(RKV_ERR_CORRUPT,
                             "rkv_store_check: host memory of %zu bytes for %u blocks of "
                             "%zu",
                             s->host.bytes, s->cap, s->block_bytes);
    if (s->host.pinned != (s->host.cuda.be != NULL))
        return rkv_set_error(RKV_ERR_CORRUPT,
                             "rkv_store_check: pinned memory without its backend");
    return RKV_OK;
}

static const rkv_store_ops host_ops = {
    host_stage, host_commit, host_load, host_destroy, host_check,
};

/* Page-locked memory through the CUDA backend; 0 (and nothing held) when
 * there is no backend or it cannot allocate: the caller falls back. */
static int try_pinned(rkv_store *s, size_t bytes)
{
    rkv_cuda_lib lib = {0};
    if (rkv_cuda_load("rkv_store_create", &lib) != RKV_OK)
        return 0;
    void *p = NULL;
    if (lib.be->host_alloc(bytes, &p) != RKV_OK || p == NULL) {
        rkv_cuda_unload(&lib);
        return 0;
    }
    s->host.base = p;
    s->host.pinned = 1;
    s->host.cuda = lib;
    return 1;
}

rkv_status rkv_host_store_open(rkv_store *s, const rkv_store_config *cfg)
{
    size_t bytes = (size_t)s->cap * s->block_bytes;
    memset(&s->host, 0, sizeof s->host);
    if (!(cfg->pinned && try_pinned(s, bytes))) {
        void *p = NULL;
        if (posix_memalign(&p, HOST_ALIGN, bytes) != 0 || p == NULL)
            return rkv_set_error(RKV_ERR_NOMEM,
                                 "rkv_store_create: cannot allocate %zu bytes of host "
                                 "memory (%u blocks of %zu)",
                                 bytes, s->cap, s->block_bytes);
        s->host.base = p;
    }
    /* a failed pinned attempt may have left a message; success clears it */
    rkv_clear_error();
    s->host.bytes = bytes;
    s->ops = &host_ops;
    return RKV_OK;
}

int rkv_store_pinned(const rkv_store *s)
{
    return s != NULL && s->medium == RKV_MEDIUM_HOST && s->host.pinned;
}
