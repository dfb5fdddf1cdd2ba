/*
 * tier/disk_record.c -- encodes and verifies the disk store's block
 * records and file header (layout in tier/disk_record.h and
 * tier/README.md).
 *
 * Record header (64 bytes, little-endian):
 *    0 magic u64   8 version u32   12 header_bytes u32   16 hash u64
 *   24 ns u64     32 block_bytes u64   40 slot u32   44 kind u32
 *   kind 0 (XXH3):  48 payload XXH3-64 u64   56 header XXH3-64 of 0..55
 *   kind 1 (keyed): 48 BLAKE2b-128 keyed MAC of file id || 0..47 || payload
 * Why a header checksum as well as the payload's: a torn or stale header
 * must not pass for a valid one by accident of its fields, and checking it
 * first gives a precise message (header vs payload damage). Why the keyed
 * MAC covers the file id: a record copied from another file made with the
 * same key (another store, or an earlier life of this path) is refused
 * like a forged one.
 *
 * File header (4096 bytes): 0 magic, 8 version u32, 12 header bytes u32,
 * 16 block_bytes, 24 capacity, 32 record_bytes, 40 flags u32, 44 reserved
 * u32, 48 file id (16 bytes), 64 XXH3-64 of 0..63, 72 keyed: BLAKE2b-128
 * keyed MAC of 0..71 (zero otherwise), the rest zero.
 */
#include <string.h>

#include <xxhash.h>
#ifdef RKV_HAVE_SODIUM
#include <sodium.h>
#endif

#include "common/status.h"
#include "tier/disk_record.h"

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static uint64_t get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* BLAKE2b-128 keyed by auth->key over (a, na) then (b, nb), prefixed by
 * the file id when with_id. 0 when built without libsodium (no keyed
 * store can exist then: rkv_store_create refuses the key). */
static int mac(unsigned char out[RKV_REC_MAC_BYTES], const rkv_record_auth *auth,
               int with_id, const unsigned char *a, size_t na, const unsigned char *b,
               size_t nb)
{
#ifdef RKV_HAVE_SODIUM
    crypto_generichash_state st;
    if (crypto_generichash_init(&st, auth->key, RKV_STORE_MAC_KEY_BYTES,
                                RKV_REC_MAC_BYTES) != 0)
        return 0;
    if (with_id)
        crypto_generichash_update(&st, auth->file_id, RKV_FILE_ID_BYTES);
    crypto_generichash_update(&st, a, na);
    if (nb > 0)
        crypto_generichash_update(&st, b, nb);
    int ok = crypto_generichash_final(&st, out, RKV_REC_MAC_BYTES) == 0;
    sodium_memzero(&st, sizeof st);
    return ok;
#else
    (void)auth;
    (void)with_id;
    (void)a;
    (void)na;
    (void)b;
    (void)nb;
    memset(out, 0, RKV_REC_MAC_BYTES);
    return 0;
#endif
}

/* Constant-time comparison of two tags: a timing side channel must not
 * let an attacker find a valid tag byte by byte. */
static int tag_equal(const unsigned char *x, const unsigned char *y)
{
#ifdef RKV_HAVE_SODIUM
    return sodium_memcmp(x, y, RKV_REC_MAC_BYTES) == 0;
#else
    unsigned char d = 0;
    for (unsigned i = 0; i < RKV_REC_MAC_BYTES; i++)
        d |= (unsigned char)(x[i] ^ y[i]);
    return d == 0;
#endif
}

size_t rkv_record_bytes(size_t block_bytes)
{
    if (block_bytes > SIZE_MAX - RKV_REC_HEADER - RKV_REC_ALIGN)
        return 0;
    size_t n = RKV_REC_HEADER + block_bytes;
    return (n + RKV_REC_ALIGN - 1) / RKV_REC_ALIGN * RKV_REC_ALIGN;
}

void rkv_record_seal(void *rec, uint32_t slot, uint64_t hash, uint64_t ns,
                     size_t block_bytes, const rkv_record_auth *auth)
{
    unsigned char *h = rec;
    put64(h + 0, RKV_REC_MAGIC);
    put32(h + 8, RKV_REC_VERSION);
    put32(h + 12, RKV_REC_HEADER);
    put64(h + 16, hash);
    put64(h + 24, ns);
    put64(h + 32, (uint64_t)block_bytes);
    put32(h + 40, slot);
    put32(h + 44, auth != NULL ? RKV_REC_KEYED : RKV_REC_XXH3);
    if (auth != NULL) {
        (void)mac(h + 48, auth, 1, h, 48, h + RKV_REC_HEADER, block_bytes);
        return;
    }
    put64(h + 48, XXH3_64bits(h + RKV_REC_HEADER, block_bytes));
    put64(h + 56, XXH3_64bits(h, 56));
}

