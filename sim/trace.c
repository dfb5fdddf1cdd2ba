/*
 * sim/trace.c -- the Mooncake JSONL trace reader and block-id expansion
 * (see trace.h for the format and the rules).
 *
 * Owns: the reader over a FILE*, a zlib stream (built with zlib: paths and
 * '-' are read through gzread, so .gz traces are decompressed and plain
 * ones read as they are) or a memory buffer (lines of at most
 * RKV_TRACE_MAX_LINE bytes, blank lines, line numbers, sticky failure) and
 * the token expansion. Parsing one line
 * is trace_parse.c's job.
 * Invariants: a reader reports every line in order exactly once; after a
 * failure it stays failed (the same status and message on every later call),
 * so a caller can never silently skip a bad line. Nothing here prints.
 */
#include "sim/trace.h"

#include <errno.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"

#ifdef RKV_HAVE_ZLIB
#include <zlib.h>
#endif

/* ------------------------------------------------------------------------ */
/* token expansion                                                          */
/* ------------------------------------------------------------------------ */

uint64_t rkv_splitmix64(uint64_t x)
{
    uint64_t z = x + 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

int32_t rkv_trace_block_token(uint64_t h, uint32_t offset)
{
    if (offset == 0)
        return (int32_t)(h & 0x7fffffffu);
    return (int32_t)(rkv_splitmix64(h * RKV_TRACE_BLOCK_TOKENS + offset) &
                     0x7fffffffu);
}

void rkv_trace_block_tokens(uint64_t h, uint32_t offset, uint32_t n,
                            int32_t *out)
{
    /* the hot loop of every replay (each prompt token, every request):
     * token 0 apart, one splitmix64 per token, no per-token branch */
    uint32_t j = 0;
    if (n && offset == 0) {
        out[0] = (int32_t)(h & 0x7fffffffu);
        j = 1;
    }
    uint64_t base = h * RKV_TRACE_BLOCK_TOKENS + offset;
    for (; j < n; j++)
        out[j] = (int32_t)(rkv_splitmix64(base + j) & 0x7fffffffu);
}

rkv_status rkv_trace_expand(const uint64_t *hash_ids, uint32_t num_hash_ids,
                            uint32_t input_length, int32_t *out)
{
    uint64_t cap = (uint64_t)num_hash_ids * RKV_TRACE_BLOCK_TOKENS;
    if (!out || (num_hash_ids && !hash_ids) || input_length > cap ||
        (num_hash_ids && input_length <= cap - RKV_TRACE_BLOCK_TOKENS))
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_trace_expand: input_length %u does not fit "
                             "%u blocks of %u tokens",
                             input_length, num_hash_ids,
                             RKV_TRACE_BLOCK_TOKENS);
    uint32_t done = 0;
    for (uint32_t b = 0; b < num_hash_ids; b++) {
        uint32_t n = input_length - done;
        if (n > RKV_TRACE_BLOCK_TOKENS)
            n = RKV_TRACE_BLOCK_TOKENS;
        rkv_trace_block_tokens(hash_ids[b], 0, n, out + done);
        done += n;
    }
    return RKV_OK;
}

/* ------------------------------------------------------------------------ */
/* the reader                                                               */
/* ------------------------------------------------------------------------ */

struct rkv_trace_reader {
    FILE *f;            /* file mode: a stdio stream, or                   */
    void *gz;           /*   a zlib stream (gzFile; plain or gzip data)    */
    int close_f;        /* the reader opened f                             */
    const char *buf;    /* memory mode                                     */
    size_t len, pos;
    char *chunk;        /* file mode: bytes read ahead of the line        */
    size_t chunk_pos, chunk_len;
    int src_eof;
    uint64_t bytes_read; /* from the source so far                        */
    char *line;         /* the current line (file mode)                    */
    size_t line_cap;
    uint64_t line_no;   /* lines consumed so far                           */
    uint64_t *ids;      /* hash ids of the current record                  */
    size_t ids_cap;
    rkv_status failed;  /* sticky failure                                  */
    int format;         /* RKV_TRACE_FMT_*; AUTO until the first record    */
    uint32_t block_tokens; /* 0: the format's default                       */
    uint64_t records;   /* records returned so far                         */
    char *fail_msg;
    char *name;
};

#define RKV_TRACE_CHUNK 65536u

