/*
 * tests/test_trace_gz.c -- gzip-compressed traces (issue 15 item 10):
 * read through zlib when the build has it (RKV_HAVE_ZLIB), refused with a
 * message that says why when it does not; a cut-off stream is an error,
 * not a shorter trace.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef RKV_HAVE_ZLIB
#include <zlib.h>
#endif

#include "sim/trace.h"
#include "sim/workload.h"

#define LINE "{\"timestamp\":%d,\"input_length\":600,\"output_length\":5,\"hash_ids\":[1,%d]}\n"

static char path[64];

static void tmp_path(const char *suffix)
{
    snprintf(path, sizeof path, "/tmp/rkv_gz_%d%s", (int)getpid(), suffix);
}

/* A gzip stream's first bytes (magic 1f 8b): enough to be recognised. */
static const unsigned char gz_magic[] = {0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0,
                                         0x00, 0x03};

Test(gz, gzip_on_a_plain_stream_is_named)
{
    FILE *f = fmemopen((void *)gz_magic, sizeof gz_magic, "r");
    cr_assert_not_null(f);
    rkv_trace_reader *r = NULL;
    cr_assert_eq(rkv_trace_reader_open_file(f, "s.gz", &r), RKV_OK);
    rkv_trace_record rec;
    int eof = 0;
    cr_assert_eq(rkv_trace_reader_next(r, &rec, &eof), RKV_ERR_FORMAT);
    cr_assert(strstr(rkv_last_error(), "s.gz:1: gzip-compressed") == rkv_last_error(),
              "%s", rkv_last_error());
    rkv_trace_reader_close(r);
    fclose(f);
    /* the memory reader says the same */
    cr_assert_eq(rkv_trace_reader_open_memory((const char *)gz_magic, sizeof gz_magic,
                                              "m.gz", &r), RKV_OK);
    cr_assert_eq(rkv_trace_reader_next(r, &rec, &eof), RKV_ERR_FORMAT);
    cr_assert(strstr(rkv_last_error(), "m.gz:1: gzip-compressed") == rkv_last_error(),
              "%s", rkv_last_error());
    rkv_trace_reader_close(r);
}

#ifdef RKV_HAVE_ZLIB

static void write_gz(int lines, int cut_tail)
{
    char *text = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&text, &n);
    for (int i = 0; i < lines; i++)
        fprintf(m, LINE, i, i + 2);
    fclose(m);
    uLong bound = compressBound((uLong)n) + 64;
    unsigned char *z = malloc(bound);
    cr_assert_not_null(z);
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    cr_assert_eq(deflateInit2(&zs, 6, Z_DEFLATED, 16 + 15, 8, Z_DEFAULT_STRATEGY), Z_OK);
    zs.next_in = (Bytef *)text;
    zs.avail_in = (uInt)n;
    zs.next_out = z;
    zs.avail_out = (uInt)bound;
    cr_assert_eq(deflate(&zs, Z_FINISH), Z_STREAM_END);
    size_t zn = zs.total_out;
    deflateEnd(&zs);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    fwrite(z, 1, zn - (size_t)cut_tail, f);
    fclose(f);
    free(z);
    free(text);
}

Test(gz, gzip_trace_is_decompressed)
{
    tmp_path(".jsonl.gz");
    write_gz(30, 0);
    rkv_trace_reader *r = NULL;
    cr_assert_eq(rkv_trace_reader_open_path(path, &r), RKV_OK, "%s", rkv_last_error());
    rkv_workload wl;
    rkv_workload_init(&wl);
    cr_assert_eq(rkv_workload_load_trace(&wl, r, 0), RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(wl.num_reqs, 30);
    cr_assert_eq(wl.reqs[29].line, 30);
    cr_assert_str_eq(wl.name, path);
    rkv_workload_free(&wl);
    rkv_trace_reader_close(r);
    unlink(path);
}

Test(gz, cut_off_gzip_is_an_error)
{
    tmp_path(".gz");
    write_gz(30, 8); /* without its CRC and length trailer */
    rkv_trace_reader *r = NULL;
    cr_assert_eq(rkv_trace_reader_open_path(path, &r), RKV_OK);
    rkv_workload wl;
    rkv_workload_init(&wl);
    cr_assert_eq(rkv_workload_load_trace(&wl, r, 0), RKV_ERR_IO);
    cr_assert(strstr(rkv_last_error(), "truncated or corrupt gzip data") != NULL, "%s",
              rkv_last_error());
    cr_assert(strncmp(rkv_last_error(), path, strlen(path)) == 0, "%s", rkv_last_error());
    rkv_trace_reader_close(r);
    unlink(path);
}

#else

Test(gz, refused_without_zlib)
{
    tmp_path(".gz");
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    fwrite(gz_magic, 1, sizeof gz_magic, f);
    fclose(f);
    rkv_trace_reader *r = NULL;
    cr_assert_eq(rkv_trace_reader_open_path(path, &r), RKV_OK);
    rkv_trace_record rec;
    int eof = 0;
    cr_assert_eq(rkv_trace_reader_next(r, &rec, &eof), RKV_ERR_FORMAT);
    cr_assert(strstr(rkv_last_error(), "built without zlib") != NULL, "%s",
              rkv_last_error());
    rkv_trace_reader_close(r);
    unlink(path);
}

#endif
