/*
 * tests/fleet/test_fleet_http_route.c -- the router daemon's HTTP route
 * API (rkv_daemon_http_route, POST /v1/route) without a NATS server: two real
 * trees publish their KV events and heartbeats into the daemon's handlers
 * (rkv_daemon_handle, what the main loop runs), and JSON requests of token ids
 * must find exactly the overlaps the trees cache -- so the daemon hashes
 * token ids as the trees do, page size and namespace included. Then the errors: malformed JSON
 * 400, unknown page size 503, no instance heard 503, each a JSON object.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet/codec.h"
#include "fleet/router_daemon.h"
#include "tests/support/handles.h"
#include "radixkv.h"

#define MODEL "httproute"
#define P 4u

typedef struct tinst {
    uint64_t id;
    rkv_pool *pool;
    rkv_tree *tree;
} tinst;

static void tinst_open(tinst *t, uint64_t id)
{
    t->id = id;
    t->pool = tu_pool(256, P);
    t->tree = tu_event_tree(t->pool, 1024, 0);
}

static void tinst_close(tinst *t)
{
    rkv_tree_destroy(t->tree);
    rkv_pool_destroy(t->pool);
}

/* Caches tokens[0..n) (full pages) in namespace ns. */
static void cache(tinst *t, rkv_namespace ns, const int32_t *tok, uint32_t n)
{
    uint32_t pages = n / P;
    rkv_block_id b[64];
    cr_assert_leq(pages, 64);
    cr_assert_eq(rkv_pool_alloc_n(t->pool, pages, b), RKV_OK);
    cr_assert_eq(rkv_tree_insert(t->tree, ns, tok, (size_t)pages * P, b, NULL, NULL),
                 RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(rkv_pool_unref_n(t->pool, pages, b), RKV_OK);
}

static void subject(char *buf, size_t cap, const char *kind, uint64_t id)
{
    snprintf(buf, cap, "radixkv.%s.%s.%llu", MODEL, kind, (unsigned long long)id);
}

/* The tree's events since the last call into the daemon, then a heartbeat. */
static void publish(rkv_daemon *d, tinst *t, uint64_t now)
{
    rkv_event ev[256];
    uint32_t n = 0;
    cr_assert_eq(rkv_tree_events_drain(t->tree, ev, 256, &n), RKV_OK);
    char subj[96];
    uint64_t last = 0;
    if (n > 0) {
        static uint8_t buf[1 << 16];
        size_t len = 0;
        cr_assert_eq(rkv_wire_encode_events(t->id, 1, ev, n, buf, sizeof buf, &len), RKV_OK,
                     "%s", rkv_last_error());
        subject(subj, sizeof subj, "kv", t->id);
        rkv_daemon_handle(d, RKV_DAEMON_KV, subj, buf, len, NULL, now);
        last = ev[n - 1].seq;
    }
    rkv_wire_heartbeat hb = {t->id, 1, last, 0, 0};
    if (n == 0) {
        const rkv_router *r = rkv_daemon_router(d);
        rkv_router_instance_info info;
        if (rkv_router_instance_info_get(r, t->id, &info) == RKV_OK)
            hb.last_seq = info.last_seq;
    }
    uint8_t hbuf[128];
    size_t hl = 0;
    cr_assert_eq(rkv_wire_encode_heartbeat(&hb, hbuf, sizeof hbuf, &hl), RKV_OK);
    subject(subj, sizeof subj, "hb", t->id);
    rkv_daemon_handle(d, RKV_DAEMON_HB, subj, hbuf, hl, NULL, now);
}

static int route(rkv_daemon *d, const char *json, char *out, size_t cap)
{
    int code = 0;
    size_t n = rkv_daemon_http_route(d, json, strlen(json), out, cap, &code);
    cr_assert_lt(n, cap);
    cr_assert_eq(strlen(out), n);
    return code;
}

static uint64_t field(const char *json, const char *name)
{
    char key[64];
    snprintf(key, sizeof key, "\"%s\": ", name);
    const char *p = strstr(json, key);
    cr_assert_not_null(p, "no %s in %s", name, json);
    return strtoull(p + strlen(key), NULL, 10);
}

/* The JSON array of n tokens. */
static void body(char *buf, size_t cap, const int32_t *tok, uint32_t n, const char *ns)
{
    size_t k = (size_t)snprintf(buf, cap, "{\"token_ids\": [");
    for (uint32_t i = 0; i < n; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%d", i ? ", " : "", (int)tok[i]);
    snprintf(buf + k, cap - k, "]%s}", ns ? ns : "");
}

Test(fleet_http_route, token_ids_find_what_the_trees_cache)
{
    rkv_daemon *d = rkv_daemon_create("t", MODEL, 3000, 1000, 1000, NULL, NULL);
    cr_assert_not_null(d);
    char out[16384], req[4096];
    int32_t tok[40];
    for (int i = 0; i < 40; i++)
        tok[i] = 1000 + i * 7;
    /* before any event the page size is unknown */
    body(req, sizeof req, tok, 40, NULL);
    cr_assert_eq(route(d, req, out, sizeof out), 503);
    cr_assert_not_null(strstr(out, "\"status\": 503"));
    cr_assert_not_null(strstr(out, "--page-size"));

    tinst a, b;
    tinst_open(&a, 11);
    tinst_open(&b, 22);
    cache(&a, 0, tok, 24);  /* 6 pages */
    cache(&b, 0, tok, 36);  /* 9 pages */
    cache(&a, 5, tok, 40);  /* 10 pages in namespace 5 */
    publish(d, &a, 1100);
    publish(d, &b, 1100);

    /* 39 tokens: 9 full pages (the partial tenth is not hashed); b holds
     * all nine */
    body(req, sizeof req, tok, 39, NULL);
    cr_assert_eq(route(d, req, out, sizeof out), 200, "%s", out);
    cr_assert_eq(field(out, "instance"), 22, "%s", out);
    cr_assert_eq(field(out, "overlap_blocks"), 9);
    cr_assert_eq(field(out, "device"), 9);
    cr_assert_eq(field(out, "request_blocks"), 9);
    cr_assert_eq(field(out, "page_size"), P);
    cr_assert_not_null(strstr(out, "{\"instance\": 11, \"overlap_blocks\": 6, "), "%s", out);
    cr_assert_not_null(strstr(out, "{\"instance\": 22, \"overlap_blocks\": 9, "), "%s", out);
    /* namespace 5: only a, all 10 pages */
    body(req, sizeof req, tok, 40, ", \"namespace\": 5");
    cr_assert_eq(route(d, req, out, sizeof out), 200, "%s", out);
    cr_assert_eq(field(out, "instance"), 11, "%s", out);
    cr_assert_eq(field(out, "overlap_blocks"), 10);
    cr_assert_not_null(strstr(out, "{\"instance\": 22, \"overlap_blocks\": 0, "), "%s", out);
    /* a changed token in page 3: both overlaps stop there */
    tok[13] = -5;
    body(req, sizeof req, tok, 40, NULL);
    cr_assert_eq(route(d, req, out, sizeof out), 200, "%s", out);
    cr_assert_eq(field(out, "overlap_blocks"), 3, "%s", out);
    cr_assert_not_null(strstr(out, "{\"instance\": 11, \"overlap_blocks\": 3, "), "%s", out);

    /* each answered query is one router query */
    const rkv_router *r = rkv_daemon_router(d);
    rkv_router_stats st;
    cr_assert_eq(rkv_router_get_stats(r, &st), RKV_OK);
    cr_assert_geq(st.queries, 3);

    /* malformed: 400 with the parser's reason, nothing routed */
    cr_assert_eq(route(d, "{\"token_ids\": [1, 2,]}", out, sizeof out), 400);
    cr_assert_not_null(strstr(out, "\"error\": \"route request: "), "%s", out);
    cr_assert_eq(route(d, "{\"token_ids\": [1], \"model\": 1}", out, sizeof out), 400);
    tinst_close(&a);
    tinst_close(&b);
    rkv_daemon_destroy(d);
}

/* A fixed page size (--page-size) is used before any event; an instance
 * known only from its stream (no heartbeat yet) is not routed to. */
Test(fleet_http_route, page_size_option_and_unheard_instances)
{
    rkv_daemon *d = rkv_daemon_create("t", MODEL, 3000, 1000, 1000, NULL, NULL);
    cr_assert_not_null(d);
    rkv_daemon_set_page_size(d, P);
    char out[4096];
    cr_assert_eq(route(d, "{\"token_ids\": [1, 2, 3, 4]}", out, sizeof out), 503);
    cr_assert_not_null(strstr(out, "no instance"), "%s", out);
    tinst a;
    tinst_open(&a, 7);
    int32_t tok[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    cache(&a, 0, tok, 8);
    rkv_event ev[16];
    uint32_t n = 0;
    cr_assert_eq(rkv_tree_events_drain(a.tree, ev, 16, &n), RKV_OK);
    uint8_t buf[4096];
    size_t len = 0;
    cr_assert_eq(rkv_wire_encode_events(7, 1, ev, n, buf, sizeof buf, &len), RKV_OK);
    rkv_daemon_handle(d, RKV_DAEMON_KV, "radixkv." MODEL ".kv.7", buf, len, NULL, 1100);
    cr_assert_eq(route(d, "{\"token_ids\": [1, 2, 3, 4, 5, 6, 7, 8]}", out, sizeof out),
                 503, "%s", out);
    rkv_wire_heartbeat hb = {7, 1, ev[n - 1].seq, 0, 0};
    cr_assert_eq(rkv_wire_encode_heartbeat(&hb, buf, sizeof buf, &len), RKV_OK);
    rkv_daemon_handle(d, RKV_DAEMON_HB, "radixkv." MODEL ".hb.7", buf, len, NULL, 1200);
    cr_assert_eq(route(d, "{\"token_ids\": [1, 2, 3, 4, 5, 6, 7, 8]}", out, sizeof out),
                 200, "%s", out);
    cr_assert_eq(field(out, "instance"), 7);
    cr_assert_eq(field(out, "overlap_blocks"), 2);
    /* counted as routed until the next heartbeat */
    rkv_router_instance_info info;
    cr_assert_eq(rkv_router_instance_info_get(rkv_daemon_router(d), 7, &info), RKV_OK);
    cr_assert_eq(info.routed_running, 1);
    tinst_close(&a);
    rkv_daemon_destroy(d);
}

static void keep_text(void *ctx, const char *subject, const void *data, size_t len)
{
    (void)subject;
    char *out = ctx;
    size_t n = len < 65535 ? len : 65535;
    memcpy(out, data, n);
    out[n] = 0;
}

/* radixkv_router_route_cpu_seconds_total, sampled (1 route call in 16 by
 * default, fleet/cpu_sample.h), still counts: after 400 routes it is
 * above 0 and far below a second. */
Test(fleet_http_route, route_cpu_metric_counts_when_sampled)
{
    rkv_daemon *d = rkv_daemon_create("t", MODEL, 3000, 1000, 1000, NULL, NULL);
    cr_assert_not_null(d);
    static char text[65536];
    rkv_daemon_set_reply(d, keep_text, text);
    int32_t tok[40];
    for (int i = 0; i < 40; i++)
        tok[i] = 3000 + i;
    tinst a;
    tinst_open(&a, 5);
    cache(&a, 0, tok, 40);
    publish(d, &a, 1100);
    char out[16384], req[4096];
    body(req, sizeof req, tok, 40, NULL);
    for (int q = 0; q < 400; q++)
        cr_assert_eq(route(d, req, out, sizeof out), 200, "%s", out);
    rkv_daemon_handle(d, RKV_DAEMON_STATS, "radixkv." MODEL ".stats", NULL, 0, "_INBOX.x",
                      1200);
    const char *m = strstr(text, "\nradixkv_router_route_cpu_seconds_total ");
    cr_assert_not_null(m, "%s", text);
    double s = strtod(m + strlen("\nradixkv_router_route_cpu_seconds_total "), NULL);
    cr_assert(s > 0 && s < 1, "route cpu %g", s);
    tinst_close(&a);
    rkv_daemon_destroy(d);
}
