/*
 * tests/support/mla_ref.c -- the explicit MLA of mla_ref.h (double
 * precision; clarity over speed).
 */
#include "tests/support/mla_ref.h"

#include <math.h>
#include <stdlib.h>

/* Head h's D-wide up-projection (W: H x D x R) of one R-wide latent row. */
static void up_project(const float *W, const float *latent, uint32_t h, uint32_t D, uint32_t R,
                       double *out)
{
    for (uint32_t i = 0; i < D; i++) {
        double x = 0;
        for (uint32_t r = 0; r < R; r++)
            x += (double)W[((size_t)h * D + i) * R + r] * latent[r];
        out[i] = x;
    }
}

void mla_explicit(const mla_dims *d, uint32_t T, const float *W_UK, const float *W_UV,
                  const float *c_kv, const float *k_pe, const float *q_nope,
                  const float *q_pe, double scale, double *out, double *lse)
{
    const uint32_t H = d->H, Dn = d->Dn, E = d->E, Dv = d->Dv, R = d->R;
    double *s = malloc(sizeof(double) * T);
    double *k = malloc(sizeof(double) * Dn);
    double *v = malloc(sizeof(double) * Dv);
    for (uint32_t h = 0; h < H; h++) {
        double mx = -INFINITY;
        for (uint32_t t = 0; t < T; t++) {
            up_project(W_UK, c_kv + (size_t)t * R, h, Dn, R, k);
            double dot = 0;
            for (uint32_t i = 0; i < Dn; i++)
                dot += (double)q_nope[(size_t)h * Dn + i] * k[i];
            for (uint32_t e = 0; e < E; e++)
                dot += (double)q_pe[(size_t)h * E + e] * k_pe[(size_t)t * E + e];
            s[t] = dot * scale;
            mx = s[t] > mx ? s[t] : mx;
        }
        double l = 0;
        for (uint32_t t = 0; t < T; t++)
            l += (s[t] = exp(s[t] - mx));
        lse[h] = mx + log(l);
        for (uint32_t j = 0; j < Dv; j++)
            out[(size_t)h * Dv + j] = 0;
        for (uint32_t t = 0; t < T; t++) {
            up_project(W_UV, c_kv + (size_t)t * R, h, Dv, R, v);
            for (uint32_t j = 0; j < Dv; j++)
                out[(size_t)h * Dv + j] += s[t] / l * v[j];
        }
    }
    free(s);
    free(k);
    free(v);
}

void mla_absorb_q(const mla_dims *d, const float *W_UK, const float *q_nope,
                  float *q_latent)
{
    for (uint32_t h = 0; h < d->H; h++)
        for (uint32_t r = 0; r < d->R; r++) {
            double x = 0;
            for (uint32_t i = 0; i < d->Dn; i++)
                x += (double)W_UK[((size_t)h * d->Dn + i) * d->R + r] *
                     q_nope[(size_t)h * d->Dn + i];
            q_latent[(size_t)h * d->R + r] = (float)x;
        }
}

void mla_up_v(const mla_dims *d, const float *W_UV, const float *o_latent, double *out)
{
    for (uint32_t h = 0; h < d->H; h++)
        up_project(W_UV, o_latent + (size_t)h * d->R, h, d->Dv, d->R, out + (size_t)h * d->Dv);
}
