/*
 * radix/tree_tokens.c -- the 3-byte token layout's wide paths (see
 * radix/tree_tokens.h): compare a stored run with the caller's int32 ids
 * and pack ids, 8 at a time with AVX2 where the CPU has it (chosen once per
 * tree at create: rkv_tok_simd_available), else the portable word code of
 * tree_tokens.h.
 *
 * Why AVX2: a plain compare of int32 ids is memcmp, which glibc runs 32
 * bytes a cycle; the portable 3-byte code needs ~3 instructions per id,
 * which made match 3x dearer in instructions. Two shuffles per 8 ids bring
 * the packed compare back to memcmp's order of cost.
 *
 * Bounds: a 32-byte load or store at stored byte 3i stays inside the run's
 * 3n bytes only while i + 11 <= n; the last ids go through an access that
 * ends exactly at the run's end (runs under 11 ids: the portable code), so
 * nothing outside the run is ever read or written.
 */
#include "radix/tree_tokens.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define RKV_TOK_AVX2 1
#include <immintrin.h>
#else
#define RKV_TOK_AVX2 0
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

__attribute__((target("avx2"))) static inline int
rkv_tok3_eq8(const uint8_t *load, __m256i perm, const int32_t *q)
{
    __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)load);
    v = _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(v, perm), RKV_WIDEN);
    __m256i w = _mm256_loadu_si256((const __m256i *)(const void *)q);
    return _mm256_movemask_epi8(_mm256_cmpeq_epi32(v, w)) == -1;
}

/* Groups of 8 ids from the front while a 32-byte access at the group stays
 * inside the run (i + 16 <= n, and one more when 11 ids are left), then
 * the last 8 ids through an access that ends exactly at the run's end; the
 * one or two ids between them (9 or 10 left) one by one. */
__attribute__((target("avx2"))) int rkv_tok3_eq_simd(const uint8_t *s,
                                                     const int32_t *q, size_t n)
{
    if (n < 11)
        return rkv_tok3_eq_words(s, q, n);
    size_t i = 0;
    /* 16 ids a round (one test of both groups), then 8 */
    for (; i + 24 <= n; i += 16)
        if (!(rkv_tok3_eq8(s + 3 * i, RKV_PERM_FRONT, q + i) &
              rkv_tok3_eq8(s + 3 * i + 24, RKV_PERM_FRONT, q + i + 8)))
            return 0;
    for (; i + 16 <= n; i += 8)
        if (!rkv_tok3_eq8(s + 3 * i, RKV_PERM_FRONT, q + i))
            return 0;
    if (n - i >= 11) {
        if (!rkv_tok3_eq8(s + 3 * i, RKV_PERM_FRONT, q + i))
            return 0;
        i += 8;
    }
    if (i + 8 < n && !rkv_tok3_eq_words(s + 3 * i, q + i, n - 8 - i))
        return 0;
    return rkv_tok3_eq8(s + 3 * n - 32, RKV_PERM_END, q + n - 8);
}

__attribute__((target("avx2"))) void rkv_tok3_store_simd(uint8_t *dst,
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
     * 8 ids: their 24 bytes in dwords 2..7 of a store ending at
     * the run's end, dwords 0..1 masked off (bytes already written) */
    if (i + 8 < n)
        rkv_tok3_store_words(dst + 3 * i, src + i, n - 8 - i);
    const __m256i end = _mm256_setr_epi32(0, 0, 0, 1, 2, 4, 5, 6);
    const __m256i mask = _mm256_setr_epi32(0, 0, -1, -1, -1, -1, -1, -1);
    __m256i w = _mm256_loadu_si256((const __m256i *)(const void *)(src + n - 8));
    w = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(w, RKV_NARROW), end);
    _mm256_maskstore_epi32((int *)(void *)(dst + 3 * n - 32), mask, w);
}
#else
int rkv_tok3_eq_simd(const uint8_t *s, const int32_t *q, size_t n)
{
    return rkv_tok3_eq_words(s, q, n);
}

void rkv_tok3_store_simd(uint8_t *dst, const int32_t *src, size_t n)
{
    rkv_tok3_store_words(dst, src, n);
}
#endif
