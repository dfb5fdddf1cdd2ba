/*
 * cli/svg.c -- SVG line plots (see svg.h). Each panel maps its data range
 * (widened to "nice" tick values, or whole decades on a log axis) onto a
 * fixed plot box; points outside a log axis' domain (<= 0) and NaNs are
 * skipped, splitting the line there. Text is XML-escaped (cli/escape.h:
 * also repairs names that are not valid UTF-8).
 */
#include "cli/svg.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cli/escape.h"
#include "common/status.h"

#define PANEL_W 520.0
#define PANEL_H 400.0
#define MARGIN_L 72.0
#define MARGIN_R 16.0
#define MARGIN_T 36.0
#define MARGIN_B 56.0
#define TITLE_H 40.0

static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c",
                                      "#9467bd", "#ff7f0e", "#8c564b",
                                      "#e377c2", "#17becf"};

typedef struct axis {
    int log;
    double lo, hi;   /* in axis units (log10 when log)                    */
    double step;     /* tick step in axis units                           */
} axis;

static int usable(double v, int log)
{
    return isfinite(v) && (!log || v > 0);
}

static double to_axis(double v, int log)
{
    return log ? log10(v) : v;
}

static double nice_step(double span)
{
    if (!(span > 0))
        return 1.0;
    double raw = span / 5.0;
    double mag = pow(10.0, floor(log10(raw)));
    double r = raw / mag;
    double m = r < 1.5 ? 1.0 : r < 3.5 ? 2.0 : r < 7.5 ? 5.0 : 10.0;
    return m * mag;
}

static void axis_fit(axis *a, double lo, double hi, int log, int from_zero)
{
    a->log = log;
    if (!(lo <= hi)) { /* no data */
        lo = 0.0;
        hi = 1.0;
    } else if (log) {
        lo = log10(lo);
        hi = log10(hi);
    }
    if (!log && from_zero && lo > 0)
        lo = 0;
    if (hi - lo < 1e-12) {
        double pad = log ? 0.5 : (fabs(hi) > 0 ? fabs(hi) * 0.1 : 1.0);
        lo -= pad;
        hi += pad;
    }
    if (log) {
        a->lo = floor(lo);
        a->hi = ceil(hi);
        if (a->hi == a->lo)
            a->hi = a->lo + 1;
        a->step = 1.0;
    } else {
        a->step = nice_step(hi - lo);
        a->lo = floor(lo / a->step) * a->step;
        a->hi = ceil(hi / a->step) * a->step;
    }
}

static void fmt_tick(char *buf, size_t cap, double v, int log)
{
    if (log) {
        double x = pow(10.0, v);
        if (x >= 1e3 || x < 1e-2)
            snprintf(buf, cap, "1e%d", (int)lround(v));
        else
            snprintf(buf, cap, "%g", x);
    } else {
        if (fabs(v) < 1e-12)
            v = 0;
        if (fabs(v) >= 1e6)
            snprintf(buf, cap, "%.3g", v);
        else
            snprintf(buf, cap, "%g", v);
    }
}