/* A reader with nothing to read yet, in *out (set only on success). */
static rkv_status reader_new(const char *name, rkv_trace_reader **out)
{
    if (!out)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "trace reader: out is NULL");
    rkv_trace_reader *r = calloc(1, sizeof *r);
    if (!r)
        return rkv_set_error(RKV_ERR_NOMEM, "trace reader: out of memory");
    r->name = strdup(name ? name : "<trace>");
    if (!r->name) {
        free(r);
        return rkv_set_error(RKV_ERR_NOMEM, "trace reader: out of memory");
    }
    *out = r;
    return RKV_OK;
}

rkv_status rkv_trace_reader_open_file(FILE *f, const char *name,
                                      rkv_trace_reader **out)
{
    if (!f)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_trace_reader_open_file: f is NULL");
    rkv_status st = reader_new(name, out);
    if (st == RKV_OK)
        (*out)->f = f;
    return st;
}

#ifdef RKV_HAVE_ZLIB
/* Through zlib: gzip data is decompressed, anything else read as is. */
static rkv_status open_gz(int fd, const char *path, const char *name,
                          rkv_trace_reader **out)
{
    gzFile gz = fd >= 0 ? gzdopen(fd, "rb") : gzopen(path, "rb");
    if (!gz) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return rkv_set_error(e ? RKV_ERR_IO : RKV_ERR_NOMEM, "%s: %s", name,
                             e ? strerror(e) : "out of memory");
    }
    rkv_status st = reader_new(name, out);
    if (st != RKV_OK) {
        gzclose(gz);
        return st;
    }
    gzbuffer(gz, 1u << 17);
    (*out)->gz = gz;
    return RKV_OK;
}
#endif

rkv_status rkv_trace_reader_open_path(const char *path,
                                      rkv_trace_reader **out)
{
    if (!path || !out)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_trace_reader_open_path: NULL argument");
#ifdef RKV_HAVE_ZLIB
    if (!strcmp(path, "-")) {
        int fd = dup(0);
        if (fd < 0)
            return rkv_set_error(RKV_ERR_IO, "<stdin>: %s", strerror(errno));
        return open_gz(fd, NULL, "<stdin>", out);
    }
    /* gzopen would create nothing, but check first for a clear message
     * on a missing file or a directory */
    FILE *probe = fopen(path, "r");
    if (!probe)
        return rkv_set_error(RKV_ERR_IO, "%s: %s", path, strerror(errno));
    fclose(probe);
    return open_gz(-1, path, path, out);
#else
    if (!strcmp(path, "-"))
        return rkv_trace_reader_open_file(stdin, "<stdin>", out);
    FILE *f = fopen(path, "r");
    if (!f)
        return rkv_set_error(RKV_ERR_IO, "%s: %s", path, strerror(errno));
    rkv_status st = rkv_trace_reader_open_file(f, path, out);
    if (st != RKV_OK) {
        fclose(f);
        return st;
    }
    (*out)->close_f = 1;
    return RKV_OK;
#endif
}

rkv_status rkv_trace_reader_open_memory(const char *buf, size_t len,
                                        const char *name,
                                        rkv_trace_reader **out)
{
    if (!buf && len)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_trace_reader_open_memory: buf is NULL");
    rkv_status st = reader_new(name, out);
    if (st == RKV_OK) {
        (*out)->buf = buf ? buf : "";
        (*out)->len = len;
    }
    return st;
}

rkv_status rkv_trace_reader_open_embedded(rkv_trace_reader **out)
{
    return rkv_trace_reader_open_memory(
        rkv_embedded_trace_start,
        (size_t)(rkv_embedded_trace_end - rkv_embedded_trace_start),
        "<embedded>", out);
}

void rkv_trace_reader_close(rkv_trace_reader *r)
{
    if (!r)
        return;
    if (r->close_f && r->f)
        fclose(r->f);
#ifdef RKV_HAVE_ZLIB
    if (r->gz)
        gzclose((gzFile)r->gz);
#endif
    free(r->chunk);
    free(r->line);
    free(r->ids);
    free(r->name);
    free(r->fail_msg);
    free(r);
}

rkv_status rkv_trace_reader_set_format(rkv_trace_reader *r, int format,
                                       uint32_t block_tokens)
{
    if (!r || !rkv_trace_format_name(format) ||
        block_tokens > RKV_TRACE_BLOCK_TOKENS)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "trace reader: format %d with %u tokens per block "
                             "(1..%u, or 0 for the format's default)",
                             format, block_tokens, RKV_TRACE_BLOCK_TOKENS);
    if (r->records || r->line_no)
        return rkv_set_error(RKV_ERR_STATE,
                             "%s: the format is set before the first line",
                             r->name);
    r->format = format;
    r->block_tokens = block_tokens;
    return RKV_OK;
}

