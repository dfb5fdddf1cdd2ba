/*
 * tier/disk_record.h -- the on-disk record of one block in a disk store
 * (format table in tier/README.md). Pure functions over a record buffer;
 * no I/O.
 *
 * A record is RKV_REC_HEADER bytes of header followed by the payload
 * (block_bytes), padded to a multiple of RKV_REC_ALIGN so that every
 * record starts and ends on an O_DIRECT boundary. All header fields are
 * little-endian, written byte by byte (the file means the same on every
 * host). The file starts with one RKV_REC_ALIGN-byte file header (magic
 * "RKVTIERF", version, block_bytes, capacity, record_bytes) and slot i's
 * record is at offset RKV_REC_ALIGN + i * record_bytes.
 */
#ifndef RKV_TIER_DISK_RECORD_H
#define RKV_TIER_DISK_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "radixkv.h"

#define RKV_REC_MAGIC 0x31524549544b5652ull  /* "RKVTIER1" */
#define RKV_FILE_MAGIC 0x46524549544b5652ull /* "RKVTIERF" */
#define RKV_REC_VERSION 1u
#define RKV_REC_HEADER 64u
#define RKV_REC_ALIGN 4096u

/* Header + payload rounded up to RKV_REC_ALIGN; 0 on overflow. */
size_t rkv_record_bytes(size_t block_bytes);

/* Writes the header of rec (whose payload, at rec + RKV_REC_HEADER, is
 * already in place): magic, version, slot, hash, ns, block_bytes, the
 * payload's XXH3-64 and the header's own XXH3-64. */
void rkv_record_seal(void *rec, uint32_t slot, uint64_t hash, uint64_t ns,
                     size_t block_bytes);

/* Verifies a record read back (got bytes of it arrived): RKV_OK, or
 * RKV_ERR_CORRUPT with a sentence naming the file (what) and the field
 * that differs. */
rkv_status rkv_record_verify(const void *rec, size_t got, uint32_t slot,
                             uint64_t hash, uint64_t ns, size_t block_bytes,
                             const char *what);

/* Fills the RKV_REC_ALIGN-byte file header buf. */
void rkv_file_header_seal(void *buf, uint64_t capacity, size_t block_bytes,
                          size_t record_bytes);
/* 1 iff buf (n bytes) starts with the file magic: a file tier made. */
int rkv_record_is_tier_file(const void *buf, size_t n);

#endif
