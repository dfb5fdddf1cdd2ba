/*
 * bench/startup_tree.c -- a host-only program that uses only the radix tree
 * (metadata-only pool, insert, match), linked against the shared
 * libradixkv. It exists to measure what loading the library costs a
 * program that never touches a GPU: start-up time and peak RSS (see
 * bench/RESULTS.md, "Start-up of a host-only program"). The work itself is
 * a few microseconds, so the figures are the loader's and the library's.
 *
 * Exit status: 0 when the second lookup hits the inserted prefix, 1 on any
 * failure (the message says which call).
 */
#include <stdio.h>

#include "radixkv.h"

#define PAGE 16
#define PAGES 8

static int fail(const char *what, rkv_status st)
{
    fprintf(stderr, "startup_tree: %s: %s (%s)\n", what, rkv_strerror(st),
            rkv_last_error());
    return 1;
}

int main(void)
{
    rkv_pool_config pc;
    rkv_pool_config_init(&pc);
    pc.num_blocks = 64;
    pc.page_size = PAGE;
    rkv_pool *pool = NULL;
    rkv_status st = rkv_pool_create(&pc, &pool);
    if (st != RKV_OK)
        return fail("rkv_pool_create", st);
    rkv_tree *tree = NULL;
    if ((st = rkv_tree_create(pool, NULL, &tree)) != RKV_OK) {
        rkv_pool_destroy(pool);
        return fail("rkv_tree_create", st);
    }
    int32_t tokens[PAGE * PAGES];
    for (int i = 0; i < PAGE * PAGES; i++)
        tokens[i] = i * 7 + 1;
    rkv_block_id blocks[PAGES];
    rkv_insert_result ins;
    rkv_match m = {0};
    int rc = 0;
    if ((st = rkv_tree_alloc_blocks(tree, PAGES, blocks)) != RKV_OK)
        rc = fail("rkv_tree_alloc_blocks", st);
    else if ((st = rkv_tree_insert(tree, 0, tokens, PAGE * PAGES, blocks, NULL,
                                   &ins)) != RKV_OK)
        rc = fail("rkv_tree_insert", st);
    else if ((st = rkv_pool_unref_n(pool, PAGES, blocks)) != RKV_OK)
        rc = fail("rkv_pool_unref_n", st);
    else if ((st = rkv_tree_match(tree, 0, tokens, PAGE * PAGES, NULL, 0, &m)) !=
             RKV_OK)
        rc = fail("rkv_tree_match", st);
    else if (m.matched_tokens != PAGE * PAGES) {
        fprintf(stderr, "startup_tree: matched %zu of %d tokens\n",
                m.matched_tokens, PAGE * PAGES);
        rc = 1;
    }
    rkv_tree_destroy(tree);
    rkv_pool_destroy(pool);
    if (rc == 0)
        printf("startup_tree: %zu tokens matched\n", m.matched_tokens);
    return rc;
}
