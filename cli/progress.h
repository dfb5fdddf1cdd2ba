/*
 * cli/progress.h -- the progress line of `radixkv` (drawn on stderr, and
 * only when stderr is a terminal: that choice is the command's): a bar,
 * the overall fraction done, the time so far and an estimate of the time
 * left.
 *
 * A replay reports requests done / total. A sweep is many replays, run
 * row by row (a file-order replay, if any, then the scheduler replays of
 * the row's device capacity); the overall fraction weights each replay by
 * its kind's measured time per unit of cost and its cost. A file-order
 * replay costs 1. A scheduler replay's cost grows as the device capacity
 * shrinks below what the simulated GPU holds (rkv_progress_sched_cost):
 * on the embedded trace a replay at 1e5 tokens took 6.4x, at 3e5 1.8x the
 * time of one at or above the GPU's 4.3e5 (its batches are smaller), so a
 * sweep that weighed every scheduler replay alike was up to 5x optimistic
 * with the slow rows last and 5x pessimistic with them first (the default
 * order); with the cost, 1.4x optimistic and 1.1x pessimistic at worst.
 * Before any replay of a kind has finished, a first guess stands in (a
 * scheduler replay = 5 file-order ones). The time left is elapsed / fraction x (1 - fraction). Nothing is
 * drawn in the first half second (short runs stay quiet), then at most
 * ten times a second. Clock readings are passed in (ns), so the
 * arithmetic is testable.
 */
#ifndef RKV_CLI_PROGRESS_H
#define RKV_CLI_PROGRESS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define RKV_PROGRESS_MAX_ROWS 64 /* rows past it cost as the last one */

typedef struct rkv_progress {
    FILE *out;
    uint64_t start_ns;     /* of the whole command                         */
    uint64_t run_ns;       /* of the current replay                        */
    uint64_t last_ns;      /* of the last line drawn                       */
    int shown;             /* a line is on the terminal                    */
    size_t runs;           /* sweep: replays in all (0: a single replay)   */
    size_t per_row;        /* replays per row                              */
    int file_first;        /* each row starts with a file-order replay     */
    double row_cost[RKV_PROGRESS_MAX_ROWS]; /* a scheduler replay's cost   */
    double units[2];       /* planned cost per kind (0 file, 1 scheduler)  */
    double done_units[2];  /* of the finished replays, per kind            */
    double done_ms[2];     /* their time, per kind                         */
    int run_sched;         /* the current replay is in scheduler mode      */
    double run_cost;       /* and its cost                                 */
    char label[160];
} rkv_progress;

void rkv_progress_init(rkv_progress *p, FILE *out, uint64_t now_ns);
/* The relative cost of a scheduler replay at device capacity
 * capacity_tokens (RKV_REPLAY_UNBOUNDED allowed) on a simulated GPU that
 * holds gpu_tokens: (gpu / capacity)^1.25 below it, 1 at or above. */
double rkv_progress_sched_cost(uint64_t capacity_tokens, uint64_t gpu_tokens);
/* A sweep of `rows` rows, each a file-order replay (when file_order) then
 * sched_per_row scheduler replays at device capacity row_capacity[row]. */
void rkv_progress_plan(rkv_progress *p, size_t rows, int file_order,
                       size_t sched_per_row, const uint64_t *row_capacity,
                       uint64_t gpu_tokens);
/* Sweep: replay `run` (0-based, in the plan's order) starts now. The
 * previous one, if any, has finished. */
void rkv_progress_run(rkv_progress *p, size_t run, const char *label,
                      uint64_t now_ns);
/* Overall fraction done when the current replay has done/total. */
double rkv_progress_fraction(const rkv_progress *p, size_t done, size_t total);
/* Draws the line if it is due; returns 1 if it drew. */
int rkv_progress_update(rkv_progress *p, size_t done, size_t total,
                        uint64_t now_ns);
/* Erases the line (before a report or an error message). */
void rkv_progress_clear(rkv_progress *p);

#endif
