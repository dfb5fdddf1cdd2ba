/*
 * sim/replay_retain.c -- retention of the scheduler replay: the modes'
 * names, the per-request plan (next turn of the session, waits for a tool,
 * traffic class) and the retention each request carries (rules in
 * sim/replay.h, invariants in sim/replay_retain.h).
 *
 * The session's next turn is found by sorting request ids by (session,
 * id): O(n log n) once per replay. Nothing here reads a clock: pins get
 * their deadlines from the scheduler's time.
 */
#include "sim/replay_retain.h"

#include <stdlib.h>
#include <string.h>

#include "common/status.h"

static const char *const retention_names[RKV_RETENTION_COUNT] = {
    "none", "hints", "priority", "ttl", "ttl-oracle", "ttl-session",
};

const char *rkv_replay_retention_name(int retention)
{
    if (retention < 0 || retention >= RKV_RETENTION_COUNT)
        return NULL;
    return retention_names[retention];
}

int rkv_replay_retention_parse(const char *s, int *out)
{
    for (int i = 0; s && i < RKV_RETENTION_COUNT; i++)
        if (!strcmp(s, retention_names[i])) {
            *out = i;
            return 1;
        }
    return 0;
}

/* Priorities of the priority mode: a context a session comes back to, and
 * a finished session's. */
#define RETENTION_PRIO_WAITING 80
#define RETENTION_PRIO_DONE 1
/* ttl-oracle's slack beyond the tool latency: the next turn must still be
 * admitted (queueing) before its match locks the prefix. */
#define RETENTION_ORACLE_SLACK_MS 1000
/* ttl-session: "until released" (deadlines stay far from overflow: the
 * simulated clock ends at 2^40 ms). */
#define RETENTION_SESSION_TTL_MS (UINT64_C(1) << 50)


typedef struct sess_key {
    uint64_t session;
    uint64_t id;
} sess_key;

