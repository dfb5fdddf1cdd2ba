/*
 * fleet/route_json.h -- the JSON of the router's HTTP route API
 * (POST /v1/route, fleet/router_daemon.c): the request's parser and the
 * writers of the answer. Pure C, no NATS; program-side code with the
 * library's manners (no prints, no clock, errors as rkv_status + a
 * sentence in rkv_last_error()).
 *
 * The request is one JSON object with
 *   "token_ids": [int, ...]   required; each an integer in int32 range
 *   "namespace": int          optional (default 0); 0..2^64-1
 * and nothing else: an unknown or repeated member, a value of the wrong
 * type, a fraction or exponent, a number out of range, trailing bytes
 * after the object, or nesting of any kind is RKV_ERR_FORMAT. Member names
 * are compared byte for byte (an escape in a name makes it unknown). Whitespace is JSON's. The parser reads exactly body[0..
 * len) (no terminator needed), never recurses, and writes the tokens only
 * up to the caller's room: more than cap tokens is RKV_ERR_NO_SPACE.
 */
#ifndef RKV_FLEET_ROUTE_JSON_H
#define RKV_FLEET_ROUTE_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "radixkv.h"

typedef struct rkv_route_request {
    uint64_t ns;
    uint32_t n_tokens;
} rkv_route_request;

/* Parses body[0..len) into *req and tokens[0..req->n_tokens). On failure
 * *req is zeroed and tokens[] may hold a prefix of the array. */
rkv_status rkv_route_json_parse(const char *body, size_t len, int32_t *tokens,
                                uint32_t cap, rkv_route_request *req);

/* {"error": "<msg>", "status": code} into buf[0..cap): the message escaped
 * as a JSON string (control bytes as \u00XX, bytes >= 0x80 replaced by
 * '?', so the answer is always valid JSON). Returns the length as
 * snprintf does (>= cap: did not fit). */
size_t rkv_route_json_error(char *buf, size_t cap, int code, const char *msg);

/* The answer's writer: appends to buf[0..cap) without printf (formatting
 * 64 candidates with snprintf was about a third of the daemon's CPU per
 * HTTP query at 1,024 instances). len counts what was appended, also past
 * cap (as snprintf's result: len >= cap means it did not fit; nothing is
 * written past cap, and the text is terminated while len < cap). */
typedef struct rkv_json_out {
    char *buf;
    size_t cap, len;
} rkv_json_out;
void rkv_json_raw(rkv_json_out *o, const char *s); /* bytes as they are */
void rkv_json_u64(rkv_json_out *o, uint64_t v);    /* as "%" PRIu64     */
void rkv_json_num(rkv_json_out *o, double v);      /* as "%.10g"        */
/* One entry of the answer's "candidates" list, with ", " before it unless
 * first: {"instance": I, "overlap_blocks": P, "device": D, "host": H,
 * "disk": K, "score": S}, each number as rkv_json_u64 / rkv_json_num
 * write it, appended at once. */
typedef struct rkv_json_cand {
    uint64_t instance, pages, device, host, disk;
    double score;
} rkv_json_cand;
void rkv_json_candidate(rkv_json_out *o, int first, const rkv_json_cand *c);

#endif
