/*
 * cli/progress.c -- the progress line and its time-left estimate (see
 * progress.h). Writes only to the FILE it was given.
 */
#include "cli/progress.h"

#include <math.h>
#include <string.h>

void rkv_progress_init(rkv_progress *p, FILE *out, uint64_t now_ns)
{
    memset(p, 0, sizeof *p);
    p->out = out;
    p->start_ns = p->run_ns = now_ns;
}

double rkv_progress_sched_cost(uint64_t capacity_tokens, uint64_t gpu_tokens)
{
    if (capacity_tokens == 0 || capacity_tokens >= gpu_tokens)
        return 1.0;
    /* the power fits the embedded trace's slowest row (1e5 tokens, 4.3x
     * below the GPU: 6.4x the time); at 3e5 it says 1.55x for 1.8x */
    return pow((double)gpu_tokens / (double)capacity_tokens, 1.25);
}

void rkv_progress_plan(rkv_progress *p, size_t rows, int file_order,
                       size_t sched_per_row, const uint64_t *row_capacity,
                       uint64_t gpu_tokens)
{
    p->file_first = file_order != 0;
    p->per_row = (size_t)p->file_first + sched_per_row;
    p->runs = rows * p->per_row;
    p->units[0] = p->file_first ? (double)rows : 0.0;
    p->units[1] = 0.0;
    for (size_t r = 0; r < rows; r++) {
        double c = rkv_progress_sched_cost(row_capacity[r], gpu_tokens);
        if (r < RKV_PROGRESS_MAX_ROWS)
            p->row_cost[r] = c;
        else
            c = p->row_cost[RKV_PROGRESS_MAX_ROWS - 1];
        p->units[1] += c * (double)sched_per_row;
    }
}

/* Measured ms per unit of cost of a kind; before one has finished, from
 * the other kind (a scheduler replay ~ 5 file-order ones) or a guess. */
static double kind_weight(const rkv_progress *p, int sched)
{
    if (p->done_units[sched] > 0)
        return p->done_ms[sched] / p->done_units[sched];
    if (p->done_units[!sched] > 0) {
        double other = p->done_ms[!sched] / p->done_units[!sched];
        return sched ? other * 5 : other / 5;
    }
    return sched ? 5.0 : 1.0;
}

void rkv_progress_run(rkv_progress *p, size_t run, const char *label,
                      uint64_t now_ns)
{
    if (run > 0) { /* the previous replay finished */
        int k = p->run_sched;
        p->done_ms[k] += (double)(now_ns - p->run_ns) * 1e-6;
        p->done_units[k] += p->run_cost;
    }
    size_t row = p->per_row ? run / p->per_row : 0;
    if (row >= RKV_PROGRESS_MAX_ROWS)
        row = RKV_PROGRESS_MAX_ROWS - 1;
    p->run_sched = !(p->file_first && p->per_row && run % p->per_row == 0);
    p->run_cost = p->run_sched ? p->row_cost[row] : 1.0;
    p->run_ns = now_ns;
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
    double total_w = p->units[0] * kind_weight(p, 0) +
                     p->units[1] * kind_weight(p, 1);
    double done_w = p->done_units[0] * kind_weight(p, 0) +
                    p->done_units[1] * kind_weight(p, 1) +
                    in_run * p->run_cost * kind_weight(p, p->run_sched);
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
