/*
 * fleet/daemon_util.h -- what the fleet's programs (radixkv-router,
 * `radixkv router`, radixkv-fleet-instance) share around their main loops:
 * the stop flag SIGINT/SIGTERM set, the monotonic clock, the publishers'
 * epoch and configuration, and NATS connection. Program code,
 * not library code: the libraries take their time from these callers.
 */
#ifndef RKV_FLEET_DAEMON_UTIL_H
#define RKV_FLEET_DAEMON_UTIL_H

#include <nats/nats.h>
#include <signal.h>
#include <stdint.h>

#include "fleet/nats_auth.h"
#include "fleet/publisher.h"

/* Set (to 1) by SIGINT and SIGTERM once rkv_fleet_catch_signals ran. */
extern volatile sig_atomic_t rkv_fleet_stop;

/* SIGINT/SIGTERM set rkv_fleet_stop (main loops check it and leave
 * cleanly); SIGPIPE is ignored, so a write to a closed socket fails with
 * EPIPE instead of killing the process. */
void rkv_fleet_catch_signals(void);

uint64_t rkv_fleet_now_ms(void); /* CLOCK_MONOTONIC */

/* A natsErrHandler (closure: the program's name) that logs nats.c's
 * asynchronous errors, a permissions violation above all (the server
 * refused a publish or a subscription), with the server's text. */
void rkv_fleet_nats_error(natsConnection *nc, natsSubscription *sub,
                          natsStatus err, void *prog);
uint64_t rkv_fleet_now_us(void);

/* A publisher's epoch: CLOCK_REALTIME in ns, so a restarted instance
 * starts a later epoch than the one the router knew. */
uint64_t rkv_fleet_epoch_now(void);

/* A publishing program's publisher configuration: the defaults, with its
 * model, instance id, heartbeat period and a fresh epoch. */
void rkv_fleet_pub_config_for(rkv_fleet_pub_config *cfg, const char *model, uint64_t id,
                              uint64_t heartbeat_ms);

/* The connection a publishing program (radixkv-fleet-instance, `radixkv
 * bridge`) opens: auth applied (default nats://127.0.0.1:4222), errors
 * logged as prog by rkv_fleet_nats_error, reconnecting forever. A failure
 * is printed (server_log: the redacted URL). *no is the caller's to
 * destroy either way; auth may be freed once this returns. */
natsStatus rkv_fleet_nats_connect(const char *prog, const rkv_nats_auth *auth,
                                  const char *server_log, natsOptions **no,
                                  natsConnection **nc);

#endif