int rkv_trace_reader_format(const rkv_trace_reader *r)
{
    return r ? r->format : RKV_TRACE_FMT_AUTO;
}

uint32_t rkv_trace_reader_block_tokens(const rkv_trace_reader *r)
{
    if (!r)
        return 0;
    if (r->block_tokens)
        return r->block_tokens;
    return r->format == RKV_TRACE_FMT_BAILIAN ? RKV_TRACE_BAILIAN_BLOCK_TOKENS
           : r->format == RKV_TRACE_FMT_MOONCAKE ? RKV_TRACE_BLOCK_TOKENS
                                                  : 0;
}

const char *rkv_trace_reader_name(const rkv_trace_reader *r)
{
    return r ? r->name : "";
}

static rkv_status reader_fail(rkv_trace_reader *r, rkv_status st)
{
    r->failed = st;
    free(r->fail_msg);
    r->fail_msg = strdup(rkv_last_error());
    return st;
}

static rkv_status line_too_long(const rkv_trace_reader *r)
{
    return rkv_set_error(RKV_ERR_FORMAT,
                         "%s:%llu: line longer than %u bytes (the limit for "
                         "one trace line)",
                         r->name, (unsigned long long)(r->line_no + 1),
                         RKV_TRACE_MAX_LINE);
}

/* Appends n bytes to the line being assembled (at most
 * RKV_TRACE_MAX_LINE bytes in all). */
static rkv_status line_append(rkv_trace_reader *r, size_t *used,
                              const char *b, size_t n)
{
    if (n > RKV_TRACE_MAX_LINE - *used)
        return line_too_long(r);
    if (*used + n + 1 > r->line_cap) {
        size_t nc = r->line_cap ? r->line_cap : 4096;
        while (nc < *used + n + 1)
            nc *= 2;
        char *l = realloc(r->line, nc);
        if (!l)
            return rkv_set_error(RKV_ERR_NOMEM, "%s:%llu: out of memory",
                                 r->name,
                                 (unsigned long long)(r->line_no + 1));
        r->line = l;
        r->line_cap = nc;
    }
    memcpy(r->line + *used, b, n);
    *used += n;
    return RKV_OK;
}

static int is_gzip(const char *b, size_t n)
{
    return n >= 2 && (unsigned char)b[0] == 0x1f && (unsigned char)b[1] == 0x8b;
}

/* gzip data where plain text is read (a stream, memory, or any input
 * without zlib): say so, rather than "malformed JSON at column 1". A
 * format error of line 1, like every other. */
static rkv_status gzip_refused(const rkv_trace_reader *r)
{
#ifdef RKV_HAVE_ZLIB
    return rkv_set_error(RKV_ERR_FORMAT,
                         "%s:1: gzip-compressed data where plain text was "
                         "expected (open the file by path, or read it from "
                         "'-', to decompress it)", r->name);
#else
    return rkv_set_error(RKV_ERR_FORMAT,
                         "%s:1: gzip-compressed, but this radixkv was built "
                         "without zlib (install zlib1g-dev and rebuild, or: "
                         "gunzip -c FILE | radixkv replay -)", r->name);
#endif
}

/* Refills the chunk from the source; chunk_len = 0 at the end. */
static rkv_status chunk_fill(rkv_trace_reader *r)
{
    r->chunk_pos = r->chunk_len = 0;
    if (r->src_eof)
        return RKV_OK;
    if (!r->chunk && !(r->chunk = malloc(RKV_TRACE_CHUNK)))
        return rkv_set_error(RKV_ERR_NOMEM, "%s: out of memory", r->name);
    size_t n;
#ifdef RKV_HAVE_ZLIB
    if (r->gz) {
        int got = gzread((gzFile)r->gz, r->chunk, RKV_TRACE_CHUNK);
        if (got < 0) {
            int zerr = 0;
            const char *m = gzerror((gzFile)r->gz, &zerr);
            return rkv_set_error(RKV_ERR_IO, "%s:%llu: read error: %s",
                                 r->name,
                                 (unsigned long long)(r->line_no + 1),
                                 zerr == Z_ERRNO ? strerror(errno ? errno : EIO)
                                                 : m);
        }
        n = (size_t)got;
        if (n == 0) {
            /* zlib reports a cut-off stream at its end, not as a read
             * failure */
            int zerr = 0;
            const char *m = gzerror((gzFile)r->gz, &zerr);
            size_t nl = strlen(r->name);
            if (!strncmp(m, r->name, nl) && !strncmp(m + nl, ": ", 2))
                m += nl + 2; /* zlib names the file too */
            if (zerr != Z_OK)
                return rkv_set_error(RKV_ERR_IO,
                                     "%s:%llu: read error: %s (truncated or "
                                     "corrupt gzip data)",
                                     r->name,
                                     (unsigned long long)(r->line_no + 1), m);
            r->src_eof = 1;
        }
        r->bytes_read += n;
        r->chunk_len = n;
        return RKV_OK;
    }
#endif
    n = fread(r->chunk, 1, RKV_TRACE_CHUNK, r->f);
    if (n < RKV_TRACE_CHUNK) {
        if (ferror(r->f))
            return rkv_set_error(RKV_ERR_IO, "%s:%llu: read error: %s",
                                 r->name,
                                 (unsigned long long)(r->line_no + 1),
                                 strerror(errno ? errno : EIO));
        r->src_eof = 1;
    }
    if (r->bytes_read == 0 && is_gzip(r->chunk, n))
        return gzip_refused(r);
    r->bytes_read += n;
    r->chunk_len = n;
    return RKV_OK;
}

