/*
 * radixkv/kv_evict.h -- a request's own KV made smaller, opt in per request: StreamingLLM (sinks + window), H2O (heavy hitters + recent) and SnapKV (what an observation window attends to), never on pages other requests share (attention/kv_evict.c, attention/kv_select.c).
 *
 * Part of the public API; include <radixkv.h> for all of it (the
 * conventions every call follows are stated there).
 */
#ifndef RADIXKV_KV_EVICT_H
#define RADIXKV_KV_EVICT_H

#include <stddef.h>
#include <stdint.h>

#include "radixkv/attention.h"

RKV_BEGIN_DECLS

/*
 * These calls work on ONE request's block table (pages[0 .. num_pages),
 * kv_len tokens, the pool's page size P). A page is the request's own
 * when its pool reference count is 1 (only the request holds it): pages
 * the tree caches (the matched prefix, or pages the request inserted)
 * carry the tree's reference too, and other requests may read them, so
 * nothing here ever frees, rewrites or drops a token of such a page.
 * A request whose KV was made smaller must not insert the changed part
 * into the tree (its pages no longer hold the prompt's KV in order).
 *
 * Quality: the decode output of the smaller KV differs from full
 * attention's; bench/kv_evict_bench measures by how much for each method
 * and budget on random and on structured K/V (bench/RESULTS.md,
 * docs/hybrid.md "Token eviction").
 */

/* StreamingLLM: attention with rkv_attn_params.window_left W and
 * num_sink_tokens S reads only the first S positions and the last W + 1;
 * the request's own pages with no such position, now or for any later
 * query (positions < kv_len - 1 - W and >= S), are released: the
 * caller's reference is dropped and the entry becomes `filler`, a block
 * the caller keeps allocated (zeroed) for that purpose, so the table stays
 * valid for the attention calls (which never read those positions).
 * *released_out (may be NULL): pages released. Pages whose count is not 1
 * and the filler itself stay. RKV_ERR_INVALID_ARG (nothing changes) for a
 * bad table, kv_len outside its pages, W == 0 or a free filler. */
rkv_status rkv_kv_streaming_release(rkv_pool *pool, uint32_t *pages,
                                    uint32_t num_pages, uint32_t kv_len,
                                    uint32_t sink_tokens, uint32_t window_left,
                                    rkv_block_id filler, uint32_t *released_out);

/* Per-key attention weights (H2O's accumulated attention, SnapKV's
 * observation-window votes): for the request `kv` (num_reqs == 1) and
 * q rows at its last num_rows positions (kv_len - num_rows .. kv_len - 1,
 * as rkv_attn_prefill's rows; num_rows 1 is decode), weights[j] += the sum
 * over rows and query heads of the softmax probability of key j (masked
 * as p's window and sinks; causal). weights has kv_len entries. A host
 * pool runs the CPU reference; a CUDA pool: RKV_ERR_UNSUPPORTED for now
 * (the device kernel, attention/key_weights.cu, is tested on the CUDA
 * simulator but not yet in the backend table). */
rkv_status rkv_attn_key_weights(rkv_attn *attn, const rkv_attn_params *p,
                                const rkv_paged_kv *kv, uint32_t num_rows,
                                const void *q, float *weights);

/* H2O: keep[j] = 1 for the first `protect` tokens (the shared prefix:
 * never evicted), the last `recent`, and the `heavy` tokens of highest
 * score among the others (ties: the earlier; NaN ranks last), else 0.
 * Returns the tokens kept; 0 for a NULL array. Without memory for the
 * ranking it keeps every token (always safe) and returns n. */
uint32_t rkv_kv_select_h2o(const float *score, uint32_t n, uint32_t protect,
                           uint32_t heavy, uint32_t recent, uint8_t *keep);

/* SnapKV: the last `obs` tokens (the observation window whose attention
 * made `score`) and the first `protect` are kept; of the others, the
 * `budget` of highest score after max-pooling over `kernel` neighbours
 * (odd, >= 1: a kept token brings its neighbourhood) are kept. Returns
 * the tokens kept, as rkv_kv_select_h2o. */
uint32_t rkv_kv_select_snapkv(const float *score, uint32_t n, uint32_t protect,
                              uint32_t budget, uint32_t obs, uint32_t kernel,
                              uint8_t *keep);

/* Drops the tokens with keep[j] == 0 from the request's KV (every layer's
 * K and V, scales included), moving the kept ones forward in order within
 * its own pages; the pages left empty are released (the caller's
 * reference dropped; the first page stays even when every token went). Every token of a page that is not the request's own
 * must be kept, and every page from the first dropped token on must be its
 * own (RKV_ERR_INVALID_ARG, nothing changes). On return *kv_len and
 * *num_pages are the new sizes (pages[0 .. *num_pages) the table);
 * `carry` (may be NULL) is a float array of kv_len entries compacted the
 * same way (H2O's accumulated weights). attn's pool; a host pool only (CUDA:
 * RKV_ERR_UNSUPPORTED for now). Positions: K holds its rotary position
 * from append, so attention over the compacted KV reads each kept key as
 * it was; a decode after it passes the new kv_len. */
rkv_status rkv_kv_compact(rkv_attn *attn, uint32_t *pages, uint32_t *num_pages,
                          uint32_t *kv_len, const uint8_t *keep, float *carry);

RKV_END_DECLS

#endif /* RADIXKV_KV_EVICT_H */
