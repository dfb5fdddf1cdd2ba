/*
 * sim/load.c -- the workload's estimated GPU work and the auto time scale
 * (see load.h). Pure arithmetic over the workload and the cost model.
 */
#include "sim/load.h"

#include <math.h>
#include <string.h>

#include "common/status.h"

rkv_status rkv_load_estimate_of(const rkv_workload *wl,
                                const rkv_replay_config *cfg,
                                rkv_load_estimate *out)
{
    if (!wl || !cfg || !out)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_load_estimate_of: NULL argument");
    rkv_status st = rkv_cost_model_validate(&cfg->cost);
    if (st != RKV_OK)
        return st;
    memset(out, 0, sizeof *out);
    const rkv_cost_model *m = &cfg->cost;
    double kv_ms_per_token = rkv_cost_kv_bytes_per_token(m) /
                             (m->bandwidth_tbs * 1e12 * m->mbu) * 1e3;
    double t0 = INFINITY, t1 = -INFINITY;
    for (size_t i = 0; i < wl->num_reqs; i++) {
        const rkv_wl_request *q = &wl->reqs[i];
        double in = q->input_length, o = q->output_length;
        out->work_ms += rkv_replay_prefill_alone_ms(cfg, 0, q->input_length);
        /* decode token k (1..o) reads in + k context tokens */
        out->work_ms += kv_ms_per_token * (o * in + o * (o + 1) / 2);
        if (q->parent != RKV_WL_NO_PARENT) {
            out->closed_loop = 1;
            continue;
        }
        t0 = fmin(t0, q->arrival_ms);
        t1 = fmax(t1, q->arrival_ms);
    }
    out->span_ms = t1 > t0 ? t1 - t0 : 0;
    out->auto_scale = 1.0;
    if (!out->closed_loop && out->span_ms > 0) {
        double s = out->work_ms / (RKV_LOAD_TARGET * out->span_ms);
        s = ceil(s * 10.0 - 1e-9) / 10.0;
        if (s > 1.0)
            out->auto_scale = s;
    }
    return RKV_OK;
}

double rkv_load_at(const rkv_load_estimate *e, double scale)
{
    if (!e || !(e->span_ms > 0) || !(scale > 0))
        return 0;
    return e->work_ms / (scale * e->span_ms);
}