/* File mode: the next line, at most RKV_TRACE_MAX_LINE bytes, so an
 * endless line (/dev/zero) is an error, not unbounded memory. */
static rkv_status file_line(rkv_trace_reader *r, const char **line,
                            size_t *len, int *got)
{
    size_t used = 0;
    int any = 0;
    for (;;) {
        if (r->chunk_pos == r->chunk_len) {
            errno = 0;
            rkv_status st = chunk_fill(r);
            if (st != RKV_OK)
                return st;
            if (r->chunk_len == 0)
                break; /* end of input: a last line without '\n' */
        }
        any = 1;
        const char *b = r->chunk + r->chunk_pos;
        size_t avail = r->chunk_len - r->chunk_pos;
        const char *nl = memchr(b, '\n', avail);
        size_t n = nl ? (size_t)(nl - b) : avail;
        rkv_status st = line_append(r, &used, b, n);
        if (st != RKV_OK)
            return st;
        r->chunk_pos += n + (nl ? 1 : 0);
        if (nl)
            break;
    }
    if (!any)
        return RKV_OK;
    *line = r->line;
    *len = used;
    *got = 1;
    return RKV_OK;
}

/* The next raw line (without '\n'); *got = 0 at the end of input. */
static rkv_status reader_line(rkv_trace_reader *r, const char **line,
                              size_t *len, int *got)
{
    *got = 0;
    if (r->f || r->gz) {
        int have = 0;
        rkv_status st = file_line(r, line, len, &have);
        if (st != RKV_OK || !have)
            return st;
    } else {
        if (r->pos >= r->len)
            return RKV_OK;
        if (r->pos == 0 && is_gzip(r->buf, r->len))
            return gzip_refused(r);
        const char *b = r->buf + r->pos;
        const char *nl = memchr(b, '\n', r->len - r->pos);
        size_t l = nl ? (size_t)(nl - b) : r->len - r->pos;
        if (l > RKV_TRACE_MAX_LINE)
            return line_too_long(r);
        r->pos += l + (nl ? 1 : 0);
        *line = b;
        *len = l;
    }
    r->line_no++;
    if (memchr(*line, '\0', *len))
        return rkv_set_error(RKV_ERR_FORMAT,
                             "%s:%llu: malformed JSON: NUL byte in line",
                             r->name, (unsigned long long)r->line_no);
    *got = 1;
    return RKV_OK;
}

rkv_status rkv_trace_reader_next(rkv_trace_reader *r, rkv_trace_record *out,
                                 int *eof)
{
    if (!r || !out || !eof)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_trace_reader_next: NULL argument");
    if (r->failed)
        return rkv_set_error(r->failed, "%s",
                             r->fail_msg ? r->fail_msg : "trace reader failed");
    for (;;) {
        const char *line = NULL;
        size_t len = 0;
        int got = 0;
        rkv_status st = reader_line(r, &line, &len, &got);
        if (st != RKV_OK)
            return reader_fail(r, st);
        if (!got) {
            *eof = 1;
            return RKV_OK;
        }
        size_t i = 0;
        while (i < len && (line[i] == ' ' || line[i] == '\t' ||
                           line[i] == '\r'))
            i++;
        if (i == len)
            continue; /* blank line */
        st = rkv_trace_parse_line_fmt(line, len, r->name, r->line_no,
                                      r->format, r->block_tokens, out,
                                      &r->ids, &r->ids_cap);
        if (st != RKV_OK)
            return reader_fail(r, st);
        /* the first record fixes an automatic format */
        r->format = out->format;
        r->block_tokens = out->block_tokens;
        r->records++;
        *eof = 0;
        return RKV_OK;
    }
}
