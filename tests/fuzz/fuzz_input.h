/*
 * tests/fuzz/fuzz_input.h -- the byte reader the API harnesses decode their
 * programs with (fuzz_api.c, fuzz_tiers.c). Reading past the end gives
 * zeros, so every input is a valid program and a short input is a short
 * program: libFuzzer's mutations never produce a "bad" input, only another
 * sequence of calls.
 */
#ifndef RKV_TESTS_FUZZ_INPUT_H
#define RKV_TESTS_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>

typedef struct in {
    const uint8_t *p;
    size_t n;
} in;

static inline uint8_t get8(in *s)
{
    if (s->n == 0)
        return 0;
    s->n--;
    return *s->p++;
}

/* A value in 0..bound-1 (bound >= 1): one byte, two above 256. */
static inline uint32_t below(in *s, uint32_t bound)
{
    uint32_t v = get8(s);
    if (bound > 256)
        v = v << 8 | get8(s);
    return v % bound;
}

#endif
