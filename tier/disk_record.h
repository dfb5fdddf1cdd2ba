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
 * "RKVTIERF", version, block_bytes, capacity, record_bytes, flags, page
 * tokens, file id, layout and model ids) and slot i's record (magic "RKVTIER1") is at offset
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
#define RKV_REC_VERSION 3u
#define RKV_REC_HEADER 128u
#define RKV_REC_ALIGN 4096u
#define RKV_FILE_ID_BYTES 16u
#define RKV_REC_MAC_BYTES 16u

/* Record kinds (header offset 44). */
#define RKV_REC_XXH3 0u  /* XXH3-64 of payload + tokens @112, of the header
                            @120                                          */
#define RKV_REC_KEYED 1u /* BLAKE2b-128 keyed MAC @112..127               */
/* Where the checks start: every field before them is covered. */
#define RKV_REC_CHECKS 112u

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
/* The same with room for page_tokens token ids after the payload (a
 * record that can rebuild its page in the tree: warm restart). */
size_t rkv_record_bytes_tok(size_t block_bytes, uint32_t page_tokens);

/* What a record says about its page besides the payload: its place in
 * the hash chain (the parent page's chained hash, RKV_HASH_ROOT for a
 * namespace's first page) and its token ids (ntokens 0: a record that
 * cannot rebuild its page). */
typedef struct rkv_record_chain {
    uint64_t parent;
    uint32_t ntokens;
    const int32_t *tokens; /* seal: ntokens ids                            */
} rkv_record_chain;

/* What verify_any found in a record that passed every check. */
typedef struct rkv_record_meta {
    uint64_t hash, ns;
    rkv_record_chain chain;
} rkv_record_meta;

/* Writes the header of rec (whose payload, at rec + RKV_REC_HEADER, is
 * already in place): magic, version, slot, hash, ns, block_bytes, and the
 * XXH3 checksums (auth NULL) or the keyed MAC (auth given). */
void rkv_record_seal(void *rec, uint32_t slot, uint64_t hash, uint64_t ns,
                     size_t block_bytes, const rkv_record_auth *auth);
/* seal with the page's chain (chain NULL: none): its parent at 48, token
 * count at 56, the ids (little-endian int32) right after the payload,
 * covered by the payload checksum or the MAC. The caller sized rec with
 * rkv_record_bytes_tok for at least chain->ntokens. */
void rkv_record_seal_chain(void *rec, uint32_t slot, uint64_t hash, uint64_t ns,
                           size_t block_bytes, const rkv_record_chain *chain,
                           const rkv_record_auth *auth);

/* Verifies a record read back (got bytes of it arrived) as seal with the
 * same auth (NULL: unkeyed) made it: RKV_OK, or RKV_ERR_CORRUPT with a
 * sentence naming the file (what) and the field that differs. Keyed: no
 * field is trusted before the MAC passed (compared in constant time). */
rkv_status rkv_record_verify(const void *rec, size_t got, uint32_t slot,
                             uint64_t hash, uint64_t ns, size_t block_bytes,
                             const rkv_record_auth *auth, const char *what);
/* The same checks without an expected (hash, ns) (the warm-restart scan,
 * which learns them from the record): max_tokens bounds the token count
 * (a count above it is corrupt). On RKV_OK *out holds what the record
 * says (chain.tokens NULL: rkv_record_tokens decodes them). */
rkv_status rkv_record_verify_any(const void *rec, size_t got, uint32_t slot,
                                 size_t block_bytes, uint32_t max_tokens,
                                 const rkv_record_auth *auth, const char *what,
                                 rkv_record_meta *out);

/* Fills the RKV_REC_ALIGN-byte file header buf; auth NULL: unkeyed (file
 * id zero), else keyed with auth's file id. */
void rkv_file_header_seal(void *buf, uint64_t capacity, size_t block_bytes,
                          size_t record_bytes, const rkv_record_auth *auth);

/* The n token ids of a verified record into out. */
void rkv_record_tokens(const void *rec, size_t block_bytes, uint32_t n, int32_t *out);

/* The identity a file header carries beyond its geometry: what a warm
 * restart compares before it trusts any record. */
typedef struct rkv_file_identity {
    uint64_t capacity;
    uint64_t block_bytes;
    uint64_t record_bytes;
    uint32_t page_tokens;
    uint32_t keyed;
    uint64_t layout_id;  /* the embedder's fingerprint of the KV layout   */
    uint64_t model_id;   /* the embedder's model / namespace id           */
    unsigned char file_id[RKV_FILE_ID_BYTES];
} rkv_file_identity;
/* seal with the full identity (id->file_id is used when auth is given). */
void rkv_file_header_seal_id(void *buf, const rkv_file_identity *id,
                             const rkv_record_auth *auth);
/* Reads the identity of an RKV_FILE_INTACT header. */
void rkv_file_header_read(const void *buf, rkv_file_identity *out);
/* 1 iff a keyed header's MAC verifies under auth->key. */
int rkv_file_header_mac_ok(const void *buf, const rkv_record_auth *auth);

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