static void panel(FILE *f, const rkv_plot_panel *p, double ox, double oy)
{
    double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
    for (size_t s = 0; s < p->num_series; s++) {
        const rkv_plot_series *se = &p->series[s];
        for (size_t i = 0; i < se->n; i++) {
            if (!usable(se->x[i], p->logx) || !usable(se->y[i], p->logy))
                continue;
            xlo = fmin(xlo, se->x[i]);
            xhi = fmax(xhi, se->x[i]);
            ylo = fmin(ylo, se->y[i]);
            yhi = fmax(yhi, se->y[i]);
        }
    }
    axis ax, ay;
    axis_fit(&ax, xlo, xhi, p->logx, 0);
    axis_fit(&ay, ylo, yhi, p->logy, 1);
    double bx = ox + MARGIN_L, by = oy + MARGIN_T;
    double bw = PANEL_W - MARGIN_L - MARGIN_R, bh = PANEL_H - MARGIN_T - MARGIN_B;
#define PX(v) (bx + (to_axis((v), ax.log) - ax.lo) / (ax.hi - ax.lo) * bw)
#define PY(v) (by + bh - (to_axis((v), ay.log) - ay.lo) / (ay.hi - ay.lo) * bh)

    fprintf(f, "<g>\n<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
               "font-size=\"15\" font-weight=\"bold\">",
            bx + bw / 2, oy + 22);
    rkv_xml_text(f, p->title);
    fputs("</text>\n", f);
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
               "fill=\"white\" stroke=\"#333\"/>\n", bx, by, bw, bh);
    char buf[64];
    /* x ticks and grid */
    for (double v = ax.lo; v <= ax.hi + ax.step * 1e-9; v += ax.step) {
        double x = bx + (v - ax.lo) / (ax.hi - ax.lo) * bw;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                   "stroke=\"#ddd\"/>\n", x, by, x, by + bh);
        fmt_tick(buf, sizeof buf, v, ax.log);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
                   "font-size=\"12\">%s</text>\n", x, by + bh + 16, buf);
        if (ax.log && v + 1 <= ax.hi) /* minor ticks 2..9 */
            for (int m = 2; m <= 9; m++) {
                double mx = bx + (v + log10(m) - ax.lo) / (ax.hi - ax.lo) * bw;
                fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
                           "y2=\"%.1f\" stroke=\"#333\"/>\n",
                        mx, by + bh, mx, by + bh - 4);
            }
    }
    /* y ticks and grid */
    for (double v = ay.lo; v <= ay.hi + ay.step * 1e-9; v += ay.step) {
        double y = by + bh - (v - ay.lo) / (ay.hi - ay.lo) * bh;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                   "stroke=\"#ddd\"/>\n", bx, y, bx + bw, y);
        fmt_tick(buf, sizeof buf, v, ay.log);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" "
                   "font-size=\"12\">%s</text>\n", bx - 6, y + 4, buf);
        /* A log axis of few decades also gets 2x and 5x lines, labelled. */
        if (ay.log && ay.hi - ay.lo <= 2 && v + 1 <= ay.hi)
            for (int m = 2; m <= 5; m += 3) {
                double my = by + bh - (v + log10(m) - ay.lo) / (ay.hi - ay.lo) * bh;
                fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
                           "y2=\"%.1f\" stroke=\"#eee\"/>\n",
                        bx, my, bx + bw, my);
                fmt_tick(buf, sizeof buf, v + log10(m), 1);
                if (!strncmp(buf, "1e", 2)) /* 2e6 rather than "1e6" */
                    snprintf(buf, sizeof buf, "%de%d", m, (int)lround(v));
                fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" "
                           "font-size=\"11\" fill=\"#555\">%s</text>\n",
                        bx - 6, my + 4, buf);
            }
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
               "font-size=\"13\">", bx + bw / 2, by + bh + 38);
    rkv_xml_text(f, p->xlabel);
    fputs("</text>\n", f);
    fprintf(f, "<text transform=\"translate(%.1f,%.1f) rotate(-90)\" "
               "text-anchor=\"middle\" font-size=\"13\">",
            ox + 18, by + bh / 2);
    rkv_xml_text(f, p->ylabel);
    fputs("</text>\n", f);

    /* the marker line: e.g. what the simulated GPU holds */
    if (usable(p->xmark, ax.log) && p->xmark > 0) {
        double v = to_axis(p->xmark, ax.log);
        if (v >= ax.lo && v <= ax.hi) {
            double x = PX(p->xmark);
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                       "stroke=\"#888\" stroke-dasharray=\"3,3\"/>\n",
                    x, by, x, by + bh);
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" "
                       "fill=\"#555\">", x + 3, by + 12);
            rkv_xml_text(f, p->xmark_label ? p->xmark_label : "");
            fputs("</text>\n", f);
        }
    }

    /* series */
    for (size_t s = 0; s < p->num_series; s++) {
        const rkv_plot_series *se = &p->series[s];
        const char *col = palette[(size_t)se->color %
                                  (sizeof palette / sizeof palette[0])];
        int open = 0;
        for (size_t i = 0; i < se->n; i++) {
            if (!usable(se->x[i], p->logx) || !usable(se->y[i], p->logy)) {
                if (open)
                    fputs("\"/>\n", f);
                open = 0;
                continue;
            }
            if (!open)
                fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" "
                           "stroke-width=\"2\"%s points=\"",
                        col, se->dashed ? " stroke-dasharray=\"6,4\"" : "");
            fprintf(f, "%.1f,%.1f ", PX(se->x[i]), PY(se->y[i]));
            open = 1;
        }
        if (open)
            fputs("\"/>\n", f);
        for (size_t i = 0; i < se->n; i++)
            if (usable(se->x[i], p->logx) && usable(se->y[i], p->logy))
                fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" "
                           "fill=\"%s\"/>\n",
                        PX(se->x[i]), PY(se->y[i]), col);
    }
    /* legend: where it covers the fewest data points (3 x 3 spots) */
    double lw = 0;
    for (size_t s = 0; s < p->num_series; s++) {
        double w = 34 + 7.0 * (double)strlen(p->series[s].label ? p->series[s].label : "");
        if (w > lw)
            lw = w;
    }
    double lh = 18.0 * (double)p->num_series + 6;
    double lx = bx + 10, ly = by + 10;
    size_t best = SIZE_MAX;
    /* corners first (ties keep the earlier), then edge middles */
    static const int spots[9][2] = {{0, 0}, {2, 0}, {0, 2}, {2, 2}, {2, 1},
                                    {0, 1}, {1, 0}, {1, 2}, {1, 1}};
    for (int k = 0; k < 9; k++) {
        double cx = bx + 10 + (bw - 20 - (lw + 8)) * spots[k][0] / 2.0;
        double cy = by + 10 + (bh - 20 - lh) * spots[k][1] / 2.0;
        size_t inside = 0;
        for (size_t s = 0; s < p->num_series; s++) {
            const rkv_plot_series *se = &p->series[s];
            for (size_t i = 0; i < se->n; i++) {
                if (!usable(se->x[i], p->logx) || !usable(se->y[i], p->logy))
                    continue;
                double px = PX(se->x[i]), py = PY(se->y[i]);
                inside += px >= cx - 4 && px <= cx + lw + 12 && py >= cy - 4 &&
                          py <= cy + lh + 4;
                /* and points along the segment to the next one */
                if (i + 1 < se->n && usable(se->x[i + 1], p->logx) &&
                    usable(se->y[i + 1], p->logy)) {
                    double qx = PX(se->x[i + 1]), qy = PY(se->y[i + 1]);
                    for (int t = 1; t < 16; t++) {
                        double mx = px + (qx - px) * t / 16.0;
                        double my = py + (qy - py) * t / 16.0;
                        inside += mx >= cx && mx <= cx + lw + 8 && my >= cy &&
                                  my <= cy + lh;
                    }
                }
            }
        }
        if (inside < best) {
            best = inside;
            lx = cx;
            ly = cy;
        }
    }
    if (p->num_series) {
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                   "fill=\"white\" fill-opacity=\"0.85\" stroke=\"#999\"/>\n",
                lx, ly, lw + 8, lh);
    }
    for (size_t s = 0; s < p->num_series; s++) {
        const rkv_plot_series *se = &p->series[s];
        const char *col = palette[(size_t)se->color %
                                  (sizeof palette / sizeof palette[0])];
        double y = ly + 15 + 18.0 * (double)s;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                   "stroke=\"%s\" stroke-width=\"2\"%s/>\n",
                lx + 6, y - 4, lx + 30, y - 4, col,
                se->dashed ? " stroke-dasharray=\"6,4\"" : "");
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\">",
                lx + 36, y);
        rkv_xml_text(f, se->label);
        fputs("</text>\n", f);
    }
    fputs("</g>\n", f);
#undef PX
#undef PY
}

rkv_status rkv_svg_write(FILE *f, const char *title,
                         const rkv_plot_panel *panels, size_t num_panels)
{
    if (!f || (!panels && num_panels))
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_svg_write: NULL");
    double w = PANEL_W * (double)(num_panels ? num_panels : 1);
    double h = PANEL_H + TITLE_H;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
               "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
               "font-family=\"Helvetica, Arial, sans-serif\">\n"
               "<rect width=\"100%%\" height=\"100%%\" fill=\"#fafafa\"/>\n",
            w, h, w, h);
    fprintf(f, "<text x=\"%.1f\" y=\"26\" text-anchor=\"middle\" "
               "font-size=\"17\">", w / 2);
    rkv_xml_text(f, title);
    fputs("</text>\n", f);
    for (size_t i = 0; i < num_panels; i++)
        panel(f, &panels[i], PANEL_W * (double)i, TITLE_H);
    fputs("</svg>\n", f);
    if (fflush(f) != 0 || ferror(f))
        return rkv_set_error(RKV_ERR_IO, "writing the SVG failed");
    return RKV_OK;
}
