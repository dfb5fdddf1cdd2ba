/*
 * cli/svg.h -- a small hand-written SVG line-plot writer for `radixkv
 * sweep`: side-by-side panels, each with axes, ticks, axis labels, a title
 * and a legend; linear or log10 axes. No dependencies.
 */
#ifndef RKV_CLI_SVG_H
#define RKV_CLI_SVG_H

#include <stddef.h>
#include <stdio.h>

#include "radixkv.h"

typedef struct rkv_plot_series {
    const char *label;
    const double *x;
    const double *y;   /* NaN values are gaps (not drawn)                  */
    size_t n;
    int dashed;
    int color;         /* index into a fixed palette                        */
} rkv_plot_series;

typedef struct rkv_plot_panel {
    const char *title;
    const char *xlabel;
    const char *ylabel;
    int logx, logy;
    const rkv_plot_series *series;
    size_t num_series;
    double xmark;             /* a dashed vertical line at this x, labelled
                                 xmark_label, when inside the x range
                                 (0 or NaN: none)                          */
    const char *xmark_label;
} rkv_plot_panel;

/* Writes one SVG document with the panels side by side under a title.
 * RKV_ERR_IO if writing fails. */
rkv_status rkv_svg_write(FILE *f, const char *title,
                         const rkv_plot_panel *panels, size_t num_panels);

#endif
