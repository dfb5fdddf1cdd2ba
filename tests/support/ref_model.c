/*
 * tests/support/ref_model.c -- the naive page-set model of the radix tree.
 * Semantics and invariants: tests/support/ref_model.h. Every page is found
 * by hashing (namespace, parent page slot, page tokens) and confirmed by
 * comparing all three; eviction scans every page for the oldest evictable
 * one, so the order it produces follows the spec directly, not any list.
 */
#include "tests/support/ref_model.h"

#include <stdlib.h>
#include <string.h>

static uint64_t ref_mix(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static uint64_t ref_key(const ref_model *m, uint64_t ns, uint32_t parent,
                        const int32_t *tokens)
{
    uint64_t h = ref_mix(ns ^ ((uint64_t)parent << 17));
    for (uint32_t i = 0; i < m->P; i++)
        h = ref_mix(h ^ (uint32_t)tokens[i]);
    return h;
}

/* arr with room for element n: its capacity *cap doubled (from 16) when n
 * reached it. The model aborts when memory runs out (a test's bug, not a
 * case the tests check). */
static void *grow(void *arr, uint32_t n, uint32_t *cap, size_t size)
{
    if (n < *cap)
        return arr;
    uint32_t c = *cap ? 2 * *cap : 16;
    void *p = realloc(arr, (size_t)c * size);
    if (p == NULL)
        abort();
    *cap = c;
    return p;
}

int ref_model_init(ref_model *m, uint32_t page_size, uint32_t cap)
{
    memset(m, 0, sizeof *m);
    if (page_size == 0 || page_size > REF_MAX_PAGE || cap == 0)
        return -1;
    m->P = page_size;
    m->cap = cap;
    m->nbuckets = 64;
    while (m->nbuckets < 2 * cap)
        m->nbuckets *= 2;
    m->pages = calloc(cap, sizeof *m->pages);
    m->buckets = malloc(m->nbuckets * sizeof *m->buckets);
    if (m->pages == NULL || m->buckets == NULL) {
        ref_model_fini(m);
        return -1;
    }
    for (uint32_t i = 0; i < m->nbuckets; i++)
        m->buckets[i] = REF_NIL;
    m->free_head = REF_NIL;
    for (uint32_t i = cap; i-- > 0;) {
        m->pages[i].hnext = m->free_head;
        m->free_head = i;
    }
    return 0;
}

void ref_model_fini(ref_model *m)
{
    free(m->pages);
    free(m->buckets);
    free(m->leases);
    free(m->pins);
    memset(m, 0, sizeof *m);
}

/* ---- roots ------------------------------------------------------------------ */

static ref_root *ref_find_root(ref_model *m, uint64_t ns)
{
    for (uint32_t i = 0; i < REF_MAX_NS; i++)
        if (m->roots[i].exists && m->roots[i].ns == ns)
            return &m->roots[i];
    return NULL;
}

static ref_root *ref_ensure_root(ref_model *m, uint64_t ns)
{
    ref_root *r = ref_find_root(m, ns);
    if (r != NULL)
        return r;
    for (uint32_t i = 0; i < REF_MAX_NS; i++) {
        if (!m->roots[i].exists) {
            r = &m->roots[i];
            memset(r, 0, sizeof *r);
            r->exists = 1;
            r->ns = ns;
            r->inc = ++m->next_inc;
            return r;
        }
    }
    abort(); /* test bug: more namespaces than REF_MAX_NS */
}

uint32_t ref_namespaces(const ref_model *m)
{
    uint32_t c = 0;
    for (uint32_t i = 0; i < REF_MAX_NS; i++)
        c += m->roots[i].exists != 0;
    return c;
}

/* ---- pages ------------------------------------------------------------------ */

static uint32_t ref_find(const ref_model *m, uint64_t ns, uint32_t parent,
                         const int32_t *tokens)
{
    uint64_t h = ref_key(m, ns, parent, tokens);
    for (uint32_t s = m->buckets[h & (m->nbuckets - 1)]; s != REF_NIL;
         s = m->pages[s].hnext) {
        const ref_page *p = &m->pages[s];
        if (p->hash == h && p->ns == ns && p->parent == parent &&
            memcmp(p->tokens, tokens, m->P * sizeof *tokens) == 0)
            return s;
    }
    return REF_NIL;
}

static uint32_t ref_add(ref_model *m, uint64_t ns, uint32_t parent,
                        const int32_t *tokens, rkv_block_id block)
{
    if (m->free_head == REF_NIL)
        abort(); /* test bug: more pages than pool blocks */
    uint32_t s = m->free_head;
    ref_page *p = &m->pages[s];
    m->free_head = p->hnext;
    memset(p, 0, sizeof *p);
    p->used = 1;
    p->ns = ns;
    p->parent = parent;
    p->depth = parent == REF_NIL ? 1 : m->pages[parent].depth + 1;
    memcpy(p->tokens, tokens, m->P * sizeof *tokens);
    p->block = block;
    p->prio = RKV_PRIORITY_DEFAULT;
    p->inc = ++m->next_inc;
    p->hash = ref_key(m, ns, parent, tokens);
    uint32_t b = (uint32_t)(p->hash & (m->nbuckets - 1));
    p->hnext = m->buckets[b];
    m->buckets[b] = s;
    if (parent != REF_NIL)
        m->pages[parent].children++;
    else
        ref_find_root(m, ns)->children++;
    m->cached++;
    return s;
}

static void ref_remove(ref_model *m, uint32_t s)
{
    ref_page *p = &m->pages[s];
    uint32_t b = (uint32_t)(p->hash & (m->nbuckets - 1));
    uint32_t *link = &m->buckets[b];
    while (*link != s)
        link = &m->pages[*link].hnext;
    *link = p->hnext;
    if (p->parent != REF_NIL) {
        m->pages[p->parent].children--;
    } else {
        ref_root *r = ref_find_root(m, p->ns);
        if (--r->children == 0 && r->own_locks == 0)
            r->exists = 0; /* an empty, unlocked namespace root goes too */
    }
    p->used = 0;
    p->hnext = m->free_head;
    m->free_head = s;
    m->cached--;
}

/* ---- match / insert --------------------------------------------------------- */

static ref_handle ref_root_handle(const ref_model *m, uint64_t ns)
{
    ref_handle h = {1, ns, REF_NIL, 0};
    for (uint32_t i = 0; i < REF_MAX_NS; i++) {
        if (m->roots[i].exists && m->roots[i].ns == ns) {
            h.null = 0;
            h.inc = m->roots[i].inc;
        }
    }
    return h;
}

static ref_handle ref_page_handle(const ref_model *m, uint32_t s)
{
    ref_handle h = {0, m->pages[s].ns, s, m->pages[s].inc};
    return h;
}

/* Walks up to npages pages; their slots go to slots[]; returns the count. */
static uint32_t ref_walk(const ref_model *m, uint64_t ns, const int32_t *tokens,
                         uint32_t npages, uint32_t *slots)
{
    uint32_t parent = REF_NIL, d = 0;
    for (; d < npages; d++) {
        uint32_t s = ref_find(m, ns, parent, tokens + (size_t)d * m->P);
        if (s == REF_NIL)
            break;
        slots[d] = s;
        parent = s;
    }
    return d;
}

uint32_t ref_match(ref_model *m, uint64_t ns, const int32_t *tokens, size_t n,
                   rkv_block_id *blocks_out, int peek, ref_handle *handle)
{
    uint32_t npages = (uint32_t)(n / m->P);
    uint32_t *slots = malloc((npages + 1) * sizeof *slots);
    if (slots == NULL)
        abort();
    uint32_t k = 0;
    if (ref_find_root(m, ns) != NULL)
        k = ref_walk(m, ns, tokens, npages, slots);
    else if (!peek)
        ref_ensure_root(m, ns);
    for (uint32_t i = 0; blocks_out != NULL && i < k; i++)
        blocks_out[i] = m->pages[slots[i]].block;
    if (!peek) {
        uint64_t c = ++m->clock;
        for (uint32_t i = 0; i < k; i++)
            m->pages[slots[i]].stamp = c;
        m->queried_tokens += n;
        m->hit_tokens += (uint64_t)k * m->P;
    }
    if (handle != NULL)
        *handle = k > 0 ? ref_page_handle(m, slots[k - 1]) : ref_root_handle(m, ns);
    free(slots);
    return k;
}

ref_handle ref_handle_at(ref_model *m, uint64_t ns, const int32_t *tokens,
                         uint32_t depth)
{
    if (depth == 0)
        return ref_root_handle(m, ns);
    uint32_t *slots = malloc(depth * sizeof *slots);
    if (slots == NULL)
        abort();
    uint32_t k = ref_walk(m, ns, tokens, depth, slots);
    ref_handle h = ref_root_handle(m, ns);
    h.null = 1;
    if (k == depth)
        h = ref_page_handle(m, slots[k - 1]);
    free(slots);
    return h;
}

void ref_insert(ref_model *m, uint64_t ns, const int32_t *tokens, size_t n,
                const rkv_block_id *blocks, rkv_block_id *dups_out,
                ref_insert_result *out)
{
    uint32_t npages = (uint32_t)(n / m->P);
    uint32_t *slots = malloc((npages + 1) * sizeof *slots);
    if (slots == NULL)
        abort();
    ref_ensure_root(m, ns);
    uint32_t k = ref_walk(m, ns, tokens, npages, slots);
    uint32_t dups = 0;
    for (uint32_t i = 0; i < k; i++) {
        if (m->pages[slots[i]].block != blocks[i]) {
            if (dups_out != NULL)
                dups_out[dups] = blocks[i];
            dups++;
        }
    }
    for (uint32_t i = k; i < npages; i++)
        slots[i] = ref_add(m, ns, i == 0 ? REF_NIL : slots[i - 1],
                           tokens + (size_t)i * m->P, blocks[i]);
    uint64_t c = ++m->clock;
    for (uint32_t i = 0; i < npages; i++)
        m->pages[slots[i]].stamp = c;
    m->inserted_pages += npages - k;
    out->prefix_pages = k;
    out->new_pages = npages - k;
    out->num_dups = dups;
    out->handle = npages > 0 ? ref_page_handle(m, slots[npages - 1])
                             : ref_root_handle(m, ns);
    free(slots);
}

/* ---- handles and locks -------------------------------------------------------- */

int ref_handle_valid(const ref_model *m, ref_handle h)
{
    if (h.null)
        return 0;
    if (h.slot == REF_NIL) {
        for (uint32_t i = 0; i < REF_MAX_NS; i++)
            if (m->roots[i].exists && m->roots[i].ns == h.ns)
                return m->roots[i].inc == h.inc;
        return 0;
    }
    return h.slot < m->cap && m->pages[h.slot].used &&
           m->pages[h.slot].inc == h.inc;
}

uint32_t ref_handle_depth(const ref_model *m, ref_handle h)
{
    return h.slot == REF_NIL ? 0 : m->pages[h.slot].depth;
}

static uint32_t ref_lease_find(const ref_model *m, uint64_t lease)
{
    for (uint32_t i = 0; i < m->nleases; i++)
        if (m->leases[i].id == lease)
            return i;
    return REF_NIL;
}

int ref_lease_held(const ref_model *m, uint64_t lease)
{
    return lease != 0 && ref_lease_find(m, lease) != REF_NIL;
}

rkv_status ref_lock(ref_model *m, ref_handle h, uint64_t lease)
{
    if (!ref_handle_valid(m, h))
        return RKV_ERR_STALE_HANDLE;
    if (lease == 0 || ref_lease_held(m, lease))
        abort(); /* test bug: the caller checks the implementation's id */
    m->leases = grow(m->leases, m->nleases, &m->lease_cap, sizeof *m->leases);
    m->leases[m->nleases].id = lease;
    m->leases[m->nleases].h = h;
    m->nleases++;
    if (h.slot == REF_NIL) {
        ref_find_root(m, h.ns)->own_locks++;
    } else {
        m->pages[h.slot].own_locks++;
        for (uint32_t s = h.slot; s != REF_NIL; s = m->pages[s].parent)
            if (m->pages[s].cover++ == 0)
                m->locked_pages++;
    }
    m->lock_total++;
    return RKV_OK;
}

rkv_status ref_unlock(ref_model *m, uint64_t lease)
{
    uint32_t i = lease == 0 ? REF_NIL : ref_lease_find(m, lease);
    if (i == REF_NIL)
        return RKV_ERR_STATE;
    ref_handle h = m->leases[i].h;
    m->leases[i] = m->leases[--m->nleases];
    if (!ref_handle_valid(m, h))
        abort(); /* a locked position cannot go */
    uint64_t c = ++m->clock;
    if (h.slot == REF_NIL) {
        ref_root *r = ref_find_root(m, h.ns);
        if (--r->own_locks == 0 && r->children == 0)
            r->exists = 0; /* an empty root goes with its last lock */
    } else {
        m->pages[h.slot].own_locks--;
        for (uint32_t s = h.slot; s != REF_NIL; s = m->pages[s].parent) {
            m->pages[s].stamp = c;
            if (--m->pages[s].cover == 0)
                m->locked_pages--;
        }
    }
    m->lock_total--;
    return RKV_OK;
}

/* ---- eviction and reset --------------------------------------------------------- */

uint64_t ref_evictable(const ref_model *m)
{
    return m->cached - m->locked_pages;
}

rkv_status ref_evict(ref_model *m, uint32_t n, ref_evicted *evicted_out)
{
    if (ref_evictable(m) < n)
        return RKV_ERR_NO_SPACE;
    for (uint32_t e = 0; e < n; e++) {
        uint32_t best = REF_NIL;
        for (uint32_t s = 0; s < m->cap; s++) {
            const ref_page *p = &m->pages[s];
            if (!p->used || p->children != 0 || p->cover != 0)
                continue;
            int pb = m->policy == RKV_EVICT_PRIORITY ? p->prio : 0;
            int bb = best == REF_NIL || m->policy != RKV_EVICT_PRIORITY
                         ? 0 : m->pages[best].prio;
            if (best == REF_NIL || pb < bb ||
                (pb == bb && (p->stamp < m->pages[best].stamp ||
                              (p->stamp == m->pages[best].stamp &&
                               p->depth > m->pages[best].depth))))
                best = s;
        }
        if (best == REF_NIL)
            abort(); /* evictable count says there is one */
        if (evicted_out != NULL) {
            ref_evicted *ev = &evicted_out[e];
            ev->ns = m->pages[best].ns;
            ev->depth = m->pages[best].depth;
            ev->block = m->pages[best].block;
            if ((size_t)ev->depth * m->P <= REF_MAX_TOKENS) {
                for (uint32_t s = best; s != REF_NIL; s = m->pages[s].parent)
                    memcpy(ev->tokens + (size_t)(m->pages[s].depth - 1) * m->P,
                           m->pages[s].tokens, m->P * sizeof(int32_t));
            }
        }
        ref_remove(m, best);
        m->evicted_pages++;
    }
    return RKV_OK;
}

uint32_t ref_set_priority(ref_model *m, uint64_t ns, const int32_t *tokens,
                          size_t n, size_t begin, size_t end, int prio)
{
    uint32_t slots[REF_MAX_TOKENS + 1];
    uint32_t npages = (uint32_t)(n / m->P);
    if (npages > REF_MAX_TOKENS)
        abort(); /* test bug: longer than the model walks */
    uint32_t k = ref_find_root(m, ns) != NULL
                     ? ref_walk(m, ns, tokens, npages, slots) : 0;
    uint32_t set = 0;
    for (uint32_t d = 0; d < k; d++) {
        if ((size_t)d * m->P >= begin && (size_t)(d + 1) * m->P <= end) {
            m->pages[slots[d]].prio = prio;
            set++;
        }
    }
    return set;
}

/* ---- pins ------------------------------------------------------------------------ */

static void ref_cover(ref_model *m, uint32_t slot, int delta)
{
    for (uint32_t s = slot; s != REF_NIL; s = m->pages[s].parent) {
        ref_page *p = &m->pages[s];
        if (delta > 0) {
            if (p->cover++ == 0)
                m->locked_pages++;
            if (p->pin_cover++ == 0)
                m->pinned_pages++;
        } else {
            if (--p->cover == 0)
                m->locked_pages--;
            if (--p->pin_cover == 0)
                m->pinned_pages--;
        }
    }
}

static void ref_unpin(ref_model *m, uint32_t i)
{
    ref_cover(m, m->pins[i].slot, -1);
    m->pins[i] = m->pins[--m->npins];
}

void ref_set_time(ref_model *m, uint64_t now)
{
    if (now < m->now)
        abort(); /* test bug */
    m->now = now;
    for (uint32_t i = 0; i < m->npins;)
        if (m->pins[i].deadline <= now)
            ref_unpin(m, i);
        else
            i++;
}

rkv_status ref_pin_prefix(ref_model *m, uint64_t ns, const int32_t *tokens,
                          size_t n, size_t pin_tokens, uint64_t ttl,
                          uint64_t owner, uint32_t *pinned)
{
    uint32_t slots[REF_MAX_TOKENS + 1];
    uint32_t npages = (uint32_t)(n / m->P);
    if (npages > REF_MAX_TOKENS)
        abort();
    uint32_t k = ref_find_root(m, ns) != NULL
                     ? ref_walk(m, ns, tokens, npages, slots) : 0;
    uint32_t pp = (uint32_t)(pin_tokens / m->P);
    if (pp > k)
        pp = k;
    *pinned = pp;
    if (pp == 0)
        return RKV_OK;
    uint32_t slot = slots[pp - 1];
    for (uint32_t i = 0; i < m->npins; i++) {
        if (m->pins[i].owner == owner && m->pins[i].slot == slot) {
            if (m->now + ttl > m->pins[i].deadline)
                m->pins[i].deadline = m->now + ttl;
            return RKV_OK;
        }
    }
    uint64_t add = 0;
    for (uint32_t d = 0; d < pp; d++)
        add += m->pages[slots[d]].pin_cover == 0;
    if (m->pinned_pages + add > m->pin_cap)
        return RKV_ERR_PIN_CAP;
    m->pins = grow(m->pins, m->npins, &m->pins_cap, sizeof *m->pins);
    ref_pin *e = &m->pins[m->npins++];
    e->owner = owner;
    e->deadline = m->now + ttl;
    e->seq = ++m->pin_seq;
    e->slot = slot;
    ref_cover(m, slot, +1);
    return RKV_OK;
}

uint32_t ref_pins_release(ref_model *m, uint64_t owner)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < m->npins;) {
        if (m->pins[i].owner == owner) {
            ref_unpin(m, i);
            n++;
        } else {
            i++;
        }
    }
    return n;
}

