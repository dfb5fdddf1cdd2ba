/*
 * fleet/daemon_util.h -- what the fleet's programs (radixkv-router,
 * `radixkv router`, radixkv-fleet-instance) share around their main loops:
 * the stop flag SIGINT/SIGTERM set, and the monotonic clock. Program code,
 * not library code: the libraries take their time from these callers.
 */
#ifndef RKV_FLEET_DAEMON_UTIL_H
#define RKV_FLEET_DAEMON_UTIL_H

#include <nats/nats.h>
#include <signal.h>
#include <stdint.h>

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

#endif
