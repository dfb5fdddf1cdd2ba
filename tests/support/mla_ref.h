/*
 * tests/support/mla_ref.h -- multi-head latent attention written the
 * explicit (non-absorbed) way, in double precision, for the MLA tests: the
 * per-head keys and values are materialised from the latent with the
 * up-projections, exactly as a model without the absorption trick runs.
 *
 * Shapes (row-major, float): W_UK [H][Dn][R], W_UV [H][Dv][R], c_kv
 * [T][R], k_pe [T][E], q_nope [H][Dn], q_pe [H][E], out [H][Dv], lse [H].
 */
#ifndef RKV_TESTS_MLA_REF_H
#define RKV_TESTS_MLA_REF_H

#include <stdint.h>

typedef struct mla_dims {
    uint32_t H, Dn, E, Dv, R;
} mla_dims;

/* k[h][t] = [W_UK[h] c_kv[t], k_pe[t]], v[h][t] = W_UV[h] c_kv[t];
 * out[h] = softmax_t(scale * [q_nope[h], q_pe[h]] . k[h][t]) . v[h][t]. */
void mla_explicit(const mla_dims *d, uint32_t T, const float *W_UK, const float *W_UV,
                  const float *c_kv, const float *k_pe, const float *q_nope,
                  const float *q_pe, double scale, double *out, double *lse);
/* q_latent[h] = W_UK[h]^T q_nope[h] ([H][R]). */
void mla_absorb_q(const mla_dims *d, const float *W_UK, const float *q_nope,
                  float *q_latent);
/* out[h] = W_UV[h] o_latent[h] ([H][Dv]). */
void mla_up_v(const mla_dims *d, const float *W_UV, const float *o_latent, double *out);

#endif
