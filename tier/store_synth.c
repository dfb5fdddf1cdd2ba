/*
 * tier/store_synth.c -- synthetic payloads: a store with bytes (a disk
 * file) below a metadata-only pool, as the simulator's replay uses it to
 * exercise the real record path (O_DIRECT / io_uring, checksums, warm
 * restart) without KV bytes.
 *
 * A synthetic store's payload for block (hash, ns) is a fixed pattern of
 * block_bytes derived from (hash, ns) alone: written in place of a copy
 * from the pool, and compared in full on every load in place of a copy
 * to the pool. A load whose payload passed the record's checksums but is
 * not the pattern (another writer's bytes under a valid checksum) is
 * RKV_ERR_CORRUPT, counted in synth_mismatches; the tree turns it into a
 * miss. The tree sees the store as metadata only (rkv_store_block_bytes
 * is 0), so it may sit under a metadata-only pool and host store.
 */
#include <string.h>

#include "common/status.h"
#include "tier/store.h"
#include "tier/store_internal.h"

/* splitmix64: a fixed, portable stream; the pattern must be the same on
 * every run and host, since a warm restart reads earlier runs' records */
static uint64_t mix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void rkv_synth_fill(void *buf, size_t n, uint64_t hash, uint64_t ns)
{
    uint64_t x = hash ^ (ns * 0xd6e8feb86659fd93ull);
    unsigned char *p = buf;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t w = mix(&x);
        for (size_t k = 0; k < 8 && i + k < n; k++)
            p[i + k] = (unsigned char)(w >> (8 * k));
    }
}

rkv_status rkv_synth_verify(rkv_store *s, const void *payload, uint32_t slot,
                            uint64_t hash, uint64_t ns)
{
    uint64_t x = hash ^ (ns * 0xd6e8feb86659fd93ull);
    const unsigned char *p = payload;
    size_t n = s->block_bytes;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t w = mix(&x);
        for (size_t k = 0; k < 8 && i + k < n; k++)
            if (p[i + k] != (unsigned char)(w >> (8 * k))) {
                s->synth_mismatches++;
                return rkv_set_error(RKV_ERR_CORRUPT,
                                     "synthetic payload of slot %u (block %016llx, "
                                     "namespace %llu) differs at byte %zu",
                                     slot, (unsigned long long)hash,
                                     (unsigned long long)ns, i + k);
            }
    }
    s->synth_verified++;
    return RKV_OK;
}

rkv_status rkv_store_set_synthetic(rkv_store *s)
{
    if (s == NULL || s->ops == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_store_set_synthetic: %s",
                             s == NULL ? "NULL store" : "the store holds no bytes");
    if (s->owner != NULL)
        return rkv_set_error(RKV_ERR_BUSY, "rkv_store_set_synthetic: the store is "
                             "attached to a tree");
    s->synth = 1;
    return RKV_OK;
}

void rkv_store_synth_counts(const rkv_store *s, uint64_t *verified,
                            uint64_t *mismatches)
{
    *verified = s == NULL ? 0 : s->synth_verified;
    *mismatches = s == NULL ? 0 : s->synth_mismatches;
}
