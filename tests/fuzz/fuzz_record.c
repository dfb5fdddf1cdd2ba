/*
 * tests/fuzz/fuzz_record.c -- libFuzzer harness for the disk store's
 * record format (tier/disk_record.h): damage never passes verification.
 *
 * Input: 1 byte block-size class (bits 0-1) and mode (bit 2: keyed, when
 * built with libsodium; bit 3: the verifier holds another key (bit 4) or
 * file id, differing in byte bits 5-7), 4 bytes slot, 8 bytes hash, 8 bytes ns,
 * 1 byte "expect" perturbation, then mutations of 4 bytes each (2 bytes
 * offset, 1 byte xor mask, 1 byte kind: even = flip, odd = truncate at the
 * offset); reading past the end gives zeros, so every input is valid. The
 * harness seals a record of a payload derived from the input, applies the
 * mutations to a copy, and verifies it against (slot, hash, ns, bb),
 * perturbed by the expect byte, with the sealing key (or none) or another
 * one. What must hold:
 *   - rkv_record_verify never reads past the bytes it was given (ASan);
 *   - it returns RKV_OK iff the copy's first 64 + bb bytes arrived, equal
 *     the sealed record's, the expected identity is the sealed one and
 *     the verifier's key and file id are the sealer's;
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
    unsigned mode = (unsigned)take(&r, 1);
    size_t bb = classes[mode & 3];
    rkv_record_auth auth, other;
    const rkv_record_auth *seal_auth = NULL, *verify_auth = NULL;
#ifdef RKV_HAVE_SODIUM
    if (mode & 4) {
        for (unsigned i = 0; i < sizeof auth.key; i++)
            auth.key[i] = (unsigned char)(i * 29u + 7u);
        for (unsigned i = 0; i < sizeof auth.file_id; i++)
            auth.file_id[i] = (unsigned char)(i + 1u);
        other = auth;
        if (mode & 16) /* the key, or else the file id, differs */
            other.key[mode >> 5] ^= 1;
        else
            other.file_id[mode >> 5] ^= 0x80;
        seal_auth = &auth;
        verify_auth = mode & 8 ? &other : &auth;
    }
#else
    (void)auth;
    (void)other;
#endif
    uint32_t slot = (uint32_t)take(&r, 4);
    uint64_t hash = take(&r, 8), ns = take(&r, 8);
    unsigned expect = (unsigned)take(&r, 1);
#ifdef RKV_HAVE_SODIUM
    /* expect bit 3: the verifier is of the other kind (keyed vs not) */
    if (expect & 8)
        verify_auth = verify_auth != NULL ? NULL : &auth;
    if (seal_auth == NULL && verify_auth != NULL) {
        for (unsigned i = 0; i < sizeof auth.key; i++)
            auth.key[i] = (unsigned char)i;
        memset(auth.file_id, 0, sizeof auth.file_id);
    }
#endif
    size_t rb = rkv_record_bytes(bb);
    unsigned char *sealed = calloc(1, rb), *copy = malloc(rb);
    if (sealed == NULL || copy == NULL)
        fail("out of memory");
    for (size_t i = 0; i < bb; i++)
        sealed[RKV_REC_HEADER + i] = (unsigned char)(i * 131u + hash);
    rkv_record_seal(sealed, slot, hash, ns, bb, seal_auth);
    if (rkv_record_verify(sealed, rb, slot, hash, ns, bb, seal_auth, "sealed") != RKV_OK)
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
               ehash == hash && ens == ns && verify_auth == seal_auth;
    /* verify gets exactly `got` bytes: a heap copy of that size, so ASan
     * sees any read past them */
    unsigned char *arrived = malloc(got > 0 ? got : 1);
    if (arrived == NULL)
        fail("out of memory");
    memcpy(arrived, copy, got);
    rkv_status st = rkv_record_verify(arrived, got, eslot, ehash, ens, bb, verify_auth,
                                      "fuzz");
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
