/*
 * tests/fuzz/fuzz_record.c -- libFuzzer harness for the disk store's
 * record format (tier/disk_record.h): damage never passes verification.
 *
 * Input: 1 byte block-size class, 4 bytes slot, 8 bytes hash, 8 bytes ns,
 * 1 byte "expect" perturbation, then mutations of 4 bytes each (2 bytes
 * offset, 1 byte xor mask, 1 byte kind: even = flip, odd = truncate at the
 * offset); reading past the end gives zeros, so every input is valid. The
 * harness seals a record of a payload derived from the input, applies the
 * mutations to a copy, and verifies it against (slot, hash, ns, bb),
 * perturbed by the expect byte. What must hold:
 *   - rkv_record_verify never reads past the bytes it was given (ASan);
 *   - it returns RKV_OK iff the copy's first 64 + bb bytes arrived, equal
 *     the sealed record's, and the expected identity is the sealed one;
 *     otherwise RKV_ERR_CORRUPT with a message -- a changed padding byte
 *     (after the payload) is the only change that passes;
 *   - the sealed record itself always verifies.
 * Any violation aborts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "radixkv.h"
#include "tier/disk_record.h"

typedef struct rd {
    const uint8_t *p;
    size_t n, at;
} rd;

static uint64_t take(rd *r, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) {
        uint8_t b = r->at < r->n ? r->p[r->at] : 0;
        r->at++;
        v |= (uint64_t)b << (8 * i);
    }
    return v;
}

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_record: %s (%s)\n", what, rkv_last_error());
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const size_t classes[4] = {0, 1, 4032, 5000};
    rd r = {data, size, 0};
    size_t bb = classes[take(&r, 1) & 3];
    uint32_t slot = (uint32_t)take(&r, 4);
    uint64_t hash = take(&r, 8), ns = take(&r, 8);
    unsigned expect = (unsigned)take(&r, 1);
    size_t rb = rkv_record_bytes(bb);
    unsigned char *sealed = calloc(1, rb), *copy = malloc(rb);
    if (sealed == NULL || copy == NULL)
        fail("out of memory");
    for (size_t i = 0; i < bb; i++)
        sealed[RKV_REC_HEADER + i] = (unsigned char)(i * 131u + hash);
    rkv_record_seal(sealed, slot, hash, ns, bb);
    if (rkv_record_verify(sealed, rb, slot, hash, ns, bb, "sealed") != RKV_OK)
        fail("a sealed record does not verify");
    memcpy(copy, sealed, rb);
    size_t got = rb;
    while (r.at < r.n) {
        size_t off = (size_t)take(&r, 2) % rb;
        unsigned char mask = (unsigned char)take(&r, 1);
        if (take(&r, 1) & 1) {
            if (off < got)
                got = off;
        } else {
            copy[off] ^= mask;
        }
    }
    uint32_t eslot = slot ^ (expect & 1u);
    uint64_t ehash = hash ^ ((expect >> 1) & 1u), ens = ns ^ ((expect >> 2) & 1u);
    int same = got >= RKV_REC_HEADER + bb &&
               memcmp(copy, sealed, RKV_REC_HEADER + bb) == 0 && eslot == slot &&
               ehash == hash && ens == ns;
    /* verify gets exactly `got` bytes: a heap copy of that size, so ASan
     * sees any read past them */
    unsigned char *arrived = malloc(got > 0 ? got : 1);
    if (arrived == NULL)
        fail("out of memory");
    memcpy(arrived, copy, got);
    rkv_status st = rkv_record_verify(arrived, got, eslot, ehash, ens, bb, "fuzz");
    if (same && st != RKV_OK)
        fail("an intact record was refused");
    if (!same && st != RKV_ERR_CORRUPT)
        fail("a damaged or foreign record passed");
    if (st != RKV_OK && rkv_last_error()[0] == '\0')
        fail("no message");
    free(arrived);
    free(sealed);
    free(copy);
    return 0;
}
