/*
 * radix/tree_tokens.c -- the 3-byte token layout (see radix/tree_tokens.h):
 * pack, unpack, and find the first id of a stored run that differs from
 * the caller's int32 ids; and insert's scan of a request for bad ids
 * (either layout). 8 ids at a time with AVX2 where the CPU has it
 * (chosen once per tree at create: rkv_tok_simd_available), else with
 * 64-bit words (little-endian hosts), else id by id.
 *
 * Why AVX2: a plain compare of int32 ids is memcmp, which glibc runs 32
 * bytes a cycle; the word code needs ~3 instructions per id, which made
 * match 3x dearer in instructions. One permute and one shuffle per 8 ids
 * bring the packed compare back to memcmp's order of cost.
 *
 * Bounds: a 32-byte load or store at stored byte 3i stays inside the run's
 * 3n bytes only while i + 11 <= n; the last ids go through an access that
 * ends exactly at the run's end (runs under 11 ids: the word code), so
 * nothing outside the run is ever read or written.
 */
#include "radix/tree_tokens.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define RKV_TOK_AVX2 1
#include <immintrin.h>
#else
#define RKV_TOK_AVX2 0
#endif

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define RKV_TOK3_WORDS 1 /* 8 ids = three 64-bit words, as stored bytes */
#else
#define RKV_TOK3_WORDS 0
#endif

static inline uint32_t rkv_tok3_get(const uint8_t *s)
{
    return (uint32_t)s[0] | (uint32_t)s[1] << 8 | (uint32_t)s[2] << 16;
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

static void rkv_tok3_store_words(uint8_t *dst, const int32_t *src, size_t n)
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

static size_t rkv_tok3_diff_words(const uint8_t *s, const int32_t *q, size_t n)
{
    size_t i = 0;
#if RKV_TOK3_WORDS
    for (; i + 8 <= n; i += 8) {
        uint64_t w[3], v[3];
        int ok = rkv_tok3_pack8(q + i, w);
        memcpy(v, s + 3 * i, 24);
        if (!ok || ((w[0] ^ v[0]) | (w[1] ^ v[1]) | (w[2] ^ v[2])) != 0)
            break; /* the id is among these 8: found below */
    }
#endif
    for (; i < n; i++)
        if ((uint32_t)q[i] != rkv_tok3_get(s + 3 * i))
            return i;
    return n;
}

void rkv_tok3_load(int32_t *dst, const uint8_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++, src += 3)
        dst[i] = (int32_t)rkv_tok3_get(src);
}

#if RKV_TOK_AVX2
/* Stored bytes 0..15 of a 32-byte load to lane 0 and 12..27 to lane 1
 * (PERM_FRONT: ids 0..7 of the load), or bytes 8..23 and 20..31 (PERM_END:
 * the load ends at the run's end, its ids are the last 8); then each lane's
 * four 3-byte ids widen to 32 bits with a high byte 0, so a query id >=
 * 2^24 never compares equal. */
#define RKV_PERM_FRONT _mm256_setr_epi32(0, 1, 2, 3, 3, 4, 5, 6)
#define RKV_PERM_END _mm256_setr_epi32(2, 3, 4, 5, 5, 6, 7, 7)
#define RKV_WIDEN                                                               \
    _mm256_setr_epi8(0, 1, 2, -128, 3, 4, 5, -128, 6, 7, 8, -128, 9, 10, 11,   \
                     -128, 0, 1, 2, -128, 3, 4, 5, -128, 6, 7, 8, -128, 9, 10, \
                     11, -128)
/* the reverse: each lane's four ids to 12 bytes */
#define RKV_NARROW                                                              \
    _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -128, -128, -128, \
                     -128, 0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -128, -128,  \
                     -128, -128)

/* Equal-id lanes of 8 ids (all ones: all equal). */
__attribute__((target("avx2"))) static inline __m256i
rkv_tok3_cmp8(const uint8_t *load, __m256i perm, const int32_t *q)
{
    __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)load);
    v = _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(v, perm), RKV_WIDEN);
    __m256i w = _mm256_loadu_si256((const __m256i *)(const void *)q);
    return _mm256_cmpeq_epi32(v, w);
}

/* Equal-id mask of 8 ids (4 bits an id; all ones: all equal). */
__attribute__((target("avx2"))) static inline uint32_t
rkv_tok3_eq8(const uint8_t *load, __m256i perm, const int32_t *q)
{
    return (uint32_t)_mm256_movemask_epi8(rkv_tok3_cmp8(load, perm, q));
}

/* The first differing id of a group whose mask is not all ones. */
static inline size_t rkv_tok3_at(size_t i, uint32_t mask)
{
    return i + (size_t)__builtin_ctz(~mask) / 4;
}

/* Groups of 8 ids from the front while a 32-byte access at the group stays
 * inside the run (i + 16 <= n, and one more when 11 ids are left), then
 * the last 8 ids through an access that ends exactly at the run's end; the
 * one or two ids between them (9 or 10 left) one by one. */
