/*
 * tests/support/event_model.c -- the KV event model (event_model.h).
 */
#include "tests/support/event_model.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

/* An entry of hash in medium (medium -1: in any medium). */
static size_t model_find(const evm *m, uint64_t hash, int medium)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->e[i].hash == hash &&
            (medium < 0 || m->e[i].medium == (uint32_t)medium))
            return i;
    return SIZE_MAX;
}

static void model_add(evm *m, uint64_t ns, uint64_t hash, uint64_t parent,
                      uint32_t medium)
{
    cr_assert(medium < RKV_MEDIUM_COUNT);
    cr_assert_eq(model_find(m, hash, (int)medium), SIZE_MAX,
                 "stored hash %llx twice in medium %u",
                 (unsigned long long)hash, medium);
    if (parent != RKV_HASH_ROOT) {
        /* prefix closure: the parent is cached in some medium */
        size_t p = model_find(m, parent, -1);
        cr_assert_neq(p, SIZE_MAX, "stored a block whose parent is not cached");
        cr_assert_eq(m->e[p].ns, ns);
    }
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 64;
        m->e = realloc(m->e, m->cap * sizeof *m->e);
        cr_assert_not_null(m->e);
    }
    rkv_block_entry x = {ns, hash, parent, medium, 0};
    m->e[m->n++] = x;
}

static void model_apply(evm *m, const rkv_event *ev, uint32_t P)
{
    cr_assert_eq(ev->seq, m->next_seq, "seq %llu, expected %llu",
                 (unsigned long long)ev->seq, (unsigned long long)m->next_seq);
    m->events++;
    m->next_seq = ev->seq + 1;
    switch (ev->kind) {
    case RKV_EVENT_BLOCK_STORED: {
        cr_assert(ev->num_hashes >= 1 && ev->num_hashes <= RKV_EVENT_MAX_HASHES);
        cr_assert_eq(ev->page_size, P);
        uint64_t parent = ev->parent_hash;
        for (uint32_t i = 0; i < ev->num_hashes; i++) {
            model_add(m, ev->ns, ev->hashes[i], parent, ev->medium);
            parent = ev->hashes[i];
        }
        break;
    }
    case RKV_EVENT_BLOCK_REMOVED:
        cr_assert(ev->num_hashes >= 1 && ev->num_hashes <= RKV_EVENT_MAX_HASHES);
        for (uint32_t i = 0; i < ev->num_hashes; i++) {
            size_t k = model_find(m, ev->hashes[i], ev->medium);
            cr_assert_neq(k, SIZE_MAX, "removed a hash not cached");
            cr_assert_eq(m->e[k].ns, ev->ns);
            m->e[k] = m->e[--m->n];
        }
        break;
    case RKV_EVENT_ALL_CLEARED:
        m->n = 0;
        break;
    case RKV_EVENT_RESYNC:
        cr_assert(ev->lost >= 1);
        m->need_resync = 1;
        m->next_seq = ev->seq + ev->lost;
        break;
    default:
        cr_assert_fail("unknown event kind %u", ev->kind);
    }
}

static int cmp_entry(const void *a, const void *b)
{
    const rkv_block_entry *x = a, *y = b;
    if (x->hash != y->hash)
        return x->hash < y->hash ? -1 : 1;
    return x->medium < y->medium ? -1 : x->medium > y->medium;
}

/* Drains up to `budget` events (in batches of up to `batch`). Returns the
 * number drained. */
uint32_t evm_drain(evd *d, evm *m, uint32_t budget, uint32_t batch)
{
    rkv_event buf[8];
    uint32_t total = 0;
    if (batch > 8)
        batch = 8;
    while (total < budget) {
        uint32_t want = budget - total < batch ? budget - total : batch, got = 0;
        cr_assert_eq(rkv_tree_events_drain(d->tree, buf, want, &got), RKV_OK);
        for (uint32_t i = 0; i < got; i++)
            model_apply(m, &buf[i], d->P);
        total += got;
        if (got < want)
            break;
    }
    return total;
}

/* With the ring drained: the evm equals the snapshot (after resyncing
 * from it if a marker came). */
void evm_compare(evd *d, evm *m)
{
    size_t n;
    uint64_t seq;
    rkv_block_entry *s = evd_snapshot(d, &n, &seq);
    cr_assert_eq(seq + 1, m->next_seq, "snapshot seq %llu, stream at %llu",
                 (unsigned long long)seq, (unsigned long long)m->next_seq);
    if (m->need_resync) {
        m->n = 0;
        for (size_t i = 0; i < n; i++)
            model_add(m, s[i].ns, s[i].hash, s[i].parent_hash, s[i].medium);
        m->need_resync = 0;
        m->resyncs++;
    }
    cr_assert_eq(m->n, n, "evm holds %zu blocks, tree %zu", m->n, n);
    if (n > 0) { /* qsort of a NULL array is undefined even for 0 items */
        qsort(s, n, sizeof *s, cmp_entry);
        qsort(m->e, m->n, sizeof *m->e, cmp_entry);
    }
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(s[i].hash, m->e[i].hash);
        cr_assert_eq(s[i].ns, m->e[i].ns);
        cr_assert_eq(s[i].parent_hash, m->e[i].parent_hash);
        cr_assert_eq(s[i].medium, m->e[i].medium);
    }
    free(s);
}