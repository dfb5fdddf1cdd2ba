/*
 * cli/progress.c -- the progress line and its time-left estimate (see
 * progress.h). Writes only to the FILE it was given.
 */
#include "cli/progress.h"

#include <string.h>

void rkv_progress_init(rkv_progress *p, FILE *out, uint64_t now_ns)
{
    memset(p, 0, sizeof *p);
    p->out = out;
    p->start_ns = p->run_ns = now_ns;
}

void rkv_progress_plan(rkv_progress *p, size_t file_runs, size_t sched_runs)
{
    p->file_runs = file_runs;
    p->sched_runs = sched_runs;
    p->runs = file_runs + sched_runs;
}

static double kind_weight(const rkv_progress *p, int sched)
{
    if (p->kind_n[sched])
        return p->kind_ms[sched];
    if (p->kind_n[!sched]) /* a scheduler replay ~ 5 file-order ones */
        return sched ? p->kind_ms[0] * 5 : p->kind_ms[1] / 5;
    return sched ? 5.0 : 1.0;
}

void rkv_progress_run(rkv_progress *p, size_t run, int sched, const char *label,
                      uint64_t now_ns)
{
    if (run > 0) { /* the previous replay finished */
        int k = p->run_sched;
        double ms = (double)(now_ns - p->run_ns) * 1e-6;
        p->kind_ms[k] = (p->kind_ms[k] * (double)p->kind_n[k] + ms) /
                        (double)(p->kind_n[k] + 1);
        p->kind_n[k]++;
    }
    p->run_ns = now_ns;
    p->run_sched = sched != 0;
    snprintf(p->label, sizeof p->label, "replay %zu/%zu: %s", run + 1, p->runs,
             label ? label : "");
}

double rkv_progress_fraction(const rkv_progress *p, size_t done, size_t total)
{
    double in_run = total ? (double)done / (double)total : 1.0;
    if (in_run > 1)
        in_run = 1;
    if (p->runs == 0)
        return in_run;
    double total_w = (double)p->file_runs * kind_weight(p, 0) +
                     (double)p->sched_runs * kind_weight(p, 1);
    double done_w = (double)p->kind_n[0] * kind_weight(p, 0) +
                    (double)p->kind_n[1] * kind_weight(p, 1) +
                    in_run * kind_weight(p, p->run_sched);
    double f = total_w > 0 ? done_w / total_w : 1.0;
    return f > 1 ? 1 : f;
}

int rkv_progress_update(rkv_progress *p, size_t done, size_t total,
                        uint64_t now_ns)
{
    if (now_ns - p->start_ns < 500000000ULL ||
        (p->shown && now_ns - p->last_ns < 100000000ULL))
        return 0;
    p->last_ns = now_ns;
    p->shown = 1;
    double frac = rkv_progress_fraction(p, done, total);
    double elapsed = (double)(now_ns - p->start_ns) * 1e-9;
    char eta[48] = "";
    if (frac > 0.01)
        snprintf(eta, sizeof eta, ", ~%.0f s left", elapsed / frac * (1 - frac));
    enum { WIDTH = 30 };
    char bar[WIDTH + 1];
    int fill = (int)(frac * WIDTH);
    for (int k = 0; k < WIDTH; k++)
        bar[k] = k < fill ? '#' : '.';
    bar[WIDTH] = '\0';
    fprintf(p->out, "\r\033[K[%s] %5.1f%%  %.0f s%s  %s", bar, 100.0 * frac,
            elapsed, eta, p->label);
    fflush(p->out);
    return 1;
}

void rkv_progress_clear(rkv_progress *p)
{
    if (p->shown)
        fputs("\r\033[K", p->out);
    p->shown = 0;
}
