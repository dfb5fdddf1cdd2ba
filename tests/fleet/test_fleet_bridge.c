/*
 * tests/fleet/test_fleet_bridge.c -- `radixkv bridge` end to end: a real
 * `nats-server -js`, the router daemon (`radixkv router`), a vLLM-format
 * worker (tests/fleet/vllm_publisher.py: ZMQ PUB + ROUTER replay, written
 * from the format), and the bridge relaying it as instance 7. The worker
 * sends, in phases the test starts with files in a control directory:
 *   1. prompt A's 8 pages in two events (array form with unsigned hashes
 *      above 2^63; map form with the same bits signed and an unknown
 *      field), prompt B's 4 pages with 32-byte hashes and no medium,
 *      prompt D's 3 pages under LoRA adapter "adapter-x" beside an event
 *      type from the future; every batch has an unknown trailing field;
 *   2. prompt C's 6 pages in a batch kept for replay but never sent on
 *      PUB (the gap), then B's last two pages removed (map form);
 *   3. a restart: the sequence starts again at 0 and only D is stored
 *      (everything from before must be withdrawn);
 *   4. AllBlocksCleared;
 *   5. a gap whose replayed batch does not decode (C's pages): the bridge
 *      withdraws everything, then A's first 4 pages arrive;
 *   6. a good gap (C's pages again): filled by replay -- not answered by
 *      what was left of the previous replay -- so A and C are both held.
 * After each phase the router must route each prompt (by token ids, page
 * size 16) to instance 7 with exactly the pages the worker holds; D only
 * in the adapter's namespace (rkv_kvev_lora_name_ns). Every wait is
 * bounded and polls; nothing asserts on wall time.
 *
 * Skipped when nats-server, or python3 with zmq and msgpack, is missing.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fleet/codec.h"
#include "fleet/kvev.h"
#include "tests/fleet/nats_harness.h"

#define MODEL "bridgetest"
#define ID 7u
#define BS 16u
#define WAIT_MS 45000u

static void prompt(uint32_t p, uint32_t pages, int32_t *t)
{
    for (uint32_t i = 0; i < pages * BS; i++)
        t[i] = (int32_t)((p * 1000 + i * 7) % 32000);
}

/* Pages the router says instance ID holds of prompt p (pages long) in
 * namespace ns; -1: no answer. */
static int routed(nats_harness *h, uint32_t p, uint32_t pages, rkv_namespace ns)
{
    int32_t t[16 * BS];
    uint8_t buf[RKV_WIRE_HEADER + 16 + 4 * 16 * BS];
    size_t len = 0;
    prompt(p, pages, t);
    cr_assert_eq(rkv_wire_encode_query_tokens(ns, t, pages * BS, BS, buf, sizeof buf,
                                              &len), RKV_OK);
    rkv_wire_reply rep;
    if (!harness_route(h, MODEL, buf, len, 2000, &rep) || rep.status != RKV_OK)
        return -1;
    for (uint32_t k = 0; k < rep.count; k++)
        if (rep.ids[k] == ID)
            return (int)rep.id_pages[k];
    return -1;
}

typedef struct want {
    uint32_t prompt, pages, expect;
    int lora;
} want;

static void wait_for(nats_harness *h, const want *w, int n, const char *when,
                     pid_t bridge)
{
    uint64_t deadline = harness_ms_now() + WAIT_MS;
    rkv_namespace lora = rkv_kvev_lora_name_ns("adapter-x", 9);
    for (;;) {
        int ok = 1, got = 0, i;
        for (i = 0; i < n && ok; i++) {
            got = routed(h, w[i].prompt, w[i].pages, w[i].lora ? lora : 0);
            ok = got == (int)w[i].expect;
        }
        if (ok)
            return;
        int st;
        cr_assert_eq(waitpid(bridge, &st, WNOHANG), 0, "the bridge exited");
        cr_assert_lt(harness_ms_now(), deadline, "%s: prompt %u%s: %d pages routed, "
                     "%u held", when, w[i - 1].prompt, w[i - 1].lora ? " (LoRA)" : "",
                     got, w[i - 1].expect);
        harness_nap_ms(100);
    }
}

