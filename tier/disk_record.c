/*
 * tier/disk_record.c -- encodes and verifies the disk store's block
 * records (layout in tier/disk_record.h and tier/README.md).
 *
 * Header (64 bytes, little-endian):
 *    0 magic u64   8 version u32   12 header_bytes u32   16 hash u64
 *   24 ns u64     32 block_bytes u64   40 slot u32   44 reserved u32 (0)
 *   48 payload XXH3-64 u64   56 header XXH3-64 of bytes 0..55 u64
 * Why a header checksum as well as the payload's: a torn or stale header
 * must not pass for a valid one by accident of its fields, and checking it
 * first gives a precise message (header vs payload damage).
 */
#include <string.h>

#include <xxhash.h>

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

size_t rkv_record_bytes(size_t block_bytes)
{
    if (block_bytes > SIZE_MAX - RKV_REC_HEADER - RKV_REC_ALIGN)
        return 0;
    size_t n = RKV_REC_HEADER + block_bytes;
    return (n + RKV_REC_ALIGN - 1) / RKV_REC_ALIGN * RKV_REC_ALIGN;
}

void rkv_record_seal(void *rec, uint32_t slot, uint64_t hash, uint64_t ns,
                     size_t block_bytes)
{
    unsigned char *h = rec;
    put64(h + 0, RKV_REC_MAGIC);
    put32(h + 8, RKV_REC_VERSION);
    put32(h + 12, RKV_REC_HEADER);
    put64(h + 16, hash);
    put64(h + 24, ns);
    put64(h + 32, (uint64_t)block_bytes);
    put32(h + 40, slot);
    put32(h + 44, 0);
    put64(h + 48, XXH3_64bits(h + RKV_REC_HEADER, block_bytes));
    put64(h + 56, XXH3_64bits(h, 56));
}

rkv_status rkv_record_verify(const void *rec, size_t got, uint32_t slot, uint64_t hash,
                             uint64_t ns, size_t block_bytes, const char *what)
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
    if (get64(h + 56) != XXH3_64bits(h, 56))
        return rkv_set_error(RKV_ERR_CORRUPT, "%s: slot %u: header checksum mismatch",
                             what, slot);
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
    if (get64(h + 48) != XXH3_64bits(h + RKV_REC_HEADER, block_bytes))
        return rkv_set_error(RKV_ERR_CORRUPT, "%s: slot %u: payload checksum mismatch",
                             what, slot);
    return RKV_OK;
}

void rkv_file_header_seal(void *buf, uint64_t capacity, size_t block_bytes,
                          size_t record_bytes)
{
    unsigned char *h = buf;
    memset(h, 0, RKV_REC_ALIGN);
    put64(h + 0, RKV_FILE_MAGIC);
    put32(h + 8, RKV_REC_VERSION);
    put32(h + 12, RKV_REC_ALIGN);
    put64(h + 16, (uint64_t)block_bytes);
    put64(h + 24, capacity);
    put64(h + 32, (uint64_t)record_bytes);
    put64(h + 56, XXH3_64bits(h, 56));
}

int rkv_record_is_tier_file(const void *buf, size_t n)
{
    return n >= 8 && get64(buf) == RKV_FILE_MAGIC;
}
