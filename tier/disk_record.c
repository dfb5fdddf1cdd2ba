/*
 * tier/disk_record.c -- encodes and verifies the disk store's block
 * records and file header (layout in tier/disk_record.h and
 * tier/README.md).
 *
 * Record header (128 bytes, little-endian; format version 3):
 *    0 magic u64   8 version u32   12 header_bytes u32   16 hash u64
 *   24 ns u64     32 block_bytes u64   40 slot u32   44 kind u32
 *   48 parent hash u64   56 token count u32   60..111 zero
 *   kind 0 (XXH3):  112 XXH3-64 of payload || tokens   120 XXH3-64 of 0..119
 *   kind 1 (keyed): 112 BLAKE2b-128 keyed MAC of file id || 0..111 ||
 *                   payload || tokens
 * The payload starts at 128; the token ids (int32, little-endian) follow
 * it. Why the parent hash and the tokens: a warm restart rebuilds the
 * tree's path of the page from the records alone.
 * Why a header checksum as well as the payload's: a torn or stale header
 * must not pass for a valid one by accident of its fields, and checking it
 * first gives a precise message (header vs payload damage). Why the keyed
 * MAC covers the file id: a record copied from another file made with the
 * same key (another store, or an earlier life of this path) is refused
 * like a forged one.
 *
 * File header (4096 bytes): 0 magic, 8 version u32, 12 header bytes u32,
 * 16 block_bytes, 24 capacity, 32 record_bytes, 40 flags u32, 44 page
 * tokens u32, 48 file id (16 bytes), 64 layout id u64, 72 model id u64,
 * 80..111 zero, 112 XXH3-64 of 0..111, 120 keyed: BLAKE2b-128 keyed MAC
 * of 0..119 (zero otherwise), the rest zero.
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

size_t rkv_record_bytes_tok(size_t block_bytes, uint32_t page_tokens)
{
    size_t tok = (size_t)page_tokens * sizeof(int32_t);
    if (block_bytes > SIZE_MAX - RKV_REC_HEADER - RKV_REC_ALIGN - tok)
        return 0;
    size_t n = RKV_REC_HEADER + block_bytes + tok;
    return (n + RKV_REC_ALIGN - 1) / RKV_REC_ALIGN * RKV_REC_ALIGN;
}

size_t rkv_record_bytes(size_t block_bytes)
{
    return rkv_record_bytes_tok(block_bytes, 0);
}

void rkv_record_seal_chain(void *rec, uint32_t slot, uint64_t hash, uint64_t ns,
                           size_t block_bytes, const rkv_record_chain *chain,
                           const rkv_record_auth *auth)
{
    unsigned char *h = rec;
    uint32_t n = chain != NULL ? chain->ntokens : 0;
    memset(h, 0, RKV_REC_HEADER);
    put64(h + 0, RKV_REC_MAGIC);
    put32(h + 8, RKV_REC_VERSION);
    put32(h + 12, RKV_REC_HEADER);
    put64(h + 16, hash);
    put64(h + 24, ns);
    put64(h + 32, (uint64_t)block_bytes);
    put32(h + 40, slot);
    put32(h + 44, auth != NULL ? RKV_REC_KEYED : RKV_REC_XXH3);
    put64(h + 48, chain != NULL ? chain->parent : 0);
    put32(h + 56, n);
    unsigned char *t = h + RKV_REC_HEADER + block_bytes;
    for (uint32_t i = 0; i < n; i++)
        put32(t + 4 * (size_t)i, (uint32_t)chain->tokens[i]);
    size_t body = block_bytes + 4 * (size_t)n;
    if (auth != NULL) {
        (void)mac(h + RKV_REC_CHECKS, auth, 1, h, RKV_REC_CHECKS, h + RKV_REC_HEADER,
                  body);
        return;
    }
    put64(h + RKV_REC_CHECKS, XXH3_64bits(h + RKV_REC_HEADER, body));
    put64(h + RKV_REC_CHECKS + 8, XXH3_64bits(h, RKV_REC_CHECKS + 8));
}

void rkv_record_seal(void *rec, uint32_t slot, uint64_t hash, uint64_t ns,
                     size_t block_bytes, const rkv_record_auth *auth)
{
    rkv_record_seal_chain(rec, slot, hash, ns, block_bytes, NULL, auth);
}

/* The checks shared by verify and verify_any; want_hash/want_ns NULL: any
 * block (the scan). */