__attribute__((target("avx2"))) static size_t rkv_tok3_diff_simd(const uint8_t *s,
                                                                 const int32_t *q,
                                                                 size_t n)
{
    if (n < 11)
        return rkv_tok3_diff_words(s, q, n);
    size_t i = 0;
    /* 32 ids a round (one test of four groups; on a difference the groups
     * are looked at one by one below), then 16, then 8 */
    for (; i + 40 <= n; i += 32) {
        __m256i e = _mm256_and_si256(
            _mm256_and_si256(rkv_tok3_cmp8(s + 3 * i, RKV_PERM_FRONT, q + i),
                             rkv_tok3_cmp8(s + 3 * i + 24, RKV_PERM_FRONT, q + i + 8)),
            _mm256_and_si256(rkv_tok3_cmp8(s + 3 * i + 48, RKV_PERM_FRONT, q + i + 16),
                             rkv_tok3_cmp8(s + 3 * i + 72, RKV_PERM_FRONT, q + i + 24)));
        if ((uint32_t)_mm256_movemask_epi8(e) != UINT32_MAX)
            break;
    }
    for (; i + 24 <= n; i += 16) {
        uint32_t a = rkv_tok3_eq8(s + 3 * i, RKV_PERM_FRONT, q + i);
        uint32_t b = rkv_tok3_eq8(s + 3 * i + 24, RKV_PERM_FRONT, q + i + 8);
        if ((a & b) != UINT32_MAX)
            return a != UINT32_MAX ? rkv_tok3_at(i, a) : rkv_tok3_at(i + 8, b);
    }
    for (; i + 16 <= n; i += 8) {
        uint32_t a = rkv_tok3_eq8(s + 3 * i, RKV_PERM_FRONT, q + i);
        if (a != UINT32_MAX)
            return rkv_tok3_at(i, a);
    }
    if (n - i >= 11) {
        uint32_t a = rkv_tok3_eq8(s + 3 * i, RKV_PERM_FRONT, q + i);
        if (a != UINT32_MAX)
            return rkv_tok3_at(i, a);
        i += 8;
    }
    for (; i + 8 < n; i++)
        if ((uint32_t)q[i] != rkv_tok3_get(s + 3 * i))
            return i;
    uint32_t a = rkv_tok3_eq8(s + 3 * n - 32, RKV_PERM_END, q + n - 8);
    return a != UINT32_MAX ? rkv_tok3_at(n - 8, a) : n;
}

__attribute__((target("avx2"))) static int rkv_tok_valid_avx2(const int32_t *tokens,
                                                              size_t n, uint32_t bad)
{
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m256i *p = (const __m256i *)(const void *)(tokens + i);
        a0 = _mm256_or_si256(a0, _mm256_loadu_si256(p));
        a1 = _mm256_or_si256(a1, _mm256_loadu_si256(p + 1));
        a2 = _mm256_or_si256(a2, _mm256_loadu_si256(p + 2));
        a3 = _mm256_or_si256(a3, _mm256_loadu_si256(p + 3));
    }
    __m256i a = _mm256_or_si256(_mm256_or_si256(a0, a1), _mm256_or_si256(a2, a3));
    int ok = _mm256_testz_si256(a, _mm256_set1_epi32((int)bad));
    return ok && rkv_tokens_valid_bits(tokens + i, n - i, bad);
}

__attribute__((target("avx2"))) static void rkv_tok3_store_simd(uint8_t *dst,
                                                                const int32_t *src,
                                                                size_t n)
{
    if (n < 11) {
        rkv_tok3_store_words(dst, src, n);
        return;
    }
    /* front groups: lane 1's 12 bytes right after lane 0's */
    const __m256i front = _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 7, 7);
    size_t i = 0;
    for (; i + 11 <= n; i += 8) {
        __m256i w = _mm256_loadu_si256((const __m256i *)(const void *)(src + i));
        w = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(w, RKV_NARROW), front);
        _mm256_storeu_si256((__m256i *)(void *)(dst + 3 * i), w);
    }
    /* the one or two ids before the last 8 (9 or 10 left), then the last
     * 8 ids: their 24 bytes in dwords 2..7 of a store ending at the run's
     * end, dwords 0..1 masked off (bytes already written) */
    if (i + 8 < n)
        rkv_tok3_store_words(dst + 3 * i, src + i, n - 8 - i);
    const __m256i end = _mm256_setr_epi32(0, 0, 0, 1, 2, 4, 5, 6);
    const __m256i mask = _mm256_setr_epi32(0, 0, -1, -1, -1, -1, -1, -1);
    __m256i w = _mm256_loadu_si256((const __m256i *)(const void *)(src + n - 8));
    w = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(w, RKV_NARROW), end);
    _mm256_maskstore_epi32((int *)(void *)(dst + 3 * n - 32), mask, w);
}
#endif

int rkv_tok_simd_available(void)
{
#if RKV_TOK_AVX2
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
#else
    return 0;
#endif
}

int rkv_tok_valid_simd(const int32_t *tokens, size_t n, uint32_t bad)
{
#if RKV_TOK_AVX2
    return rkv_tok_valid_avx2(tokens, n, bad);
#else
    return rkv_tokens_valid_bits(tokens, n, bad);
#endif
}

size_t rkv_tok3_diff(const rkv_tree *t, const uint8_t *s, const int32_t *q,
                     size_t n)
{
#if RKV_TOK_AVX2
    if (t->tok_simd)
        return rkv_tok3_diff_simd(s, q, n);
#else
    (void)t;
#endif
    return rkv_tok3_diff_words(s, q, n);
}

void rkv_tok3_store(const rkv_tree *t, uint8_t *dst, const int32_t *src, size_t n)
{
#if RKV_TOK_AVX2
    if (t->tok_simd) {
        rkv_tok3_store_simd(dst, src, n);
        return;
    }
#else
    (void)t;
#endif
    rkv_tok3_store_words(dst, src, n);
}
