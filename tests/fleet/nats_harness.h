/*
 * tests/fleet/nats_harness.h -- what the NATS tests share: a real
 * `nats-server -js` on a free loopback port with a temporary store dir
 * (started, restarted on the same port and store, stopped and removed),
 * child processes that die with the test, a clock, and reading one sample
 * of the router's Prometheus text. Every wait is bounded and polls.
 */
#ifndef RKV_TESTS_FLEET_NATS_HARNESS_H
#define RKV_TESTS_FLEET_NATS_HARNESS_H

#include <nats/nats.h>
#include <stddef.h>
#include <stdint.h>

#include "fleet/codec.h"
#include "fleet/publisher.h"
#include <sys/types.h>

/* The message ctest's SKIP_REGULAR_EXPRESSION looks for. */
#define HARNESS_SKIP_MESSAGE "nats-server not found: fleet NATS test skipped"

typedef struct nats_harness {
    pid_t server;
    char dir[64], url[64], port[16];
    natsConnection *nc; /* the test's own connection (reconnects by itself) */
} nats_harness;

int harness_have_server(void); /* 0 (with HARNESS_SKIP_MESSAGE on stderr) if missing */
/* A NATS test's first line: skips it (Criterion) without nats-server. */
#define HARNESS_REQUIRE_SERVER()                                                \
    do {                                                                        \
        if (!harness_have_server())                                             \
            cr_skip_test(HARNESS_SKIP_MESSAGE);                                 \
    } while (0)
int harness_free_port(void);
/* fork + exec argv; the child dies with the test (PR_SET_PDEATHSIG), its
 * stdout goes to /dev/null, and its stderr too when quiet. With
 * RKV_TEST_BIN_DIR set, a radixkv program runs from that directory
 * instead (the same name). */
pid_t harness_spawn(char *const argv[], int quiet);
void harness_start(nats_harness *h);   /* new dir and port, connected       */
void harness_kill_server(nats_harness *h, int sig); /* and wait for it    */
void harness_restart_server(nats_harness *h);       /* same port and dir  */
void harness_stop(nats_harness *h);    /* connection, server, store dir     */
/* Ends a child: sig, then waits for it; *p becomes 0 (0 is skipped).
 * Fails the test when the child had exited 66 (a ThreadSanitizer report). */
void harness_end(pid_t *p, int sig);

/* The publisher config the tests start from: model, instance and epoch,
 * heartbeats every 100 ms (so a test sees one quickly), batches of
 * batch_events (0: the default). */
rkv_fleet_pub_config harness_pub_config(const char *model, uint64_t instance,
                                        uint64_t epoch, uint32_t batch_events);

uint64_t harness_ms_now(void);
void harness_nap_ms(int ms);
/* The value of the sample line "NAME VALUE" (not # HELP / # TYPE);
 * fails the test when there is none. */
double harness_stat_value(const char *text, const char *name);

/* The router's stats text (request on radixkv.MODEL.stats) into buf; 0
 * when it did not answer within wait_ms. */
int harness_stats(nats_harness *h, const char *model, char *buf, size_t cap,
             int64_t wait_ms);
/* Sends an encoded route query on radixkv.MODEL.route and decodes the
 * reply into *rep (the test fails if it does not decode); 0 when the
 * router did not answer within wait_ms. */
int harness_route(nats_harness *h, const char *model, const uint8_t *query, size_t len,
             int64_t wait_ms, rkv_wire_reply *rep);

/* harness_route for the full pages of tokens[0..n) in namespace ns (at
 * most 96 pages of P tokens), hashed as an instance hashes them. */
int harness_route_tokens(nats_harness *h, const char *model, uint64_t ns,
                         const int32_t *tokens, uint32_t n, uint32_t P, int64_t wait_ms,
                         rkv_wire_reply *rep);

#endif