rkv_status rkv_record_verify(const void *rec, size_t got, uint32_t slot, uint64_t hash,
                             uint64_t ns, size_t block_bytes, const rkv_record_auth *auth,
                             const char *what)
{
    const unsigned char *h = rec;
    if (got < RKV_REC_HEADER + block_bytes)
        return rkv_set_error(RKV_ERR_CORRUPT,
                             "%s: slot %u: short read, %zu of %zu bytes (truncated file)",
                             what, slot, got, (size_t)RKV_REC_HEADER + block_bytes);
    if (get64(h) != RKV_REC_MAGIC)
        return rkv_set_error(RKV_ERR_CORRUPT, "%s: slot %u: no record (bad magic)", what,
                             slot);
    if (get32(h + 8) != RKV_REC_VERSION || get32(h + 12) != RKV_REC_HEADER)
        return rkv_set_error(RKV_ERR_CORRUPT,
                             "%s: slot %u: record format %u (header %u bytes), expected "
                             "%u (%u)",
                             what, slot, get32(h + 8), get32(h + 12), RKV_REC_VERSION,
                             RKV_REC_HEADER);
    uint32_t kind = get32(h + 44), want = auth != NULL ? RKV_REC_KEYED : RKV_REC_XXH3;
    if (kind != want)
        return rkv_set_error(RKV_ERR_CORRUPT,
                             "%s: slot %u: record of kind %u (%s) in %s store", what, slot,
                             kind,
                             kind == RKV_REC_KEYED  ? "keyed MAC"
                             : kind == RKV_REC_XXH3 ? "unauthenticated checksums"
                                                    : "unknown",
                             auth != NULL ? "a keyed" : "an unkeyed");
    if (auth != NULL) {
        unsigned char tag[RKV_REC_MAC_BYTES];
        if (!mac(tag, auth, 1, h, 48, h + RKV_REC_HEADER, block_bytes) ||
            !tag_equal(tag, h + 48))
            return rkv_set_error(RKV_ERR_CORRUPT,
                                 "%s: slot %u: record MAC mismatch (damaged, forged, or "
                                 "made for another file or key)",
                                 what, slot);
    } else if (get64(h + 56) != XXH3_64bits(h, 56)) {
        return rkv_set_error(RKV_ERR_CORRUPT, "%s: slot %u: header checksum mismatch",
                             what, slot);
    }
    if (get32(h + 40) != slot || get64(h + 32) != block_bytes)
        return rkv_set_error(RKV_ERR_CORRUPT,
                             "%s: slot %u: record is for slot %u with %llu-byte blocks "
                             "(expected %zu)",
                             what, slot, get32(h + 40), (unsigned long long)get64(h + 32),
                             block_bytes);
    if (get64(h + 16) != hash || get64(h + 24) != ns)
        return rkv_set_error(RKV_ERR_CORRUPT,
                             "%s: slot %u: record holds block %016llx of namespace %llu, "
                             "not %016llx of namespace %llu",
                             what, slot, (unsigned long long)get64(h + 16),
                             (unsigned long long)get64(h + 24), (unsigned long long)hash,
                             (unsigned long long)ns);
    if (auth == NULL && get64(h + 48) != XXH3_64bits(h + RKV_REC_HEADER, block_bytes))
        return rkv_set_error(RKV_ERR_CORRUPT, "%s: slot %u: payload checksum mismatch",
                             what, slot);
    return RKV_OK;
}

void rkv_file_header_seal(void *buf, uint64_t capacity, size_t block_bytes,
                          size_t record_bytes, const rkv_record_auth *auth)
{
    unsigned char *h = buf;
    memset(h, 0, RKV_REC_ALIGN);
    put64(h + 0, RKV_FILE_MAGIC);
    put32(h + 8, RKV_REC_VERSION);
    put32(h + 12, RKV_REC_ALIGN);
    put64(h + 16, (uint64_t)block_bytes);
    put64(h + 24, capacity);
    put64(h + 32, (uint64_t)record_bytes);
    put32(h + 40, auth != NULL ? RKV_FILE_KEYED : 0u);
    if (auth != NULL)
        memcpy(h + 48, auth->file_id, RKV_FILE_ID_BYTES);
    put64(h + 64, XXH3_64bits(h, 64));
    if (auth != NULL)
        (void)mac(h + 72, auth, 0, h, 72, NULL, 0);
}

rkv_file_kind rkv_file_header_classify(const void *buf, size_t n)
{
    const unsigned char *h = buf;
    if (n == 0)
        return RKV_FILE_EMPTY;
    if (n > RKV_REC_ALIGN)
        n = RKV_REC_ALIGN;
    if (n >= 8 && (get64(h) == RKV_FILE_MAGIC || get64(h) == RKV_FILE_MAGIC_OLD)) {
        if (n == RKV_REC_ALIGN && get64(h) == RKV_FILE_MAGIC &&
            get32(h + 8) == RKV_REC_VERSION && get32(h + 12) == RKV_REC_ALIGN &&
            get64(h + 64) == XXH3_64bits(h, 64))
            return RKV_FILE_INTACT;
        return RKV_FILE_TORN;
    }
    for (size_t i = 0; i < n; i++)
        if (h[i] != 0)
            return RKV_FILE_FOREIGN;
    return RKV_FILE_ZEROED;
}
