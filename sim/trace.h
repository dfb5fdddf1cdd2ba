/*
 * sim/trace.h -- strict streaming reader of request traces (Mooncake and
 * Alibaba Bailian formats, with optional retention hints), and the
 * expansion of block ids into deterministic token ids.
 *
 * Format (JSONL): one JSON object per line with the fields
 *   timestamp      number, arrival in ms from the start of the trace (>= 0)
 *   input_length   integer >= 1, prompt tokens
 *   output_length  integer >= 0, generated tokens
 *   hash_ids       array of integers >= 0, one per 512-token prompt block
 * in any order; other fields are skipped (any JSON value). Blank lines
 * (whitespace only) are skipped. A line holds at most RKV_TRACE_MAX_LINE
 * bytes. Every other deviation is an error reported
 * as RKV_ERR_FORMAT with the message "NAME:LINE: what" (NAME is the file
 * name given at open, LINE is 1-based): malformed JSON, trailing text after
 * the object, a missing or duplicated field, a wrong type, a negative or
 * fractional length, or an input_length that does not fit its blocks
 * (512 * (len - 1) < input_length <= 512 * len).
 *
 * Token expansion: block id h stands for 512 token ids
 *   token 0     = (int32)(h & 0x7fffffff)
 *   token j>=1  = (int32)(rkv_splitmix64(h * 512 + j) & 0x7fffffff)
 * so equal ids give equal tokens and ids that differ in their low 31 bits
 * differ at token 0. The prompt is the concatenation of its blocks, cut to
 * input_length. All tokens are valid (non-negative) int32 ids.
 *
 * Bailian format (alibaba-edu/qwen-bailian-usagetraces-anon):
 * JSONL too, one request per line with
 *   chat_id         integer >= 0, the request's id
 *   parent_chat_id  integer >= -1, the previous turn's chat_id; -1 (also
 *                   when the field is absent) for a session's first turn
 *   timestamp       number, arrival in SECONDS (>= 0; kept in ms)
 *   input_length, output_length   as above
 *   type            optional string (text, search, image, file); checked,
 *                   not used
 *   turn            optional integer >= 0; checked, not used
 *   hash_ids        one id per 16-token block (the block size is the
 *                   format's default; --block-tokens overrides it)
 * with the same rules otherwise (B tokens per block: B * (len - 1) <
 * input_length <= B * len). A block id's tokens are the first B tokens of
 * its 512-token expansion, so equal ids still mean equal tokens.
 * Detection (RKV_TRACE_FMT_AUTO, the default): the first record decides:
 * a line with a "chat_id" field is Bailian, else Mooncake; every later
 * line is read in that format. A stated format is used from line 1.
 *
 * Retention hints (both formats, optional; README "Retention"):
 *   priority  integer 0..100: the priority of the request's context
 *   priority_duration_ms  integer 1..2^40, with priority: the priority
 *             reverts to the default that long after
 *   ttl_ms    integer 1..2^40: pin the request's context that long
 *   session   integer 0..2^64-2, or a string (its raw JSON text hashed
 *             with 64-bit FNV-1a): the session that owns the pins and
 *             whose end releases them. Bailian lines without it belong
 *             to the session of their root chat (parent_chat_id chain).
 *   session_end  true or false: true on a session's last request (the
 *             agent's answer ends without a tool call); its context's
 *             pages that no other session uses go first afterwards
 *             (rkv_tree_session_end). Under --retention hints, a line
 *             with a session and without session_end waits for its next
 *             turn (a tool).
 */
#ifndef RKV_SIM_TRACE_H
#define RKV_SIM_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "radixkv.h"

#define RKV_TRACE_BLOCK_TOKENS 512u

/* Largest accepted input_length: 2^24 = 16,777,216 tokens (32,768 hash
 * ids of 512), above any model's context. One line's work is bounded by
 * it, not by its bytes: an id spelt "0," stands for 512 tokens, and a
 * replay holds ~20 bytes per prompt token of each request in flight (its
 * tokens, page hashes, block table; with --capacity-tokens unbounded the
 * pool and tree hold every cached token too), so a 2^24-token line costs
 * ~340 MB in flight and ~45 s (the insert after each prefill chunk
 * compares the prefix again); 2^28 took gigabytes. A file's lines are
 * all in flight when they arrive together, so the replay's memory is
 * bounded by the tokens the file claims (<= 256 per byte), not by this:
 * 15 such lines (one prefix) in 1 MiB took 1.6 GB and 125 s, unbounded. */
#define RKV_TRACE_MAX_LENGTH (1u << 24)

/* Largest accepted output_length: 2^20 = 1,048,576 tokens. The scheduler
 * replay hands each decode step the request's block table, so a decode of
 * L tokens costs ~L^2 / (2 * page_size) table entries copied (2^20 tokens
 * at page 16: seconds; 2^24: many minutes from a 70-byte line). */
#define RKV_TRACE_MAX_OUTPUT (1u << 20)

/* Longest accepted line, in bytes without its newline: 1 MiB. A real
 * Mooncake line is a few KB (126,195 tokens = 247 ids ~ 2 KB); the bound
 * keeps a hostile file (one endless line, /dev/zero) from growing memory
 * without limit: "NAME:LINE: line longer than 1048576 bytes". */
#define RKV_TRACE_MAX_LINE (1u << 20)

/* The default trace linked into rkv_cli (bench/traces/, via
 * cmake/embedded_trace.S.in). */
extern const char rkv_embedded_trace_start[];
extern const char rkv_embedded_trace_end[];

