/*
 * sim/workload.c -- request records: trace loading and the synthetic
 * generators (see workload.h for the segment model).
 *
 * Owns the workload arrays. Invariants are those listed in workload.h and
 * verified by rkv_workload_check(). Generators are pure functions of their
 * config and seed (a splitmix64 stream), so a seed names a workload on every
 * machine. On any failure a workload is left empty (freed), never half
 * built.
 */
#include "sim/workload.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"

void rkv_workload_init(rkv_workload *wl)
{
    memset(wl, 0, sizeof *wl);
}

void rkv_workload_free(rkv_workload *wl)
{
    if (!wl)
        return;
    free(wl->reqs);
    free(wl->seg_keys);
    free(wl->seg_lens);
    free(wl->name);
    rkv_workload_init(wl);
}

/* The capacity that holds `need` items: `cap` doubled (from `first` when
 * nothing is held yet) until it does. */
static size_t wl_grown(size_t cap, size_t need, size_t first)
{
    size_t nc = cap ? cap * 2 : first;
    while (nc < need)
        nc *= 2;
    return nc;
}

static rkv_status wl_nomem(size_t n, const char *what)
{
    return rkv_set_error(RKV_ERR_NOMEM, "workload: out of memory for %zu %s",
                         n, what);
}

static rkv_status wl_reserve_reqs(rkv_workload *wl, size_t need)
{
    if (need <= wl->reqs_cap)
        return RKV_OK;
    size_t nc = wl_grown(wl->reqs_cap, need, 1024);
    rkv_wl_request *n = realloc(wl->reqs, nc * sizeof *n);
    if (!n)
        return wl_nomem(nc, "requests");
    wl->reqs = n;
    wl->reqs_cap = nc;
    return RKV_OK;
}

/* Keys and lengths grow together; a failure leaves the capacity as it was
 * (a grown first array is kept: it still holds what it held). */
static rkv_status wl_reserve_segs(rkv_workload *wl, size_t need)
{
    if (need <= wl->segs_cap)
        return RKV_OK;
    size_t nc = wl_grown(wl->segs_cap, need, 4096);
    uint64_t *k = realloc(wl->seg_keys, nc * sizeof *k);
    if (k)
        wl->seg_keys = k;
    uint32_t *l = k ? realloc(wl->seg_lens, nc * sizeof *l) : NULL;
    if (l)
        wl->seg_lens = l;
    if (!k || !l)
        return wl_nomem(nc, "segments");
    wl->segs_cap = nc;
    return RKV_OK;
}

/* What every generator checks first: its arguments were given (`given`:
 * the source or config is not NULL) and the workload is still empty. */
static rkv_status wl_start(const rkv_workload *wl, int given, const char *fn)
{
    if (!wl || !given)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL argument", fn);
    if (wl->num_reqs)
        return rkv_set_error(RKV_ERR_STATE, "%s: workload not empty", fn);
    return RKV_OK;
}

/* A generator's end: on failure nothing half-built is left behind. */
static rkv_status wl_finish(rkv_workload *wl, rkv_status st)
{
    if (st != RKV_OK)
        rkv_workload_free(wl);
    return st;
}

static rkv_status wl_set_name(rkv_workload *wl, const char *name)
{
    char *n = strdup(name);
    if (!n)
        return rkv_set_error(RKV_ERR_NOMEM, "workload: out of memory");
    free(wl->name);
    wl->name = n;
    return RKV_OK;
}

