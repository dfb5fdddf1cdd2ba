/*
 * fleet/guard.h -- what the router daemon checks of what the NATS bus
 * hands it before it believes it (the trust model: README "Security",
 * "Fleet"): which instance a message comes from is read from its subject
 * (radixkv.<model>.kv.<id>, .hb.<id>, the snapshot inbox's .<id>), the
 * subjects the server's permissions give that instance alone, and a
 * payload that names another instance is rejected; and how often one
 * instance may make the router ask for a snapshot (a token bucket, so a
 * stream that keeps breaking costs a bounded number of full snapshots).
 *
 * Pure C, no NATS, no clock (times come from the caller), no prints.
 */
#ifndef RKV_FLEET_GUARD_H
#define RKV_FLEET_GUARD_H

#include <stddef.h>
#include <stdint.h>

/* The instance id of subject when it is prefix followed by an id in
 * decimal as the publisher writes it (digits only, no sign, no leading
 * zero but for "0" itself, at most UINT64_MAX): 1 and *id; else 0. */
int rkv_fleet_subject_id(const char *subject, const char *prefix, uint64_t *id);

/* A token bucket: at most `burst` takes back to back, then one per
 * interval_ms. Zeroed is empty; rkv_fleet_bucket_init fills it. */
typedef struct rkv_fleet_bucket {
    uint32_t tokens;
    uint64_t last_ms; /* when the last token was added (or the fill) */
} rkv_fleet_bucket;

void rkv_fleet_bucket_init(rkv_fleet_bucket *b, uint32_t burst, uint64_t now_ms);
/* 1 and one token spent when one is left (after adding those interval_ms
 * periods since last_ms brought, up to burst); 0 otherwise. A clock that
 * goes back adds nothing. */
int rkv_fleet_bucket_take(rkv_fleet_bucket *b, uint32_t burst, uint64_t interval_ms,
                          uint64_t now_ms);

#endif