static int cmp_sess(const void *a, const void *b)
{
    const sess_key *x = a, *y = b;
    if (x->session != y->session)
        return x->session < y->session ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

void rkv_retention_plan_free(rkv_retention_plan *p)
{
    free(p->next);
    free(p->waits);
    free(p->tool_class);
    free(p->ctx);
    memset(p, 0, sizeof *p);
}

rkv_status rkv_retention_plan_init(rkv_retention_plan *p,
                                   const rkv_workload *wl, uint64_t max_ctx)
{
    memset(p, 0, sizeof *p);
    size_t n = wl->num_reqs;
    size_t m = n ? n : 1;
    p->next = malloc(m * sizeof *p->next);
    p->waits = calloc(m, 1);
    p->tool_class = calloc(m, 1);
    sess_key *k = malloc(m * sizeof *k);
    uint64_t ctx_max = 1;
    for (size_t i = 0; i < n; i++)
        if ((uint64_t)wl->reqs[i].input_length + wl->reqs[i].output_length >
            ctx_max)
            ctx_max = (uint64_t)wl->reqs[i].input_length +
                      wl->reqs[i].output_length;
    if (ctx_max > max_ctx)
        ctx_max = max_ctx > 0 ? max_ctx : 1;
    p->ctx = malloc((size_t)ctx_max * sizeof *p->ctx);
    p->ctx_cap = (size_t)ctx_max;
    if (!p->next || !p->waits || !p->tool_class || !k || !p->ctx) {
        free(k);
        rkv_retention_plan_free(p);
        return rkv_set_error(RKV_ERR_NOMEM, "replay: out of memory for the "
                                            "retention plan");
    }
    p->n = n;
    int marks_tools = wl->marks_tool_calls;
    for (size_t i = 0; i < n; i++) {
        p->next[i] = RKV_WL_NO_PARENT;
        k[i] = (sess_key){wl->reqs[i].session, i};
    }
    qsort(k, n, sizeof *k, cmp_sess);
    for (size_t j = 0; j + 1 < n; j++)
        if (k[j].session != RKV_WL_NO_SESSION &&
            k[j].session == k[j + 1].session)
            p->next[k[j].id] = k[j + 1].id;
    for (size_t i = 0; i < n; i++)
        p->waits[i] = p->next[i] != RKV_WL_NO_PARENT &&
                      (marks_tools ? wl->reqs[i].tool_call != 0 : 1);
    /* class: a session with any waiting request is tool traffic */
    for (size_t j = 0; j < n;) {
        size_t e = j;
        int any = 0;
        while (e < n && k[e].session == k[j].session &&
               k[j].session != RKV_WL_NO_SESSION) {
            any |= p->waits[k[e].id];
            e++;
        }
        if (e == j) { /* no session: its own class */
            p->tool_class[k[j].id] = p->waits[k[j].id];
            j++;
            continue;
        }
        for (size_t x = j; x < e; x++)
            p->tool_class[k[x].id] = (uint8_t)any;
        j = e;
    }
    free(k);
    return RKV_OK;
}

/* The TTL a waiting request's pin gets in the oracle mode: until its next
 * turn comes, plus the slack. The scheduler pins a closed-loop turn when
 * it has run, so the next one comes its think time later; the file
 * replay pins every request at its own arrival (times time_scale), so the
 * next turn comes the gap between the two arrivals later (for an agentic
 * turn its service estimate plus its think time). */
static uint64_t oracle_ttl(const rkv_retention_plan *p, const rkv_workload *wl,
                           const rkv_replay_config *cfg, uint64_t id)
{
    const rkv_wl_request *nq = &wl->reqs[p->next[id]];
    double gap = nq->parent == id && !p->file_order
                     ? nq->think_ms
                     : (nq->arrival_ms - wl->reqs[id].arrival_ms) *
                           cfg->time_scale;
    if (!(gap > 0))
        gap = 0;
    if (gap > 1e15)
        gap = 1e15;
    return (uint64_t)gap + RETENTION_ORACLE_SLACK_MS;
}

/* A TTL given in the workload's clock (--pin-ttl-ms, a line's ttl_ms) on
 * the replay's: a pause before an open-loop next turn (a later line) is
 * the trace's gap times time_scale, so the TTL is scaled too; a
 * closed-loop turn waits its think_ms unscaled, and so does the TTL. So a
 * TTL covers the same real pause whatever the scale. */
static uint64_t scaled_ttl(const rkv_retention_plan *p,
                           const rkv_workload *wl,
                           const rkv_replay_config *cfg, uint64_t id,
                           uint64_t ttl)
{
    uint64_t nx = p->next[id];
    if (ttl == 0 || (nx != RKV_WL_NO_PARENT && wl->reqs[nx].parent == id))
        return ttl;
    double s = (double)ttl * cfg->time_scale;
    if (!(s >= 1))
        return 1;
    return s < (double)RETENTION_SESSION_TTL_MS ? (uint64_t)s
                                                : RETENTION_SESSION_TTL_MS;
}

int rkv_retention_plan_for(const rkv_retention_plan *p,
                           const rkv_workload *wl, const rkv_replay_config *cfg,
                           uint64_t id, rkv_retention *out)
{
    rkv_retention_init(out);
    int mode = cfg->retention;
    if (mode == RKV_RETENTION_NONE || !p->next || id >= p->n)
        return 0;
    const rkv_wl_request *q = &wl->reqs[id];
    uint64_t ctx = (uint64_t)q->input_length + q->output_length;
    int waits = p->waits[id];
    int last = q->session != RKV_WL_NO_SESSION &&
               p->next[id] == RKV_WL_NO_PARENT;
    uint64_t ttl = 0;
    switch (mode) {
    case RKV_RETENTION_PRIORITY:
        if (waits)
            out->priority = RETENTION_PRIO_WAITING;
        else if (last)
            out->priority = RETENTION_PRIO_DONE;
        break;
    case RKV_RETENTION_TTL:
        ttl = waits ? scaled_ttl(p, wl, cfg, id, cfg->retention_ttl_ms)
                    : 0;
        break;
    case RKV_RETENTION_TTL_ORACLE:
        ttl = waits ? oracle_ttl(p, wl, cfg, id) : 0;
        break;
    case RKV_RETENTION_TTL_SESSION:
        ttl = waits ? RETENTION_SESSION_TTL_MS : 0;
        break;
    default: /* hints: a session without its end waits */
        if ((cfg->session_signals & RKV_SIGNAL_WAIT) &&
            q->session != RKV_WL_NO_SESSION && !q->session_end)
            ttl = scaled_ttl(p, wl, cfg, id, cfg->retention_ttl_ms);
        break;
    }
    if (q->hint_priority >= 0) {
        out->priority = q->hint_priority;
        out->priority_duration_ms =
            scaled_ttl(p, wl, cfg, id, q->hint_prio_dur_ms);
    }
    if (q->hint_ttl_ms > 0)
        ttl = scaled_ttl(p, wl, cfg, id, q->hint_ttl_ms);
    if (out->priority >= 0) {
        out->prio_begin = 0;
        out->prio_end = (size_t)ctx;
    }
    if (ttl > 0) {
        out->pin_tokens = (size_t)ctx;
        out->ttl_ms = ttl;
        out->owner = q->session;
    }
    return out->priority >= 0 || out->pin_tokens > 0;
}

rkv_status rkv_retention_plan_ended(const rkv_retention_plan *p,
                                    const rkv_workload *wl,
                                    const rkv_replay_config *cfg,
                                    rkv_tree *tree, uint64_t id,
                                    int with_output, uint64_t *ended_pages)
{
    if (cfg->retention == RKV_RETENTION_NONE || !p->next || id >= p->n)
        return RKV_OK;
    const rkv_wl_request *q = &wl->reqs[id];
    uint64_t s = q->session;
    if (s == RKV_WL_NO_SESSION)
        return RKV_OK;
    if (q->session_end && (cfg->session_signals & RKV_SIGNAL_END)) {
        /* no more than the cache can hold */
        uint32_t np = q->input_length < p->ctx_cap ? q->input_length
                                                   : (uint32_t)p->ctx_cap;
        rkv_status st = rkv_workload_prompt_n(wl, id, np, p->ctx);
        if (st != RKV_OK)
            return st;
        size_t n = np;
        for (uint32_t k = 0; with_output && k < q->output_length &&
                             n < p->ctx_cap; k++)
            p->ctx[n++] = rkv_workload_output_token(q, k);
        uint32_t marked = 0;
        st = rkv_tree_session_end(tree, 0, p->ctx, n, s, &marked);
        *ended_pages += marked;
        return st;
    }
    if (p->next[id] != RKV_WL_NO_PARENT)
        return RKV_OK;
    return rkv_tree_pins_release(tree, s, NULL);
}
