/*
 * radix/tree_tokens.h -- how a node stores its token ids, and the one set
 * of accessors every reader of a node's tokens goes through.
 *
 * A tree stores each token id in t->tok_bytes bytes: 4 (the default: the
 * int32 id as given) or 3 (rkv_tree_config.token_bytes = 3, for
 * vocabularies below 2^24: 25 % less host memory per cached token). A
 * 3-byte id is its low 24 bits, little-endian, ids back to back (a page is
 * 3 * P bytes). Callers always see int32 ids: insert packs them, readers
 * that need ids (lazy hashes, the check) unpack a page, and match compares
 * a stored run against the caller's int32 ids directly (8 ids at a time:
 * AVX2 widening of the stored ids, radix/tree_tokens.c, or packing the
 * query's into three 64-bit words), so no query is ever copied.
 *
 * Invariants: every stored id is non-negative, and below 2^24 in the
 * 3-byte layout (insert refuses others before any state changes); so a query id outside that range can never compare equal, and
 * the packed compare treats one as a mismatch instead of truncating it.
 * Child index keys hash the int32 form of a node's first page in both
 * layouts (radix/child_index.c), so a query's key needs no packing.
 */
#ifndef RKV_RADIX_TREE_TOKENS_H
#define RKV_RADIX_TREE_TOKENS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "radix/tree_core.h"

#define RKV_TOK3_LIMIT (1u << 24)

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define RKV_TOK3_WORDS 1 /* 8 ids = three 64-bit words, as stored bytes */
#else
#define RKV_TOK3_WORDS 0
#endif

/* Stored page i of node x. */
static inline const uint8_t *rkv_tok_page(const rkv_tree *t, const rkv_tnode *x,
                                          uint32_t i)
{
    return x->u.tok8 + (size_t)i * t->page_bytes;
}

#if RKV_TOK3_WORDS
/* Ids q[0..8) packed into three words; 0 when one is out of range. */
static inline int rkv_tok3_pack8(const int32_t *q, uint64_t w[3])
{
    uint32_t a[8];
    memcpy(a, q, sizeof a);
    uint32_t or = a[0] | a[1] | a[2] | a[3] | a[4] | a[5] | a[6] | a[7];
    w[0] = a[0] | (uint64_t)a[1] << 24 | (uint64_t)a[2] << 48;
    w[1] = a[2] >> 16 | (uint64_t)a[3] << 8 | (uint64_t)a[4] << 32 |
           (uint64_t)a[5] << 56;
    w[2] = a[5] >> 8 | (uint64_t)a[6] << 16 | (uint64_t)a[7] << 40;
    return (or & 0xff000000u) == 0;
}
#endif

/* The portable 3-byte code (and the wide paths' last ids). */
static inline void rkv_tok3_store_words(uint8_t *dst, const int32_t *src, size_t n)
{
    size_t i = 0;
#if RKV_TOK3_WORDS
    for (; i + 8 <= n; i += 8, dst += 24) {
        uint64_t w[3];
        (void)rkv_tok3_pack8(src + i, w);
        memcpy(dst, w, 24);
    }
#endif
    for (; i < n; i++, dst += 3) {
        uint32_t v = (uint32_t)src[i];
        dst[0] = (uint8_t)v;
        dst[1] = (uint8_t)(v >> 8);
        dst[2] = (uint8_t)(v >> 16);
    }
}

static inline int rkv_tok3_eq_words(const uint8_t *s, const int32_t *q, size_t n)
{
    size_t i = 0;
#if RKV_TOK3_WORDS
    for (; i + 8 <= n; i += 8, s += 24) {
        uint64_t w[3], v[3];
        int ok = rkv_tok3_pack8(q + i, w);
        memcpy(v, s, 24);
        if (!ok || ((w[0] ^ v[0]) | (w[1] ^ v[1]) | (w[2] ^ v[2])) != 0)
            return 0;
    }
#endif
    for (; i < n; i++, s += 3) {
        uint32_t v = (uint32_t)s[0] | (uint32_t)s[1] << 8 | (uint32_t)s[2] << 16;
        if ((uint32_t)q[i] != v)
            return 0;
    }
    return 1;
}

/* The wide paths (radix/tree_tokens.c; the portable code where the CPU or
 * compiler has none). */
int rkv_tok_simd_available(void);
int rkv_tok3_eq_simd(const uint8_t *s, const int32_t *q, size_t n);
void rkv_tok3_store_simd(uint8_t *dst, const int32_t *src, size_t n);

/* n ids (already validated) into their stored form at dst. */
static inline void rkv_tok_store(const rkv_tree *t, uint8_t *dst,
                                 const int32_t *src, size_t n)
{
    if (t->tok_bytes == 4)
        memcpy(dst, src, n * sizeof *src);
    else if (t->tok_simd)
        rkv_tok3_store_simd(dst, src, n);
    else
        rkv_tok3_store_words(dst, src, n);
}

/* n stored ids at src back to int32 at dst. */
static inline void rkv_tok_load(const rkv_tree *t, int32_t *dst,
                                const uint8_t *src, size_t n)
{
    if (t->tok_bytes == 4) {
        memcpy(dst, src, n * sizeof *dst);
        return;
    }
    for (size_t i = 0; i < n; i++, src += 3)
        dst[i] = (int32_t)((uint32_t)src[0] | (uint32_t)src[1] << 8 |
                           (uint32_t)src[2] << 16);
}

/* Whether the n stored ids at s equal the caller's ids q[0..n). */
static inline int rkv_tok_eq(const rkv_tree *t, const uint8_t *s,
                             const int32_t *q, size_t n)
{
    if (t->tok_bytes == 4)
        return memcmp(s, q, n * sizeof *q) == 0;
    if (t->tok_simd)
        return rkv_tok3_eq_simd(s, q, n);
    return rkv_tok3_eq_words(s, q, n);
}

/* The highest bits no stored id may have: the sign bit for 4 bytes, bits
 * 24..31 for 3 (so a negative id is refused in both). */
static inline uint32_t rkv_tok_bad_bits(const rkv_tree *t)
{
    return t->tok_bytes == 4 ? 0x80000000u : 0xff000000u;
}

#endif