uint32_t ref_pins_extend(ref_model *m, uint64_t owner, uint64_t ttl)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < m->npins; i++) {
        if (m->pins[i].owner == owner) {
            if (m->now + ttl > m->pins[i].deadline)
                m->pins[i].deadline = m->now + ttl;
            n++;
        }
    }
    return n;
}

rkv_status ref_make_room(ref_model *m, uint64_t need)
{
    if (ref_evictable(m) >= need)
        return RKV_OK;
    uint64_t only = 0;
    for (uint32_t s = 0; s < m->cap; s++)
        only += m->pages[s].used && m->pages[s].cover > 0 &&
                m->pages[s].cover == m->pages[s].pin_cover;
    if (ref_evictable(m) + only < need)
        return RKV_ERR_NO_SPACE;
    while (ref_evictable(m) < need) {
        /* earliest among pins that free their end page at once (nothing
         * else covers it), else among pins whose end page only pins cover;
         * never a pin under a lock (revoking it frees nothing) */
        uint32_t best[2] = {REF_NIL, REF_NIL};
        for (uint32_t i = 0; i < m->npins; i++) {
            const ref_page *pg = &m->pages[m->pins[i].slot];
            int k = pg->cover == 1 ? 0 : pg->cover == pg->pin_cover ? 1 : -1;
            if (k < 0)
                continue;
            uint32_t b = best[k];
            if (b == REF_NIL || m->pins[i].deadline < m->pins[b].deadline ||
                (m->pins[i].deadline == m->pins[b].deadline &&
                 m->pins[i].seq < m->pins[b].seq))
                best[k] = i;
        }
        uint32_t pick = best[0] != REF_NIL ? best[0] : best[1];
        if (pick == REF_NIL)
            break;
        ref_unpin(m, pick);
    }
    return RKV_OK;
}

rkv_status ref_reset(ref_model *m)
{
    if (m->lock_total > 0)
        return RKV_ERR_BUSY;
    while (m->npins > 0)
        ref_unpin(m, 0);
    for (uint32_t s = 0; s < m->cap; s++)
        if (m->pages[s].used)
            ref_remove(m, s);
    for (uint32_t i = 0; i < REF_MAX_NS; i++)
        m->roots[i].exists = 0;
    return RKV_OK;
}

uint32_t ref_page_prefix(const ref_model *m, uint32_t slot, int32_t *tokens,
                         rkv_block_id *blocks)
{
    uint32_t depth = m->pages[slot].depth;
    for (uint32_t s = slot; s != REF_NIL; s = m->pages[s].parent) {
        const ref_page *p = &m->pages[s];
        memcpy(tokens + (size_t)(p->depth - 1) * m->P, p->tokens,
               m->P * sizeof *tokens);
        blocks[p->depth - 1] = p->block;
    }
    return depth;
}