static rkv_status verify(const void *rec, size_t got, uint32_t slot, const uint64_t *want_hash,
                         const uint64_t *want_ns, size_t block_bytes, uint32_t max_tokens,
                         const rkv_record_auth *auth, const char *what, rkv_record_meta *out)
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
    /* the token count bounds what the checks read: refused before them
     * when it cannot fit (a damaged count must not send a read past rec) */
    uint32_t n = get32(h + 56);
    if (n > max_tokens || got - RKV_REC_HEADER - block_bytes < 4 * (size_t)n)
        return rkv_set_error(RKV_ERR_CORRUPT,
                             "%s: slot %u: record claims %u token ids (room for %u)", what,
                             slot, n, max_tokens);
    size_t body = block_bytes + 4 * (size_t)n;
    if (auth != NULL) {
        unsigned char tag[RKV_REC_MAC_BYTES];
        if (!mac(tag, auth, 1, h, RKV_REC_CHECKS, h + RKV_REC_HEADER, body) ||
            !tag_equal(tag, h + RKV_REC_CHECKS))
            return rkv_set_error(RKV_ERR_CORRUPT,
                                 "%s: slot %u: record MAC mismatch (damaged, forged, or "
                                 "made for another file or key)",
                                 what, slot);
    } else if (get64(h + RKV_REC_CHECKS + 8) != XXH3_64bits(h, RKV_REC_CHECKS + 8)) {
        return rkv_set_error(RKV_ERR_CORRUPT, "%s: slot %u: header checksum mismatch",
                             what, slot);
    }
    if (get32(h + 40) != slot || get64(h + 32) != block_bytes)
        return rkv_set_error(RKV_ERR_CORRUPT,
                             "%s: slot %u: record is for slot %u with %llu-byte blocks "
                             "(expected %zu)",
                             what, slot, get32(h + 40), (unsigned long long)get64(h + 32),
                             block_bytes);
    /* want_hash and want_ns are given together (verify) or not at all */
    int other = want_hash != NULL && (get64(h + 16) != *want_hash || get64(h + 24) != *want_ns);
    if (other)
        return rkv_set_error(RKV_ERR_CORRUPT,
                             "%s: slot %u: record holds block %016llx of namespace %llu, "
                             "not %016llx of namespace %llu",
                             what, slot, (unsigned long long)get64(h + 16),
                             (unsigned long long)get64(h + 24),
                             (unsigned long long)*want_hash, (unsigned long long)*want_ns);
    if (auth == NULL && get64(h + RKV_REC_CHECKS) != XXH3_64bits(h + RKV_REC_HEADER, body))
        return rkv_set_error(RKV_ERR_CORRUPT, "%s: slot %u: payload checksum mismatch",
                             what, slot);
    if (out != NULL) {
        out->hash = get64(h + 16);
        out->ns = get64(h + 24);
        out->chain.parent = get64(h + 48);
        out->chain.ntokens = n;
        out->chain.tokens = NULL; /* rkv_record_tokens decodes them */
    }
    return RKV_OK;
}

rkv_status rkv_record_verify(const void *rec, size_t got, uint32_t slot, uint64_t hash,
                             uint64_t ns, size_t block_bytes, const rkv_record_auth *auth,
                             const char *what)
{
    /* got bounds the tokens a record may carry: a store's records are
     * read whole, with the room its page size gives */
    size_t room = got > RKV_REC_HEADER + block_bytes ? got - RKV_REC_HEADER - block_bytes : 0;
    uint32_t max_tokens = room / 4 > UINT32_MAX ? UINT32_MAX : (uint32_t)(room / 4);
    return verify(rec, got, slot, &hash, &ns, block_bytes, max_tokens, auth, what, NULL);
}

rkv_status rkv_record_verify_any(const void *rec, size_t got, uint32_t slot,
                                 size_t block_bytes, uint32_t max_tokens,
                                 const rkv_record_auth *auth, const char *what,
                                 rkv_record_meta *out)
{
    return verify(rec, got, slot, NULL, NULL, block_bytes, max_tokens, auth, what, out);
}

void rkv_record_tokens(const void *rec, size_t block_bytes, uint32_t n, int32_t *out)
{
    const unsigned char *t = (const unsigned char *)rec + RKV_REC_HEADER + block_bytes;
    for (uint32_t i = 0; i < n; i++)
        out[i] = (int32_t)get32(t + 4 * (size_t)i);
}

void rkv_file_header_seal_id(void *buf, const rkv_file_identity *id,
                             const rkv_record_auth *auth)
{
    unsigned char *h = buf;
    memset(h, 0, RKV_REC_ALIGN);
    put64(h + 0, RKV_FILE_MAGIC);
    put32(h + 8, RKV_REC_VERSION);
    put32(h + 12, RKV_REC_ALIGN);
    put64(h + 16, id->block_bytes);
    put64(h + 24, id->capacity);
    put64(h + 32, id->record_bytes);
    put32(h + 40, auth != NULL ? RKV_FILE_KEYED : 0u);
    put32(h + 44, id->page_tokens);
    if (auth != NULL)
        memcpy(h + 48, auth->file_id, RKV_FILE_ID_BYTES);
    put64(h + 64, id->layout_id);
    put64(h + 72, id->model_id);
    put64(h + 112, XXH3_64bits(h, 112));
    if (auth != NULL)
        (void)mac(h + 120, auth, 0, h, 120, NULL, 0);
}

void rkv_file_header_seal(void *buf, uint64_t capacity, size_t block_bytes,
                          size_t record_bytes, const rkv_record_auth *auth)
{
    rkv_file_identity id;
    memset(&id, 0, sizeof id);
    id.capacity = capacity;
    id.block_bytes = block_bytes;
    id.record_bytes = record_bytes;
    rkv_file_header_seal_id(buf, &id, auth);
}

void rkv_file_header_read(const void *buf, rkv_file_identity *out)
{
    const unsigned char *h = buf;
    memset(out, 0, sizeof *out);
    out->block_bytes = get64(h + 16);
    out->capacity = get64(h + 24);
    out->record_bytes = get64(h + 32);
    out->keyed = (get32(h + 40) & RKV_FILE_KEYED) != 0;
    out->page_tokens = get32(h + 44);
    memcpy(out->file_id, h + 48, RKV_FILE_ID_BYTES);
    out->layout_id = get64(h + 64);
    out->model_id = get64(h + 72);
}

int rkv_file_header_mac_ok(const void *buf, const rkv_record_auth *auth)
{
    const unsigned char *h = buf;
    unsigned char tag[RKV_REC_MAC_BYTES];
    return mac(tag, auth, 0, h, 120, NULL, 0) && tag_equal(tag, h + 120);
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
            get64(h + 112) == XXH3_64bits(h, 112))
            return RKV_FILE_INTACT;
        return RKV_FILE_TORN;
    }
    for (size_t i = 0; i < n; i++)
        if (h[i] != 0)
            return RKV_FILE_FOREIGN;
    return RKV_FILE_ZEROED;
}
