/*
 * sched/sched_query.c -- rkv_sched_request_info: one request's state and
 * token counts, for a server that must know when a request finished.
 *
 * Where a request is found: a live one (waiting or running) in by_id; one
 * that ended (finished at a commit, or aborted) in the grave, which keeps
 * it until the next step frees it (sched_order.c). An id can be in both
 * (ended, then submitted again): the live request is the one reported. The
 * grave is in the order requests ended, so it is searched from its end to
 * report the latest of several ended requests with one id.
 * Read-only: nothing in the scheduler changes.
 */
#include <string.h>

#include "common/status.h"
#include "sched/sched_internal.h"

static void rkv_request_info_fill(const rkv_sched_req *r, rkv_request_info *out)
{
    memset(out, 0, sizeof *out);
    out->id = r->id;
    out->state = r->state;
    out->finish = r->state == RKV_REQ_FINISHED ? r->finish : RKV_FINISH_NONE;
    out->prompt_len = r->prompt_len;
    out->max_new_tokens = r->max_new;
    out->generated_tokens = r->generated;
    out->cached_tokens = r->cached_len;
    out->kv_tokens = r->state == RKV_REQ_RUNNING ? r->kv_len : 0;
    out->preemptions = r->preemptions;
    out->cached_host_tokens = r->admitted_host;
    out->cached_disk_tokens = r->admitted_disk;
    out->loading = r->load_ticket != 0 || r->load_ready;
}

rkv_status rkv_sched_request_info(const rkv_sched *s, uint64_t id,
                                  rkv_request_info *out)
{
    if (s == NULL || out == NULL)
        return rkv_null_arg("rkv_sched_request_info", s, "sched", "out");
    const uint64_t *v = rkv_u64map_get(&s->by_id, id);
    if (v != NULL) {
        rkv_request_info_fill((const rkv_sched_req *)(uintptr_t)*v, out);
        return RKV_OK;
    }
    for (uint32_t i = s->ngrave; i-- > s->nlimbo;) {
        if (s->grave[i]->id == id) {
            rkv_request_info_fill(s->grave[i], out);
            return RKV_OK;
        }
    }
    return rkv_set_error(RKV_ERR_NOT_FOUND,
                         "rkv_sched_request_info: no request %llu (never "
                         "submitted, or ended before the last step)",
                         (unsigned long long)id);
}
