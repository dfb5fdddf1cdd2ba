/*
 * cli/progress.h -- the progress line of `radixkv` (drawn on stderr, and
 * only when stderr is a terminal: that choice is the command's): a bar,
 * the overall fraction done, the time so far and an estimate of the time
 * left.
 *
 * A replay reports requests done / total. A sweep is many replays; the
 * overall fraction weights each kind of replay (file order, scheduler) by
 * the mean time its finished replays took, and before any finished by a
 * first guess (a scheduler replay = 5 file-order ones). The time left is
 * elapsed / fraction x (1 - fraction). Nothing is drawn in the first half
 * second (short runs stay quiet), then at most ten times a second.
 * Clock readings are passed in (ns), so the arithmetic is testable.
 */
#ifndef RKV_CLI_PROGRESS_H
#define RKV_CLI_PROGRESS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct rkv_progress {
    FILE *out;
    uint64_t start_ns;     /* of the whole command                         */
    uint64_t run_ns;       /* of the current replay                        */
    uint64_t last_ns;      /* of the last line drawn                       */
    int shown;             /* a line is on the terminal                    */
    size_t runs;           /* sweep: replays in all (0: a single replay)   */
    size_t file_runs, sched_runs;
    int run_sched;         /* the current replay is in scheduler mode      */
    double kind_ms[2];     /* mean ms of finished replays, per kind        */
    size_t kind_n[2];
    char label[160];
} rkv_progress;

void rkv_progress_init(rkv_progress *p, FILE *out, uint64_t now_ns);
/* A sweep of file_runs file-order and sched_runs scheduler replays. */
void rkv_progress_plan(rkv_progress *p, size_t file_runs, size_t sched_runs);
/* Sweep: replay `run` (0-based) of the plan starts now; sched says its
 * kind. The previous one, if any, has finished. */
void rkv_progress_run(rkv_progress *p, size_t run, int sched, const char *label,
                      uint64_t now_ns);
/* Overall fraction done when the current replay has done/total. */
double rkv_progress_fraction(const rkv_progress *p, size_t done, size_t total);
/* Draws the line if it is due; returns 1 if it drew. */
int rkv_progress_update(rkv_progress *p, size_t done, size_t total,
                        uint64_t now_ns);
/* Erases the line (before a report or an error message). */
void rkv_progress_clear(rkv_progress *p);

#endif