/* Trace formats: detected from the first record, or stated. */
enum rkv_trace_format {
    RKV_TRACE_FMT_AUTO = 0,
    RKV_TRACE_FMT_MOONCAKE = 1, /* blocks of 512 tokens by default         */
    RKV_TRACE_FMT_BAILIAN = 2   /* blocks of 16 tokens by default          */
};
#define RKV_TRACE_BAILIAN_BLOCK_TOKENS 16u
/* "auto", "mooncake", "bailian"; NULL for another value. */
const char *rkv_trace_format_name(int format);
/* 1 and *out set when s names a format, else 0. */
int rkv_trace_format_parse(const char *s, int *out);

typedef struct rkv_trace_record {
    uint64_t line;            /* 1-based line number in the source          */
    int format;               /* RKV_TRACE_FMT_MOONCAKE or _BAILIAN         */
    uint32_t block_tokens;    /* tokens per hash id                         */
    int64_t chat_id;          /* Bailian; -1 for Mooncake                   */
    int64_t parent_chat_id;   /* Bailian; -1: first turn (or Mooncake)      */
    int32_t priority;         /* hint; -1: none                             */
    uint64_t ttl_ms;          /* hint; 0: none                              */
    uint64_t priority_duration_ms; /* hint with priority; 0: none           */
    uint64_t session;         /* hint, when has_session                     */
    uint8_t has_session;
    uint8_t session_end;      /* hint: the session's last request          */
    double timestamp_ms;
    uint32_t input_length;
    uint32_t output_length;
    uint32_t num_hash_ids;
    const uint64_t *hash_ids; /* owned by the reader; valid until the next
                                 rkv_trace_reader_next() or close           */
} rkv_trace_record;

typedef struct rkv_trace_reader rkv_trace_reader;

/* Reads lines from f (not closed by the reader). name is used in messages
 * (copied). */
rkv_status rkv_trace_reader_open_file(FILE *f, const char *name,
                                      rkv_trace_reader **out);
/* Opens path for reading (RKV_ERR_IO "PATH: No such file ..." on failure);
 * the reader closes it. "-" means stdin (named "<stdin>"). Built with zlib
 * (RKV_HAVE_ZLIB), gzip-compressed input (.gz) is decompressed; without
 * it, gzip input is refused: RKV_ERR_FORMAT "NAME:1: gzip-compressed, but
 * this radixkv was built without zlib ...". The FILE* and memory readers
 * never decompress: gzip data there is that same line-1 format error. */
rkv_status rkv_trace_reader_open_path(const char *path,
                                      rkv_trace_reader **out);
/* Reads from buf[0..len) (not copied; must outlive the reader). */
rkv_status rkv_trace_reader_open_memory(const char *buf, size_t len,
                                        const char *name,
                                        rkv_trace_reader **out);
/* The embedded default trace, named "<embedded>". */
rkv_status rkv_trace_reader_open_embedded(rkv_trace_reader **out);
void rkv_trace_reader_close(rkv_trace_reader *r); /* NULL is fine */

/* Next record. At the end of input: RKV_OK with *eof = 1. On a bad line:
 * RKV_ERR_FORMAT (or RKV_ERR_IO / RKV_ERR_NOMEM); the reader then stays in
 * that error state (every later call repeats the failure). */
rkv_status rkv_trace_reader_next(rkv_trace_reader *r, rkv_trace_record *out,
                                 int *eof);

/* States the format (RKV_TRACE_FMT_*) and the tokens per hash id (1..512;
 * 0: the format's default) before the first record: RKV_ERR_STATE after
 * it, RKV_ERR_INVALID_ARG for a bad value (nothing changes). With AUTO the
 * first record decides and the reader keeps that format. */
rkv_status rkv_trace_reader_set_format(rkv_trace_reader *r, int format,
                                       uint32_t block_tokens);
/* The format in use (AUTO until the first record) and its block size (0:
 * not known yet). */
int rkv_trace_reader_format(const rkv_trace_reader *r);
uint32_t rkv_trace_reader_block_tokens(const rkv_trace_reader *r);

/* Name given at open ("<embedded>" for the default). */
const char *rkv_trace_reader_name(const rkv_trace_reader *r);

/* Parses one line (without its newline) as a record; the hash ids go to a
 * buffer that *ids / *ids_cap describe (grown with realloc; free() it).
 * Used by the reader; exposed for tests. Messages are "NAME:LINE: what". */
rkv_status rkv_trace_parse_line(const char *line, size_t len,
                                const char *name, uint64_t line_no,
                                rkv_trace_record *out, uint64_t **ids,
                                size_t *ids_cap);
/* The same in a given format (AUTO: this line's own fields decide) and
 * block size (0: the format's default). rkv_trace_parse_line is
 * (RKV_TRACE_FMT_MOONCAKE, 0). */
rkv_status rkv_trace_parse_line_fmt(const char *line, size_t len,
                                    const char *name, uint64_t line_no,
                                    int format, uint32_t block_tokens,
                                    rkv_trace_record *out, uint64_t **ids,
                                    size_t *ids_cap);

/* splitmix64 finalizer of x (the state increment is applied to x first):
 * z = x + 0x9e3779b97f4a7c15, then the usual xor-shift-multiply rounds. */
uint64_t rkv_splitmix64(uint64_t x);

/* Token `offset` of block id h (offset < 512). */
int32_t rkv_trace_block_token(uint64_t h, uint32_t offset);
/* Tokens offset .. offset + n - 1 of block h into out (offset + n <= 512). */
void rkv_trace_block_tokens(uint64_t h, uint32_t offset, uint32_t n,
                            int32_t *out);
/* The whole prompt of a record: input_length tokens into out, which must
 * hold input_length entries. RKV_ERR_INVALID_ARG if input_length does not
 * fit the blocks. */
rkv_status rkv_trace_expand(const uint64_t *hash_ids, uint32_t num_hash_ids,
                            uint32_t input_length, int32_t *out);

#endif
