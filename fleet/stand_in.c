/*
 * fleet/stand_in.c -- trace slices and the stand-in prefill (fleet/stand_in.h).
 */
#include "fleet/stand_in.h"

#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "sim/trace.h"

void rkv_prompt_set_free(rkv_prompt_set *s)
{
    if (!s)
        return;
    for (uint32_t i = 0; i < s->n; i++)
        free(s->tok[i]);
    free(s->tok);
    free(s->len);
    free(s->line);
    memset(s, 0, sizeof *s);
}

static rkv_status grow(rkv_prompt_set *s, uint32_t *cap)
{
    if (s->n < *cap)
        return RKV_OK;
    uint32_t nc = *cap ? 2 * *cap : 64;
    int32_t **t = realloc(s->tok, nc * sizeof *t);
    if (t)
        s->tok = t;
    uint32_t *l = realloc(s->len, nc * sizeof *l);
    if (l)
        s->len = l;
    uint64_t *ln = realloc(s->line, nc * sizeof *ln);
    if (ln)
        s->line = ln;
    if (!t || !l || !ln)
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_stand_in_load: out of memory");
    *cap = nc;
    return RKV_OK;
}

rkv_status rkv_stand_in_load(const char *path, uint32_t k, uint32_t n_slices,
                             uint64_t limit, uint32_t max_tokens,
                             rkv_prompt_set *out)
{
    if (!path || !out || n_slices == 0 || k > n_slices)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_stand_in_load: slice %u of %u", k, n_slices);
    rkv_trace_reader *r = NULL;
    rkv_status s = strcmp(path, "@embedded") == 0 ? rkv_trace_reader_open_embedded(&r)
                                                  : rkv_trace_reader_open_path(path, &r);
    if (s != RKV_OK)
        return s;
    rkv_prompt_set set;
    memset(&set, 0, sizeof set);
    uint32_t cap = 0;
    int32_t *full = NULL;
    for (uint64_t i = 0; limit == 0 || i < limit; i++) {
        rkv_trace_record rec;
        int eof = 0;
        s = rkv_trace_reader_next(r, &rec, &eof);
        if (s != RKV_OK || eof)
            break;
        if (k != n_slices && i % n_slices != k)
            continue;
        int32_t *f = realloc(full, rec.input_length * sizeof *f);
        if (!f) {
            s = rkv_set_error(RKV_ERR_NOMEM, "rkv_stand_in_load: out of memory");
            break;
        }
        full = f;
        s = rkv_trace_expand(rec.hash_ids, rec.num_hash_ids, rec.input_length, full);
        if (s == RKV_OK)
            s = grow(&set, &cap);
        if (s != RKV_OK)
            break;
        uint32_t n = max_tokens && rec.input_length > max_tokens ? max_tokens
                                                                : rec.input_length;
        int32_t *t = malloc((n ? n : 1) * sizeof *t);
        if (!t) {
            s = rkv_set_error(RKV_ERR_NOMEM, "rkv_stand_in_load: out of memory");
            break;
        }
        memcpy(t, full, n * sizeof *t);
        set.tok[set.n] = t;
        set.len[set.n] = n;
        set.line[set.n] = rec.line;
        set.n++;
    }
    free(full);
    rkv_trace_reader_close(r);
    if (s != RKV_OK) {
        rkv_prompt_set_free(&set);
        return s;
    }
    *out = set;
    return RKV_OK;
}

rkv_status rkv_stand_in_serve(rkv_pool *pool, rkv_tree *tree, rkv_namespace ns,
                              const int32_t *tok, uint32_t n)
{
    uint32_t P = rkv_pool_page_size(pool);
    uint32_t pages = n / P;
    if (pages == 0)
        return RKV_OK;
    rkv_block_id *blocks = malloc(2 * (size_t)pages * sizeof *blocks);
    if (!blocks)
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_stand_in_serve: out of memory");
    rkv_block_id *dups = blocks + pages;
    rkv_match m;
    rkv_status s = rkv_tree_match(tree, ns, tok, pages * P, blocks, 0, &m);
    rkv_lease lease;
    if (s == RKV_OK)
        s = rkv_tree_lock(tree, m.node, &lease);
    if (s != RKV_OK) {
        free(blocks);
        return s;
    }
    uint32_t own = pages - m.num_blocks;
    if (own) {
        s = rkv_tree_alloc_blocks(tree, own, blocks + m.num_blocks);
        if (s == RKV_OK) {
            rkv_insert_result ins;
            s = rkv_tree_insert(tree, ns, tok, pages * P, blocks, dups, &ins);
            rkv_pool_unref_n(pool, own, blocks + m.num_blocks);
        }
    }
    rkv_tree_unlock(tree, &lease);
    free(blocks);
    return s;
}