static uint32_t blocks_for(uint64_t tokens)
{
    return (uint32_t)((tokens + RKV_TRACE_BLOCK_TOKENS - 1) /
                      RKV_TRACE_BLOCK_TOKENS);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Output tokens get block ids no prompt uses, so an output never pretends
 * to be prompt content: one run of consecutive ids [start, start + need)
 * that holds no prompt id, for ANY prompt ids. Right above the largest id
 * when that does not wrap (always, for real traces); else the lowest gap
 * between the sorted ids that is wide enough. Ids number at most 2^32 *
 * 2^21 < 2^64 in total, so such a gap exists. */
static rkv_status wl_place_outputs(rkv_workload *wl, uint64_t max_key)
{
    uint64_t need = 0;
    for (size_t i = 0; i < wl->num_reqs; i++)
        need += blocks_for(wl->reqs[i].output_length);
    uint64_t start = max_key + 1;
    if (wl->num_segs && (max_key == UINT64_MAX || UINT64_MAX - max_key < need)) {
        uint64_t *k = malloc(wl->num_segs * sizeof *k);
        if (!k)
            return rkv_set_error(RKV_ERR_NOMEM,
                                 "workload: out of memory for %zu block ids",
                                 wl->num_segs);
        memcpy(k, wl->seg_keys, wl->num_segs * sizeof *k);
        qsort(k, wl->num_segs, sizeof *k, cmp_u64);
        uint64_t lo = 0; /* first id not known to be used */
        int found = 0;
        for (size_t i = 0; i < wl->num_segs && !found; i++) {
            if (k[i] >= lo && k[i] - lo >= need) {
                start = lo;
                found = 1;
            } else if (k[i] >= lo) {
                lo = k[i] + 1; /* k[i] < UINT64_MAX here or the loop ends */
                if (k[i] == UINT64_MAX)
                    break;
            }
        }
        free(k);
        if (!found)
            return rkv_set_error(RKV_ERR_INVALID_ARG,
                                 "workload: no room for %llu output block ids "
                                 "beside the trace's ids",
                                 (unsigned long long)need);
    }
    wl->next_key = start;
    for (size_t i = 0; i < wl->num_reqs; i++) {
        wl->reqs[i].output_key = wl->next_key;
        wl->next_key += blocks_for(wl->reqs[i].output_length);
    }
    return RKV_OK;
}

typedef struct chat_map chat_map;
static rkv_status wl_load_trace(rkv_workload *wl, rkv_trace_reader *r,
                                size_t limit, chat_map *chats);

/* Bailian sessions: chat_id -> the session (root chat id) of that chat,
 * an open-addressing table (linear probing, at most half full). */
struct chat_map {
    uint64_t *key, *val; /* key UINT64_MAX: empty (chat ids are < 2^63) */
    size_t cap, n;
};

static size_t chat_slot(const chat_map *m, uint64_t k)
{
    size_t i = (size_t)rkv_splitmix64(k) & (m->cap - 1);
    while (m->key[i] != UINT64_MAX && m->key[i] != k)
        i = (i + 1) & (m->cap - 1);
    return i;
}

static rkv_status chat_put(chat_map *m, uint64_t k, uint64_t v)
{
    if (2 * (m->n + 1) > m->cap) {
        size_t nc = m->cap ? m->cap * 2 : 1024;
        uint64_t *nk = malloc(nc * sizeof *nk), *nv = malloc(nc * sizeof *nv);
        if (!nk || !nv) {
            free(nk);
            free(nv);
            return rkv_set_error(RKV_ERR_NOMEM, "workload: out of memory for "
                                                "the chat ids");
        }
        memset(nk, 0xff, nc * sizeof *nk);
        chat_map o = *m;
        m->key = nk;
        m->val = nv;
        m->cap = nc;
        for (size_t i = 0; i < o.cap; i++)
            if (o.key[i] != UINT64_MAX) {
                size_t j = chat_slot(m, o.key[i]);
                m->key[j] = o.key[i];
                m->val[j] = o.val[i];
            }
        free(o.key);
        free(o.val);
    }
    size_t i = chat_slot(m, k);
    if (m->key[i] == UINT64_MAX)
        m->n++;
    m->key[i] = k;
    m->val[i] = v;
    return RKV_OK;
}

/* The session of chat k, or k itself when it is not known. */
static uint64_t chat_get(const chat_map *m, uint64_t k)
{
    if (!m->cap)
        return k;
    size_t i = chat_slot(m, k);
    return m->key[i] == k ? m->val[i] : k;
}

/* A record's session and hints into q; Bailian chats join their root's
 * session (the map learns this chat's). */
static rkv_status wl_trace_session(rkv_wl_request *q,
                                   const rkv_trace_record *rec, chat_map *m)
{
    q->session = RKV_WL_NO_SESSION;
    q->hint_priority = rec->priority;
    q->hint_ttl_ms = rec->ttl_ms;
    q->hint_prio_dur_ms = rec->priority_duration_ms;
    if (rec->format == RKV_TRACE_FMT_BAILIAN) {
        uint64_t root = rec->parent_chat_id < 0
                            ? (uint64_t)rec->chat_id
                            : chat_get(m, (uint64_t)rec->parent_chat_id);
        q->session = rec->has_session ? rec->session : root;
        return chat_put(m, (uint64_t)rec->chat_id, root);
    }
    if (rec->has_session)
        q->session = rec->session;
    return RKV_OK;
}

rkv_status rkv_workload_load_trace(rkv_workload *wl, rkv_trace_reader *r,
                                   size_t limit)
{
    chat_map chats = {NULL, NULL, 0, 0};
    rkv_status st = wl_load_trace(wl, r, limit, &chats);
    free(chats.key);
    free(chats.val);
    return st;
}

static rkv_status wl_load_trace(rkv_workload *wl, rkv_trace_reader *r,
                                size_t limit, chat_map *chats)
{
    rkv_status st = wl_start(wl, r != NULL, "rkv_workload_load_trace");
    if (st != RKV_OK)
        return st;
    if (wl_set_name(wl, rkv_trace_reader_name(r)) != RKV_OK)
        return RKV_ERR_NOMEM;
    uint64_t max_key = 0;
    while (!limit || wl->num_reqs < limit) {
        rkv_trace_record rec;
        int eof = 0;
        st = rkv_trace_reader_next(r, &rec, &eof);
        if (st == RKV_OK && eof)
            break;
        if (st == RKV_OK)
            st = wl_reserve_reqs(wl, wl->num_reqs + 1);
        if (st == RKV_OK)
            st = wl_reserve_segs(wl, wl->num_segs + rec.num_hash_ids);
        if (st == RKV_OK)
            st = wl_trace_session(&wl->reqs[wl->num_reqs], &rec, chats);
        if (st != RKV_OK)
            return wl_finish(wl, st);
        rkv_wl_request *q = &wl->reqs[wl->num_reqs];
        uint64_t session = q->session; /* set by wl_trace_session */
        int32_t hint_priority = q->hint_priority;
        uint64_t hint_ttl_ms = q->hint_ttl_ms;
        uint64_t hint_prio_dur_ms = q->hint_prio_dur_ms;
        memset(q, 0, sizeof *q);
        q->session = session;
        q->hint_priority = hint_priority;
        q->hint_ttl_ms = hint_ttl_ms;
        q->hint_prio_dur_ms = hint_prio_dur_ms;
        q->session_end = rec.session_end && session != RKV_WL_NO_SESSION;
        q->id = wl->num_reqs;
        q->arrival_ms = rec.timestamp_ms;
        q->input_length = rec.input_length;
        q->output_length = rec.output_length;
        q->seg_begin = wl->num_segs;
        q->num_segs = rec.num_hash_ids;
        q->line = rec.line;
        q->parent = RKV_WL_NO_PARENT;
        uint32_t left = rec.input_length;
        for (uint32_t i = 0; i < rec.num_hash_ids; i++) {
            uint32_t len = left > rec.block_tokens ? rec.block_tokens : left;
            wl->seg_keys[wl->num_segs] = rec.hash_ids[i];
            wl->seg_lens[wl->num_segs] = len;
            wl->num_segs++;
            left -= len;
            if (rec.hash_ids[i] > max_key)
                max_key = rec.hash_ids[i];
        }
        wl->prompt_tokens += rec.input_length;
        wl->output_tokens += rec.output_length;
        wl->num_reqs++;
    }
    st = wl_place_outputs(wl, max_key);
    if (st == RKV_OK && wl->num_reqs == 0)
        st = rkv_set_error(RKV_ERR_FORMAT,
                           "%s: no requests (the trace is empty or holds only "
                           "blank lines)", wl->name);
    return wl_finish(wl, st);
}

/* ------------------------------------------------------------------------ */
/* synthetic generators                                                     */
/* ------------------------------------------------------------------------ */

typedef struct wl_rng {
    uint64_t s;
} wl_rng;

static uint64_t rng_next(wl_rng *g)
{
    uint64_t r = rkv_splitmix64(g->s);
    g->s += 0x9e3779b97f4a7c15ULL;
    return r;
}

static double rng_unit(wl_rng *g)
{
    return (double)(rng_next(g) >> 11) * (1.0 / 9007199254740992.0);
}

/* Uniform integer in [lo, hi]. */
static uint32_t rng_range(wl_rng *g, uint32_t lo, uint32_t hi)
{
    if (hi <= lo)
        return lo;
    return lo + (uint32_t)(rng_next(g) % ((uint64_t)hi - lo + 1));
}

/* A piece of content: tokens of consecutive block ids first, first+1, ... */
typedef struct wl_piece {
    uint64_t first;
    uint32_t len;
} wl_piece;

static wl_piece wl_new_piece(rkv_workload *wl, uint32_t len)
{
    wl_piece p = {wl->next_key, len};
    wl->next_key += blocks_for(len);
    return p;
}

/* Appends a request whose prompt is pieces[0..n) followed by its output
 * piece (allocated here). */
static rkv_status wl_add(rkv_workload *wl, const wl_piece *pieces, size_t n,
                         uint32_t output_length, double arrival,
                         uint64_t parent, double think)
{
    uint64_t in = 0;
    size_t segs = 0;
    for (size_t i = 0; i < n; i++) {
        in += pieces[i].len;
        segs += blocks_for(pieces[i].len);
    }
    if (in == 0 || in > RKV_TRACE_MAX_LENGTH)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "workload: prompt of %llu tokens",
                             (unsigned long long)in);
    if (output_length > RKV_TRACE_MAX_OUTPUT)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "workload: output of %u tokens", output_length);
    rkv_status st = wl_reserve_reqs(wl, wl->num_reqs + 1);
    if (st == RKV_OK)
        st = wl_reserve_segs(wl, wl->num_segs + segs);
    if (st != RKV_OK)
        return st;
    rkv_wl_request *q = &wl->reqs[wl->num_reqs];
    memset(q, 0, sizeof *q);
    q->id = wl->num_reqs;
    q->arrival_ms = arrival;
    q->input_length = (uint32_t)in;
    q->output_length = output_length;
    q->seg_begin = wl->num_segs;
    q->num_segs = (uint32_t)segs;
    q->parent = parent;
    q->think_ms = think;
    q->session = RKV_WL_NO_SESSION;
    q->hint_priority = -1;
    for (size_t i = 0; i < n; i++) {
        uint32_t left = pieces[i].len;
        for (uint64_t k = pieces[i].first; left; k++) {
            uint32_t len = left > RKV_TRACE_BLOCK_TOKENS
                               ? RKV_TRACE_BLOCK_TOKENS : left;
            wl->seg_keys[wl->num_segs] = k;
            wl->seg_lens[wl->num_segs] = len;
            wl->num_segs++;
            left -= len;
        }
    }
    q->output_key = wl_new_piece(wl, output_length).first;
    wl->prompt_tokens += in;
    wl->output_tokens += output_length;
    wl->num_reqs++;
    return RKV_OK;
}

