/*
 * tier/disk_record.h -- the on-disk record of one block in a disk store
 * and the file header before the records (format tables in
 * tier/README.md). Pure functions over buffers; no I/O.
 *
 * A record is RKV_REC_HEADER bytes of header followed by the payload
 * (block_bytes), padded to a multiple of RKV_REC_ALIGN so that every
 * record starts and ends on an O_DIRECT boundary. All header fields are
 * little-endian, written byte by byte (the file means the same on every
 * host). The file starts with one RKV_REC_ALIGN-byte file header (magic
 * "RKVTIERF", version, block_bytes, capacity, record_bytes, flags, file
 * id) and slot i's record (magic "RKVTIER1") is at offset
 * RKV_REC_ALIGN + i * record_bytes.
 *
 * Integrity: a record carries either two XXH3-64 checksums (header and
 * payload), which detect accidents -- torn writes, flipped bits, a stale
 * or moved record -- but not tampering (anyone who can write the file can
 * recompute them), or, in a keyed store, one keyed BLAKE2b-128 MAC of the
 * file id, the header and the payload (libsodium; RKV_HAVE_SODIUM), which
 * only a holder of the key can make. A keyed store accepts only keyed
 * records, an unkeyed store only unkeyed ones.
 */
#ifndef RKV_TIER_DISK_RECORD_H
#define RKV_TIER_DISK_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "radixkv.h"

#define RKV_REC_MAGIC 0x3152454954564b52ull  /* "RKVTIER1" */
#define RKV_FILE_MAGIC 0x4652454954564b52ull /* "RKVTIERF" */
/* The file magic as 0.1.0 wrote it, bytes swapped ("RVKTIERF"): such a
 * file is a tier file of an older format (recreated, never refused). */
#define RKV_FILE_MAGIC_OLD 0x46524549544b5652ull
#define RKV_REC_VERSION 2u
#define RKV_REC_HEADER 64u
#define RKV_REC_ALIGN 4096u
#define RKV_FILE_ID_BYTES 16u
#define RKV_REC_MAC_BYTES 16u

/* Record kinds (header offset 44). */
#define RKV_REC_XXH3 0u  /* XXH3-64 of the payload @48, of the header @56  */
#define RKV_REC_KEYED 1u /* BLAKE2b-128 keyed MAC @48..63                  */

/* File header flags (offset 40). */
#define RKV_FILE_KEYED 1u

/* A keyed store's secret and its file's identity, both bound into every
 * record's MAC: a record made for another file (another store, or this
 * path in an earlier life) with the same key fails it. */
typedef struct rkv_record_auth {
    unsigned char key[RKV_STORE_MAC_KEY_BYTES];
    unsigned char file_id[RKV_FILE_ID_BYTES];
} rkv_record_auth;

/* Header + payload rounded up to RKV_REC_ALIGN; 0 on overflow. */
size_t rkv_record_bytes(size_t block_bytes);

/* Writes the header of rec (whose payload, at rec + RKV_REC_HEADER, is
 * already in place): magic, version, slot, hash, ns, block_bytes, and the
 * XXH3 checksums (auth NULL) or the keyed MAC (auth given). */
void rkv_record_seal(void *rec, uint32_t slot, uint64_t hash, uint64_t ns,
                     size_t block_bytes, const rkv_record_auth *auth);

/* Verifies a record read back (got bytes of it arrived) as seal with the
 * same auth (NULL: unkeyed) made it: RKV_OK, or RKV_ERR_CORRUPT with a
 * sentence naming the file (what) and the field that differs. Keyed: no
 * field is trusted before the MAC passed (compared in constant time). */
rkv_status rkv_record_verify(const void *rec, size_t got, uint32_t slot,
                             uint64_t hash, uint64_t ns, size_t block_bytes,
                             const rkv_record_auth *auth, const char *what);

/* Fills the RKV_REC_ALIGN-byte file header buf; auth NULL: unkeyed (file
 * id zero), else keyed with auth's file id. */
void rkv_file_header_seal(void *buf, uint64_t capacity, size_t block_bytes,
                          size_t record_bytes, const rkv_record_auth *auth);

/* What the first n bytes of an existing file (at most RKV_REC_ALIGN are
 * looked at) say about it. */
typedef enum rkv_file_kind {
    RKV_FILE_EMPTY = 0,   /* n == 0                                       */
    RKV_FILE_INTACT = 1,  /* a file header of this format, checksum good  */
    RKV_FILE_TORN = 2,    /* our magic (either spelling) but short, of
                             another version or failing its checksum     */
    RKV_FILE_ZEROED = 3,  /* only zero bytes: a header never written or
                             lost in a crash                              */
    RKV_FILE_FOREIGN = 4  /* anything else: not ours                      */
} rkv_file_kind;
rkv_file_kind rkv_file_header_classify(const void *buf, size_t n);

#endif