static void touch(const char *dir, const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fclose(f);
}

Test(fleet_bridge, vllm_worker_routed_through_bridge)
{
    HARNESS_REQUIRE_SERVER();
    if (system("/usr/bin/python3 -c 'import zmq, msgpack' 2>/dev/null") != 0) {
        fprintf(stderr, "%s (python3-zmq or python3-msgpack missing)\n", HARNESS_SKIP_MESSAGE);
        cr_skip_test(HARNESS_SKIP_MESSAGE);
    }
    nats_harness h;
    harness_start(&h);
    char ctl[] = "/tmp/rkv-bridge-XXXXXX";
    cr_assert_not_null(mkdtemp(ctl));
    char pub_port[16], rep_port[16], zmq_ep[64], rep_ep[64], id[16];
    snprintf(pub_port, sizeof pub_port, "%d", harness_free_port());
    snprintf(rep_port, sizeof rep_port, "%d", harness_free_port());
    snprintf(zmq_ep, sizeof zmq_ep, "tcp://127.0.0.1:%s", pub_port);
    snprintf(rep_ep, sizeof rep_ep, "tcp://127.0.0.1:%s", rep_port);
    snprintf(id, sizeof id, "%u", ID);
    char *router[] = {RKV_CMD_BIN, "router", "--server", h.url, "--model", MODEL,
                      "--snapshot-timeout-ms", "500", NULL};
    char *worker[] = {"/usr/bin/python3", RKV_SOURCE_DIR "/tests/fleet/vllm_publisher.py",
                      pub_port, rep_port, ctl, NULL};
    char *bridge[] = {RKV_CMD_BIN, "bridge", "--zmq", zmq_ep, "--replay", rep_ep,
                      "--instance", id, "--server", h.url, "--model", MODEL,
                      "--heartbeat-ms", "200", "--replay-timeout-ms", "5000", NULL};
    pid_t r = harness_spawn(router, 0);
    pid_t w = harness_spawn(worker, 0);
    pid_t b = harness_spawn(bridge, 0);

    want p1[] = {{1, 8, 8, 0}, {2, 4, 4, 0}, {4, 3, 3, 1}, {4, 3, 0, 0}, {3, 6, 0, 0}};
    wait_for(&h, p1, 5, "phase 1", b);
    touch(ctl, "phase2");
    want p2[] = {{3, 6, 6, 0}, {2, 4, 2, 0}, {1, 8, 8, 0}, {4, 3, 3, 1}};
    wait_for(&h, p2, 4, "phase 2 (gap filled by replay, removal)", b);
    touch(ctl, "phase3");
    want p3[] = {{1, 8, 0, 0}, {3, 6, 0, 0}, {2, 4, 0, 0}, {4, 3, 3, 1}};
    wait_for(&h, p3, 4, "phase 3 (restarted worker)", b);
    touch(ctl, "phase4");
    want p4[] = {{4, 3, 0, 1}, {1, 8, 0, 0}};
    wait_for(&h, p4, 2, "phase 4 (cleared)", b);
    touch(ctl, "phase5");
    want p5[] = {{1, 8, 4, 0}, {3, 6, 0, 0}};
    wait_for(&h, p5, 2, "phase 5 (a replayed batch that does not decode)", b);
    touch(ctl, "phase6");
    want p6[] = {{3, 6, 6, 0}, {1, 8, 4, 0}};
    wait_for(&h, p6, 2, "phase 6 (the next gap filled)", b);

    harness_end(&b, SIGTERM);
    harness_end(&w, SIGTERM);
    harness_end(&r, SIGTERM);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", ctl);
    cr_assert_eq(system(cmd), 0);
    harness_stop(&h);
    nats_CloseAndWait(2000);
}
