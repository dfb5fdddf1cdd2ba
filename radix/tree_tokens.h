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
 * AVX2 widening of the stored ids, or packing the query's into three
 * 64-bit words: radix/tree_tokens.c), so no query is ever copied.
 *
 * The 4-byte path is what the accessors inline (one test, then memcpy or
 * memcmp exactly as before the layout existed); the 3-byte code is out of
 * line in radix/tree_tokens.c.
 *
 * Invariants: every stored id is non-negative, and below 2^24 in the
 * 3-byte layout (insert refuses others before any state changes); so a
 * query id outside that range can never compare equal, and the packed
 * compare treats one as a mismatch instead of truncating it.
 * Child index keys hash the int32 form of a node's first page in both
 * layouts (radix/child_index.c), so a query's key needs no packing.
 */
#ifndef RKV_RADIX_TREE_TOKENS_H
#define RKV_RADIX_TREE_TOKENS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/status.h"
#include "radix/tree_core.h"

/* Stored page i of node x. */
static inline const uint8_t *rkv_tok_page(const rkv_tree *t, const rkv_tnode *x,
                                          uint32_t i)
{
    return x->u.tok8 + (size_t)i * t->page_bytes;
}

/* The 3-byte layout (radix/tree_tokens.c). */
int rkv_tok_simd_available(void);
/* Index of the first of q[0..n) that differs from the n stored ids at s,
 * or n. */
size_t rkv_tok3_diff(const rkv_tree *t, const uint8_t *s, const int32_t *q,
                     size_t n);
void rkv_tok3_store(const rkv_tree *t, uint8_t *dst, const int32_t *src, size_t n);
void rkv_tok3_load(int32_t *dst, const uint8_t *src, size_t n);
int rkv_tok_valid_simd(const int32_t *tokens, size_t n, uint32_t bad);

/* No id among tokens[0..n) has a bit of bad set (insert's scan of a
 * request: AVX2, 32 ids a round, where the CPU has it). */
static inline int rkv_tok_valid(const rkv_tree *t, const int32_t *tokens,
                                size_t n, uint32_t bad)
{
    if (t->tok_simd)
        return rkv_tok_valid_simd(tokens, n, bad);
    return rkv_tokens_valid_bits(tokens, n, bad);
}

/* n ids (already validated) into their stored form at dst. */
static inline void rkv_tok_store(const rkv_tree *t, uint8_t *dst,
                                 const int32_t *src, size_t n)
{
    if (RKV_LIKELY(t->tok_bytes == 4))
        memcpy(dst, src, n * sizeof *src);
    else
        rkv_tok3_store(t, dst, src, n);
}

/* n stored ids at src back to int32 at dst. */
static inline void rkv_tok_load(const rkv_tree *t, int32_t *dst,
                                const uint8_t *src, size_t n)
{
    if (RKV_LIKELY(t->tok_bytes == 4))
        memcpy(dst, src, n * sizeof *dst);
    else
        rkv_tok3_load(dst, src, n);
}

/* Whether the n stored ids at s equal the caller's ids q[0..n). */
static inline int rkv_tok_eq(const rkv_tree *t, const uint8_t *s,
                             const int32_t *q, size_t n)
{
    if (RKV_LIKELY(t->tok_bytes == 4))
        return memcmp(s, q, n * sizeof *q) == 0;
    return rkv_tok3_diff(t, s, q, n) == n;
}

/* The walk's compare: pages 1..lim-1 of node x against q's (page 0 is the
 * one the child index found); returns the first page that differs, or
 * lim. 4 bytes: one memcmp for the common all-equal case, then page by
 * page; 3 bytes: the first differing id, found in one pass. */
static inline uint32_t rkv_tok_pages_equal(const rkv_tree *t, const rkv_tnode *x,
                                           const int32_t *q, uint32_t lim)
{
    if (lim <= 1)
        return lim;
    const uint32_t P = t->P;
    if (RKV_UNLIKELY(t->tok_bytes != 4))
        return 1 + (uint32_t)(rkv_tok3_diff(t, rkv_tok_page(t, x, 1), q + P,
                                            (size_t)(lim - 1) * P) / P);
    const size_t pb = t->page_bytes;
    if (memcmp(x->u.tokens + P, q + P, (size_t)(lim - 1) * pb) == 0)
        return lim;
    uint32_t k = 1;
    while (k < lim && memcmp(x->u.tokens + (size_t)k * P, q + (size_t)k * P, pb) == 0)
        k++;
    return k;
}

/* The highest bits no stored id may have: the sign bit for 4 bytes, bits
 * 24..31 for 3 (so a negative id is refused in both). */
static inline uint32_t rkv_tok_bad_bits(const rkv_tree *t)
{
    return t->tok_bytes == 4 ? 0x80000000u : 0xff000000u;
}

#endif