void rkv_agentic_config_init(rkv_agentic_config *cfg)
{
    /* The fields not named here are 0. */
    *cfg = (rkv_agentic_config){.sessions = 128, .turns_min = 4, .turns_max = 16,
                                .system_tokens = 1500, .tools_tokens = 3000,
                                .user_min = 50, .user_max = 1500, .output_min = 20,
                                .output_max = 400, .think_ms_mean = 1000.0,
                                .chat_share = 0.25, .tool_median_ms = 2000.0,
                                .tool_sigma = 1.4, .tool_max_ms = 600000.0,
                                .start_span_ms = 30000.0, .max_prompt_tokens = 32768};
}

typedef struct wl_pending {
    double arrival;
    size_t index;
} wl_pending;

static int cmp_arrival(const void *a, const void *b)
{
    const rkv_wl_request *x = a, *y = b;
    if (x->arrival_ms != y->arrival_ms)
        return x->arrival_ms < y->arrival_ms ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Sorts requests by nominal arrival (stable on generation order) and
 * renumbers ids, remapping parent links. */
static rkv_status wl_sort_by_arrival(rkv_workload *wl)
{
    size_t n = wl->num_reqs;
    if (n < 2)
        return RKV_OK;
    uint64_t *newid = malloc(n * sizeof *newid);
    if (!newid)
        return rkv_set_error(RKV_ERR_NOMEM, "workload: out of memory");
    qsort(wl->reqs, n, sizeof *wl->reqs, cmp_arrival);
    for (size_t i = 0; i < n; i++)
        newid[wl->reqs[i].id] = i;
    for (size_t i = 0; i < n; i++) {
        wl->reqs[i].id = i;
        if (wl->reqs[i].parent != RKV_WL_NO_PARENT)
            wl->reqs[i].parent = newid[wl->reqs[i].parent];
    }
    free(newid);
    return RKV_OK;
}

/* A rough service-time estimate for nominal (open-loop) arrivals only:
 * 50 ms to first token plus 15 ms per output token. Closed-loop replay
 * uses the parent link instead. */
static double est_service_ms(uint32_t output_length)
{
    return 50.0 + 15.0 * output_length;
}

/* Standard normal from two uniforms (Box-Muller, cosine branch; the
 * second variate is dropped so one draw is always two uniforms). */
static double rng_normal(wl_rng *g)
{
    double u1 = 1.0 - rng_unit(g); /* (0, 1]: log is finite */
    double u2 = rng_unit(g);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* A config range [lo, hi] that cannot be drawn from: empty, or starting at 0. */
static int bad_range(uint32_t lo, uint32_t hi)
{
    return lo == 0 || hi < lo;
}

/* Tool latency: lognormal with median tool_median_ms and sigma tool_sigma,
 * capped at tool_max_ms. */
static double tool_latency_ms(wl_rng *g, const rkv_agentic_config *cfg)
{
    double v = cfg->tool_median_ms * exp(cfg->tool_sigma * rng_normal(g));
    return v < cfg->tool_max_ms ? v : cfg->tool_max_ms;
}

rkv_status rkv_workload_agentic(rkv_workload *wl,
                                const rkv_agentic_config *cfg, uint64_t seed)
{
    rkv_status st = wl_start(wl, cfg != NULL, "rkv_workload_agentic");
    if (st != RKV_OK)
        return st;
    if (cfg->sessions == 0 || bad_range(cfg->turns_min, cfg->turns_max) ||
        bad_range(cfg->user_min, cfg->user_max) ||
        bad_range(cfg->output_min, cfg->output_max) || !(cfg->think_ms_mean >= 0) ||
        !(cfg->chat_share >= 0 && cfg->chat_share <= 1) ||
        !(cfg->tool_median_ms > 0 && cfg->tool_median_ms <= 1e9) ||
        !(cfg->tool_sigma >= 0 && cfg->tool_sigma <= 10) ||
        !(cfg->tool_max_ms >= cfg->tool_median_ms && cfg->tool_max_ms <= 1e9) ||
        !(cfg->start_span_ms >= 0) ||
        cfg->max_prompt_tokens > RKV_TRACE_MAX_LENGTH ||
        (uint64_t)cfg->system_tokens + cfg->tools_tokens + cfg->user_max >
            cfg->max_prompt_tokens)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_workload_agentic: inconsistent config "
                             "(need sessions, turns, user and output ranges "
                             ">= 1, system + tools + user_max <= "
                             "max_prompt_tokens, chat_share in 0..1, tool "
                             "median > 0, sigma 0..10, max >= median)");
    if (wl_set_name(wl, "agentic") != RKV_OK)
        return RKV_ERR_NOMEM;
    wl->marks_tool_calls = 1;
    wl_rng g = {seed};
    /* history: system, tools, then (user, output) per turn, then the new
     * user message. 2 + 2 * turns_max pieces at most. */
    size_t hcap = 3 + 2 * (size_t)cfg->turns_max;
    wl_piece *hist = malloc(hcap * sizeof *hist);
    if (!hist) {
        rkv_workload_free(wl);
        return rkv_set_error(RKV_ERR_NOMEM, "workload: out of memory");
    }
    size_t nshared = 0;
    if (cfg->system_tokens)
        hist[nshared++] = wl_new_piece(wl, cfg->system_tokens);
    if (cfg->tools_tokens)
        hist[nshared++] = wl_new_piece(wl, cfg->tools_tokens);
    wl_piece shared[2];
    memcpy(shared, hist, nshared * sizeof *hist);

    st = RKV_OK;
    for (uint32_t s = 0; s < cfg->sessions && st == RKV_OK; s++) {
        uint32_t turns = rng_range(&g, cfg->turns_min, cfg->turns_max);
        double t = rng_unit(&g) * cfg->start_span_ms;
        /* A separate stream per session for the tool-call draws, so the
         * sessions' shapes (turns, lengths, start) stay those of the same
         * seed without tool calls. */
        wl_rng tg = {rkv_splitmix64(seed ^ 0x746f6f6c63616c6cULL) + s};
        int tool = rng_unit(&tg) >= cfg->chat_share;
        size_t n = nshared;
        uint64_t tokens = 0;
        memcpy(hist, shared, nshared * sizeof *hist);
        for (size_t i = 0; i < n; i++)
            tokens += hist[i].len;
        uint64_t parent = RKV_WL_NO_PARENT;
        for (uint32_t k = 0; k < turns; k++) {
            uint32_t user = rng_range(&g, cfg->user_min, cfg->user_max);
            uint32_t out = rng_range(&g, cfg->output_min, cfg->output_max);
            double think = -log(1.0 - rng_unit(&g)) * cfg->think_ms_mean;
            if (tool)
                think = tool_latency_ms(&tg, cfg);
            if (tokens + user > cfg->max_prompt_tokens)
                break;
            hist[n++] = wl_new_piece(wl, user);
            tokens += user;
            if (parent != RKV_WL_NO_PARENT)
                t += est_service_ms(wl->reqs[parent].output_length) + think;
            st = wl_add(wl, hist, n, out, t, parent, think);
            if (st != RKV_OK)
                break;
            uint64_t prev = parent;
            parent = wl->num_reqs - 1;
            wl->reqs[parent].session = s;
            /* A tool session's turn ends in a tool call when another turn
             * follows it (marked on the parent when the child is made). */
            if (tool && prev != RKV_WL_NO_PARENT)
                wl->reqs[prev].tool_call = 1;
            /* The next turn extends this one by its output. */
            hist[n++] = (wl_piece){wl->reqs[parent].output_key, out};
            tokens += out;
        }
        /* The session's last turn: its answer ends without a tool call. */
        if (parent != RKV_WL_NO_PARENT)
            wl->reqs[parent].session_end = 1;
    }
    free(hist);
    if (st == RKV_OK)
        st = wl_sort_by_arrival(wl);
    return wl_finish(wl, st);
}

void rkv_fewshot_config_init(rkv_fewshot_config *cfg)
{
    /* The fields not named here are 0. */
    *cfg = (rkv_fewshot_config){.requests = 2000, .header_tokens = 4000,
                                .suffix_min = 20, .suffix_max = 200,
                                .output_min = 1, .output_max = 64,
                                .waves = 1, .wave_gap_ms = 10000.0};
}

rkv_status rkv_workload_fewshot(rkv_workload *wl,
                                const rkv_fewshot_config *cfg, uint64_t seed)
{
    rkv_status st = wl_start(wl, cfg != NULL, "rkv_workload_fewshot");
    if (st == RKV_OK &&
        (cfg->requests == 0 || bad_range(cfg->suffix_min, cfg->suffix_max) ||
         bad_range(cfg->output_min, cfg->output_max) || cfg->waves == 0 ||
         !(cfg->wave_gap_ms >= 0) ||
         (uint64_t)cfg->header_tokens + cfg->suffix_max > RKV_TRACE_MAX_LENGTH))
        st = rkv_set_error(RKV_ERR_INVALID_ARG,
                           "rkv_workload_fewshot: inconsistent config "
                           "(need requests, waves, suffix and output "
                           "ranges >= 1)");
    if (st != RKV_OK)
        return st;
    if (wl_set_name(wl, "fewshot") != RKV_OK)
        return RKV_ERR_NOMEM;
    wl_rng g = {seed};
    wl_piece p[2];
    size_t np = 0;
    if (cfg->header_tokens)
        p[np++] = wl_new_piece(wl, cfg->header_tokens);
    st = RKV_OK;
    for (uint32_t i = 0; i < cfg->requests && st == RKV_OK; i++) {
        uint32_t wave = (uint32_t)((uint64_t)i * cfg->waves / cfg->requests);
        p[np] = wl_new_piece(wl, rng_range(&g, cfg->suffix_min,
                                           cfg->suffix_max));
        uint32_t out = rng_range(&g, cfg->output_min, cfg->output_max);
        st = wl_add(wl, p, np + 1, out, wave * cfg->wave_gap_ms,
                    RKV_WL_NO_PARENT, 0.0);
    }
    return wl_finish(wl, st);
}

/* ------------------------------------------------------------------------ */
/* expansion and checks                                                     */
/* ------------------------------------------------------------------------ */

void rkv_chat_config_init(rkv_chat_config *cfg)
{
    *cfg = (rkv_chat_config){
        .conversations = 1500, .prefixes = 40, .prefix_zipf = 1.0,
        .prefix_min = 500, .prefix_max = 6000, .turns_mean = 3.0,
        .user_min = 20, .user_max = 2000, .output_min = 20,
        .output_max = 600, .gap_median_ms = 60000.0, .gap_sigma = 1.5,
        .span_ms = 3600000.0, .max_prompt_tokens = 32768};
}

/* Index drawn with probability proportional to w[i] (cum: prefix sums). */
static uint32_t rng_pick(wl_rng *g, const double *cum, uint32_t n)
{
    double u = rng_unit(g) * cum[n - 1];
    uint32_t lo = 0, hi = n - 1;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (cum[mid] > u)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

rkv_status rkv_workload_chat(rkv_workload *wl, const rkv_chat_config *cfg,
                             uint64_t seed)
{
    rkv_status st = wl_start(wl, cfg != NULL, "rkv_workload_chat");
    if (st != RKV_OK)
        return st;
    if (cfg->conversations == 0 || cfg->prefixes == 0 ||
        cfg->prefixes > 1000000 || bad_range(cfg->prefix_min, cfg->prefix_max) ||
        bad_range(cfg->user_min, cfg->user_max) ||
        bad_range(cfg->output_min, cfg->output_max) ||
        !(cfg->prefix_zipf >= 0 && cfg->prefix_zipf <= 10) ||
        !(cfg->turns_mean >= 1 && cfg->turns_mean <= 1000) ||
        !(cfg->gap_median_ms > 0 && cfg->gap_median_ms <= 1e9) ||
        !(cfg->gap_sigma >= 0 && cfg->gap_sigma <= 10) ||
        !(cfg->span_ms >= 0 && cfg->span_ms <= 1e12) ||
        cfg->max_prompt_tokens > RKV_TRACE_MAX_LENGTH ||
        (uint64_t)cfg->prefix_max + cfg->user_max > cfg->max_prompt_tokens)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_workload_chat: inconsistent config (need "
                             "conversations, prefixes, length ranges >= 1, "
                             "turns_mean >= 1, gap median > 0, sigma 0..10, "
                             "prefix_max + user_max <= max_prompt_tokens)");
    if (wl_set_name(wl, "chat") != RKV_OK)
        return RKV_ERR_NOMEM;
    wl_rng g = {seed};
    double *cum = malloc((size_t)cfg->prefixes * sizeof *cum);
    wl_piece *pre = malloc((size_t)cfg->prefixes * sizeof *pre);
    /* prefix, then (user, output) pairs and the new user message */
    size_t hcap = 2 + 2 * (size_t)(cfg->max_prompt_tokens / 2 + 1);
    wl_piece *hist = malloc(hcap * sizeof *hist);
    if (!cum || !pre || !hist) {
        free(cum);
        free(pre);
        free(hist);
        rkv_workload_free(wl);
        return rkv_set_error(RKV_ERR_NOMEM, "workload: out of memory");
    }
    for (uint32_t i = 0; i < cfg->prefixes; i++) {
        pre[i] = wl_new_piece(wl, rng_range(&g, cfg->prefix_min,
                                            cfg->prefix_max));
        cum[i] = (i ? cum[i - 1] : 0.0) + pow((double)i + 1, -cfg->prefix_zipf);
    }
    /* P(another turn) so that the mean number of turns is turns_mean */
    double more = 1.0 - 1.0 / cfg->turns_mean;
    for (uint32_t c = 0; c < cfg->conversations && st == RKV_OK; c++) {
        size_t n = 0;
        hist[n++] = pre[rng_pick(&g, cum, cfg->prefixes)];
        uint64_t tokens = hist[0].len;
        double t = rng_unit(&g) * cfg->span_ms;
        uint64_t last = RKV_WL_NO_PARENT;
        do {
            uint32_t user = rng_range(&g, cfg->user_min, cfg->user_max);
            uint32_t out = rng_range(&g, cfg->output_min, cfg->output_max);
            double gap = cfg->gap_median_ms * exp(cfg->gap_sigma * rng_normal(&g));
            if (tokens + user > cfg->max_prompt_tokens || n + 2 > hcap)
                break;
            hist[n++] = wl_new_piece(wl, user);
            tokens += user;
            if (last != RKV_WL_NO_PARENT)
                t += est_service_ms(wl->reqs[last].output_length) + gap;
            st = wl_add(wl, hist, n, out, t, RKV_WL_NO_PARENT, 0.0);
            if (st != RKV_OK)
                break;
            last = wl->num_reqs - 1;
            wl->reqs[last].session = c;
            hist[n++] = (wl_piece){wl->reqs[last].output_key, out};
            tokens += out;
        } while (rng_unit(&g) < more);
        if (last != RKV_WL_NO_PARENT)
            wl->reqs[last].session_end = 1;
    }
    free(cum);
    free(pre);
    free(hist);
    if (st == RKV_OK)
        st = wl_sort_by_arrival(wl);
    return wl_finish(wl, st);
}

rkv_status rkv_workload_prompt(const rkv_workload *wl, size_t i, int32_t *out)
{
    if (!wl || i >= wl->num_reqs)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_workload_prompt: bad request index %zu", i);
    return rkv_workload_prompt_n(wl, i, wl->reqs[i].input_length, out);
}

rkv_status rkv_workload_prompt_n(const rkv_workload *wl, size_t i, uint32_t n,
                                 int32_t *out)
{
    if (!wl || !out || i >= wl->num_reqs || n > wl->reqs[i].input_length)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_workload_prompt_n: bad request index %zu or "
                             "length %u", i, n);
    const rkv_wl_request *q = &wl->reqs[i];
    size_t pos = 0;
    for (uint32_t s = 0; s < q->num_segs && pos < n; s++) {
        uint32_t len = wl->seg_lens[q->seg_begin + s];
        if (len > n - pos)
            len = (uint32_t)(n - pos);
        rkv_trace_block_tokens(wl->seg_keys[q->seg_begin + s], 0, len,
                               out + pos);
        pos += len;
    }
    return RKV_OK;
}

int32_t rkv_workload_output_token(const rkv_wl_request *req, uint32_t k)
{
    return rkv_trace_block_token(req->output_key + k / RKV_TRACE_BLOCK_TOKENS,
                                 k % RKV_TRACE_BLOCK_TOKENS);
}

uint32_t rkv_workload_max_input(const rkv_workload *wl)
{
    uint32_t m = 0;
    for (size_t i = 0; wl && i < wl->num_reqs; i++)
        if (wl->reqs[i].input_length > m)
            m = wl->reqs[i].input_length;
    return m;
}

rkv_status rkv_workload_check(const rkv_workload *wl)
{
    if (!wl)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_workload_check: NULL");
    if (wl->num_reqs > wl->reqs_cap || wl->num_segs > wl->segs_cap)
        return rkv_set_error(RKV_ERR_CORRUPT,
                             "workload: counts exceed capacities");
    uint64_t in = 0, out = 0;
    for (size_t i = 0; i < wl->num_reqs; i++) {
        const rkv_wl_request *q = &wl->reqs[i];
        if (q->id != i)
            return rkv_set_error(RKV_ERR_CORRUPT,
                                 "workload: request %zu has id %llu", i,
                                 (unsigned long long)q->id);
        if (!isfinite(q->arrival_ms) || q->arrival_ms < 0)
            return rkv_set_error(RKV_ERR_CORRUPT,
                                 "workload: request %zu arrival %g", i,
                                 q->arrival_ms);
        if (q->hint_priority < -1 || q->hint_priority > RKV_PRIORITY_MAX)
            return rkv_set_error(RKV_ERR_CORRUPT,
                                 "workload: request %zu priority hint %d", i,
                                 (int)q->hint_priority);
        if (q->parent != RKV_WL_NO_PARENT && q->parent >= i)
            return rkv_set_error(RKV_ERR_CORRUPT,
                                 "workload: request %zu has parent %llu", i,
                                 (unsigned long long)q->parent);
        if (q->seg_begin + q->num_segs > wl->num_segs)
            return rkv_set_error(RKV_ERR_CORRUPT,
                                 "workload: request %zu segments out of "
                                 "range", i);
        uint64_t sum = 0;
        for (uint32_t s = 0; s < q->num_segs; s++) {
            uint32_t len = wl->seg_lens[q->seg_begin + s];
            if (len == 0 || len > RKV_TRACE_BLOCK_TOKENS)
                return rkv_set_error(RKV_ERR_CORRUPT,
                                     "workload: request %zu segment %u has "
                                     "%u tokens", i, s, len);
            sum += len;
        }
        if (q->input_length == 0 || sum != q->input_length)
            return rkv_set_error(RKV_ERR_CORRUPT,
                                 "workload: request %zu input_length %u but "
                                 "segments hold %llu tokens", i,
                                 q->input_length, (unsigned long long)sum);
        in += q->input_length;
        out += q->output_length;
    }
    if (in != wl->prompt_tokens || out != wl->output_tokens)
        return rkv_set_error(RKV_ERR_CORRUPT,
                             "workload: token totals do not match requests");
    return RKV_OK;
}
