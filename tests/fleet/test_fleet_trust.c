/*
 * tests/fleet/test_fleet_trust.c -- the fleet's trust model (README
 * "Security", "Fleet") against a real nats-server:
 *
 *  - permissions: nats-server runs the sample configuration
 *    fleet/conf/nats-server-auth.conf as it is (per-instance subject
 *    permissions, passwords from the environment). An unauthenticated
 *    connection and a wrong password are refused; instance 1 may not
 *    publish on instance 2's subjects, nor a route client on an
 *    instance's (the server says "permissions violation"); instance 1's
 *    own subjects carrying a payload that names instance 2 are rejected
 *    by the router (counted, instance 2 never appears in a route); the
 *    snapshot round trip works under the permissions; the router, given
 *    its password in the URL, never logs it.
 *  - token, NKey and .creds (operator mode: operator, system account,
 *    account with JetStream and user JWTs made here with libsodium)
 *    authentication of the router; anonymous connections refused.
 *  - TLS: a CA, a server and a client certificate made with openssl at
 *    test time; nats-server requires a verified client certificate. The
 *    router and an in-process instance connect with --tls-ca/--tls-cert/
 *    --tls-key (and rkv_nats_auth), a client without a certificate is
 *    refused. Skipped with a message when openssl is missing.
 *  - snapshot requests are rate-limited per instance: a stream that keeps
 *    breaking costs the burst, then one per interval.
 *  - the index memory budget: a router with a small --index-max-entries
 *    fed more blocks than that keeps at most that many entries, counts the
 *    refused events and logs them.
 *
 * Every wait is bounded and polls; nothing asserts on wall time.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fleet/codec.h"
#include "fleet/nats_auth.h"
#include "fleet/publisher.h"
#include "tests/fleet/nats_harness.h"
#include "tests/support/event_driver.h"
#include "tests/support/test_util.h"

#define MODEL "demo" /* the sample configuration's */
#define NQ 24

static atomic_int g_not_permitted;

static void on_error(natsConnection *nc, natsSubscription *sub, natsStatus err,
                     void *closure)
{
    (void)nc;
    (void)sub;
    (void)closure;
    if (err == NATS_NOT_PERMITTED)
        atomic_fetch_add(&g_not_permitted, 1);
}

typedef struct world {
    nats_harness h;
    char log[160];    /* the router's stderr                         */
    char secret[96];  /* files with secrets and certificates live here */
    pid_t router;
    evd in;
    natsConnection *inc; /* instance 1's connection                  */
    rkv_fleet_pub *pub;
    int32_t q_tok[NQ][EVD_MAX_TOK];
    uint32_t q_n[NQ];
    uint64_t q_ns[NQ];
} world;

/* fork + exec argv with stderr to path (stdout to /dev/null). */
static pid_t spawn_logged(char *const argv[], const char *path)
{
    pid_t p = fork();
    cr_assert_geq(p, 0);
    if (p == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int nul = open("/dev/null", O_WRONLY);
        if (fd >= 0)
            dup2(fd, 2);
        if (nul >= 0)
            dup2(nul, 1);
        execv(argv[0], argv);
        _exit(127);
    }
    return p;
}

static char *slurp(const char *path, char *buf, size_t cap)
{
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (f) {
        size_t n = fread(buf, 1, cap - 1, f);
        buf[n] = 0;
        fclose(f);
    }
    return buf;
}

static const char *write_file(world *w, const char *name, const char *text)
{
    static char path[2][192];
    static int k;
    char *p = path[k++ % 2];
    snprintf(p, sizeof path[0], "%s/%s", w->secret, name);
    FILE *f = fopen(p, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
    return p;
}

/* The server: -c conf (NULL: none) plus extra arguments; waits until a
 * TCP connect works (the log says "ready"), without connecting. */
static void start_server(world *w, const char *conf, char *const *extra)
{
    memset(&w->h, 0, sizeof w->h);
    snprintf(w->h.dir, sizeof w->h.dir, "/tmp/rkv-nats-XXXXXX");
    cr_assert_not_null(mkdtemp(w->h.dir));
    snprintf(w->secret, sizeof w->secret, "%s/secret", w->h.dir);
    cr_assert_eq(mkdir(w->secret, 0700), 0);
    snprintf(w->h.port, sizeof w->h.port, "%d", harness_free_port());
    snprintf(w->h.url, sizeof w->h.url, "nats://127.0.0.1:%s", w->h.port);
    snprintf(w->log, sizeof w->log, "%s/router.log", w->h.dir);
    char *argv[24] = {RKV_NATS_SERVER, "-js", "-a", "127.0.0.1", "-p", w->h.port,
                      "-sd", w->h.dir};
    int n = 8;
    if (conf) {
        argv[n++] = "-c";
        argv[n++] = (char *)conf;
    }
    for (int i = 0; extra && extra[i]; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    char slog[160];
    snprintf(slog, sizeof slog, "%s/server.log", w->h.dir);
    w->h.server = spawn_logged(argv, slog);
    uint64_t deadline = harness_ms_now() + 10000;
    char text[8192];
    while (!strstr(slurp(slog, text, sizeof text), "Server is ready")) {
        cr_assert_lt(harness_ms_now(), deadline, "nats-server did not start:\n%s", text);
        cr_assert_eq(waitpid(w->h.server, NULL, WNOHANG), 0, "nats-server exited:\n%s",
                     text);
        harness_nap_ms(20);
    }
}

/* A connection through rkv_nats_auth (what the programs and an embedding
 * server do): user/password file, TLS files; NATS status. */
/* The harness's own connection (w->h.nc) with one or two auth options
 * (opt2 0: one); it must succeed. */
static void connect_harness(world *w, int opt1, const char *arg1, int opt2,
                            const char *arg2)
{
    rkv_nats_auth a;
    rkv_nats_auth_init(&a);
    cr_assert_eq(rkv_nats_auth_set_url(&a, w->h.url), RKV_OK);
    cr_assert_eq(rkv_nats_auth_option(&a, opt1, arg1), RKV_OK);
    if (opt2)
        cr_assert_eq(rkv_nats_auth_option(&a, opt2, arg2), RKV_OK);
    natsOptions *o = NULL;
    cr_assert_eq(natsOptions_Create(&o), NATS_OK);
    cr_assert_eq(rkv_nats_auth_apply(&a, NULL, o), RKV_OK, "%s", rkv_last_error());
    rkv_nats_auth_free(&a);
    cr_assert_eq(natsConnection_Connect(&w->h.nc, o), NATS_OK);
    natsOptions_Destroy(o);
}

static natsStatus connect_as(world *w, const char *user, const char *password,
                             const char *ca, const char *cert, const char *key,
                             natsConnection **out)
{
    rkv_nats_auth a;
    rkv_nats_auth_init(&a);
    cr_assert_eq(rkv_nats_auth_set_url(&a, w->h.url), RKV_OK);
    if (user) {
        char inbox[64];
        snprintf(inbox, sizeof inbox, "_INBOX_%s", user);
        cr_assert_eq(rkv_nats_auth_option(&a, RKV_NATS_OPT_USER, user), RKV_OK);
        cr_assert_eq(rkv_nats_auth_option(&a, RKV_NATS_OPT_PASSWORD_FILE,
                                          write_file(w, "pw", password)), RKV_OK);
        cr_assert_eq(rkv_nats_auth_option(&a, RKV_NATS_OPT_INBOX_PREFIX, inbox),
                     RKV_OK);
    }
    if (ca)
        cr_assert_eq(rkv_nats_auth_option(&a, RKV_NATS_OPT_TLS_CA, ca), RKV_OK);
    if (cert) {
        cr_assert_eq(rkv_nats_auth_option(&a, RKV_NATS_OPT_TLS_CERT, cert), RKV_OK);
        cr_assert_eq(rkv_nats_auth_option(&a, RKV_NATS_OPT_TLS_KEY, key), RKV_OK);
    }
    natsOptions *o = NULL;
    cr_assert_eq(natsOptions_Create(&o), NATS_OK);
    cr_assert_eq(rkv_nats_auth_apply(&a, NULL, o), RKV_OK, "%s", rkv_last_error());
    rkv_nats_auth_free(&a);
    natsOptions_SetErrorHandler(o, on_error, NULL);
    natsOptions_SetMaxReconnect(o, 0);
    *out = NULL;
    natsStatus s = natsConnection_Connect(out, o);
    natsOptions_Destroy(o);
    return s;
}

static int stats(world *w, char *buf, size_t cap)
{
    return harness_stats(&w->h, MODEL, buf, cap, 500);
}

static uint64_t stat_of(world *w, const char *name)
{
    char text[16384];
    cr_assert(stats(w, text, sizeof text), "the router does not answer");
    return (uint64_t)harness_stat_value(text, name);
}

static void start_router(world *w, char **argv)
{
    w->router = spawn_logged(argv, w->log);
    uint64_t deadline = harness_ms_now() + 8000;
    char text[8192];
    while (!stats(w, text, sizeof text)) {
        char log[4096];
        cr_assert_lt(harness_ms_now(), deadline, "radixkv-router did not answer:\n%s",
                     slurp(w->log, log, sizeof log));
    }
}

static void add_instance(world *w)
{
    evd_open(&w->in, 96, 4, 1024);
    rkv_fleet_pub_config pc = harness_pub_config(MODEL, 1, 7, 32);
    cr_assert_eq(rkv_fleet_pub_create(&pc, w->inc, w->in.tree, &w->pub), RKV_OK, "%s",
                 rkv_last_error());
    rkv_rng rng;
    rkv_rng_init(&rng, 99);
    for (int q = 0; q < NQ; q++)
        w->q_n[q] = evd_tokens(&rng, w->q_tok[q], &w->q_ns[q]);
}

/* A server without authentication (nats_harness's), the router's log in
 * its directory. */
static void start_plain(world *w)
{
    harness_start(&w->h);
    snprintf(w->log, sizeof w->log, "%s/router.log", w->h.dir);
}

/* The instance on its own plain connection, publishing. */
static void connect_instance(world *w)
{
    cr_assert_eq(natsConnection_ConnectTo(&w->inc, w->h.url), NATS_OK);
    add_instance(w);
}

static void poll_pub(world *w)
{
    rkv_status s = rkv_fleet_pub_poll(w->pub, harness_ms_now(), 0, 0);
    cr_assert(s == RKV_OK || s == RKV_ERR_IO, "%s", rkv_last_error());
}

static void churn(world *w, int steps, uint64_t seed)
{
    rkv_rng rng;
    rkv_rng_init(&rng, seed);
    for (int s = 0; s < steps; s++) {
        evd_step(&w->in, &rng, 0);
        if (s % 10 == 0)
            poll_pub(w);
    }
    poll_pub(w);
}

/* Does every route reply list exactly instance 1 with its tree's pages? */
static int agree(world *w, char *why, size_t cap)
{
    for (int q = 0; q < NQ; q++) {
        rkv_wire_reply rep;
        if (!harness_route_tokens(&w->h, MODEL, w->q_ns[q], w->q_tok[q], w->q_n[q], w->in.P,
                                  500, &rep)) {
            snprintf(why, cap, "no answer");
            return 0;
        }
        rkv_match m;
        cr_assert_eq(rkv_tree_match(w->in.tree, w->q_ns[q], w->q_tok[q], w->q_n[q], NULL,
                                    RKV_MATCH_PEEK, &m), RKV_OK);
        if (rep.status != RKV_OK || rep.count != 1 || rep.ids[0] != 1 ||
            rep.id_pages[0] != m.num_blocks) {
            snprintf(why, cap, "query %d: status %u, %u listed, first %llu with %u "
                     "pages, tree %u", q, rep.status, rep.count,
                     (unsigned long long)rep.ids[0], rep.id_pages[0], m.num_blocks);
            return 0;
        }
    }
    return 1;
}

static void wait_agree(world *w, const char *when)
{
    uint64_t deadline = harness_ms_now() + 8000;
    char why[256] = "";
    for (;;) {
        poll_pub(w);
        if (agree(w, why, sizeof why))
            return;
        cr_assert_lt(harness_ms_now(), deadline, "%s: router disagrees: %s", when, why);
        harness_nap_ms(20);
    }
}

/* Polls instance 1 until the stat reaches at least `want`. */
static uint64_t wait_stat(world *w, const char *name, uint64_t want, const char *what)
{
    uint64_t deadline = harness_ms_now() + 8000, v;
    while ((v = stat_of(w, name)) < want) {
        if (w->pub)
            poll_pub(w);
        cr_assert_lt(harness_ms_now(), deadline, "%s: %s stays %llu < %llu", what, name,
                     (unsigned long long)v, (unsigned long long)want);
        harness_nap_ms(20);
    }
    return v;
}

/* Every test's start: skipped without a nats-server, else an empty world. */
static void world_begin(world *w)
{
    HARNESS_REQUIRE_SERVER();
    memset(w, 0, sizeof *w);
}

static void teardown(world *w)
{
    harness_end(&w->router, SIGKILL);
    rkv_fleet_pub_destroy(w->pub);
    w->pub = NULL;
    if (w->in.tree)
        evd_close(&w->in);
    natsConnection_Destroy(w->inc);
    w->inc = NULL;
    harness_stop(&w->h);
}

static void set_passwords(void)
{
    char pw[64];
    const char *who[] = {"ROUTER", "CLIENT", "INST1", "INST2"};
    for (int i = 0; i < 4; i++) {
        char name[64];
        snprintf(name, sizeof name, "RKV_NATS_%s_PASSWORD", who[i]);
        snprintf(pw, sizeof pw, "pw-%s-%d-s3cret", who[i], (int)getpid());
        setenv(name, pw, 1);
    }
}

/* An event batch for instance `id` of one STORED event at seq, on subject
 * radixkv.demo.kv.<subj_id>, published on nc (JetStream); NATS status. */
static natsStatus publish_batch(natsConnection *nc, uint64_t subj_id, uint64_t id,
                                uint64_t epoch, uint64_t seq)
{
    rkv_event e;
    memset(&e, 0, sizeof e);
    e.seq = seq;
    e.kind = RKV_EVENT_BLOCK_STORED;
    e.page_size = 4;
    e.parent_hash = RKV_HASH_ROOT;
    e.num_hashes = 2;
    e.hashes[0] = 0x1111;
    e.hashes[1] = 0x2222;
    uint8_t buf[256];
    size_t len = 0;
    cr_assert_eq(rkv_wire_encode_events(id, epoch, &e, 1, buf, sizeof buf, &len), RKV_OK);
    char subj[64];
    snprintf(subj, sizeof subj, "radixkv." MODEL ".kv.%llu", (unsigned long long)subj_id);
    jsCtx *js = NULL;
    cr_assert_eq(natsConnection_JetStream(&js, nc, NULL), NATS_OK);
    jsPubOptions o;
    jsPubOptions_Init(&o);
    o.MaxWait = 1000;
    natsStatus s = js_Publish(NULL, js, subj, buf, (int)len, &o, NULL);
    jsCtx_Destroy(js);
    return s;
}

static natsStatus publish_hb(natsConnection *nc, uint64_t subj_id, uint64_t id,
                             uint64_t epoch)
{
    rkv_wire_heartbeat hb = {id, epoch, 0, 0, 0};
    uint8_t buf[RKV_WIRE_HEARTBEAT_SIZE];
    size_t len = 0;
    cr_assert_eq(rkv_wire_encode_heartbeat(&hb, buf, sizeof buf, &len), RKV_OK);
    char subj[64];
    snprintf(subj, sizeof subj, "radixkv." MODEL ".hb.%llu", (unsigned long long)subj_id);
    natsStatus s = natsConnection_Publish(nc, subj, buf, (int)len);
    if (s == NATS_OK)
        s = natsConnection_FlushTimeout(nc, 1000);
    return s;
}

static void wait_not_permitted(int want, const char *what)
{
    uint64_t deadline = harness_ms_now() + 5000;
    while (atomic_load(&g_not_permitted) < want) {
        cr_assert_lt(harness_ms_now(), deadline, "the server did not refuse %s", what);
        harness_nap_ms(10);
    }
}

Test(fleet_trust, permissions_refuse_and_forged_ids_are_rejected)
{
    world w;
    world_begin(&w);
    set_passwords();
    start_server(&w, RKV_SOURCE_DIR "/fleet/conf/nats-server-auth.conf", NULL);
    cr_assert_eq(connect_as(&w, "client", getenv("RKV_NATS_CLIENT_PASSWORD"), NULL,
                            NULL, NULL, &w.h.nc), NATS_OK);
    /* the router's password in its URL (the way to leak it): never logged */
    char url[256];
    snprintf(url, sizeof url, "nats://router:%s@127.0.0.1:%s",
             getenv("RKV_NATS_ROUTER_PASSWORD"), w.h.port);
    /* a long heartbeat timeout: a forged instance the router took would
     * stay listed, not expire out of sight */
    char *argv[] = {RKV_ROUTER_BIN, "--server", url, "--model", MODEL,
                    "--snapshot-timeout-ms", "300", "--heartbeat-timeout-ms", "60000",
                    "--inbox-prefix", "_INBOX_router", NULL};
    start_router(&w, argv);
    cr_assert_eq(connect_as(&w, "inst1", getenv("RKV_NATS_INST1_PASSWORD"), NULL, NULL,
                            NULL, &w.inc), NATS_OK);
    add_instance(&w);
    churn(&w, 120, 5);
    wait_agree(&w, "at start");

    /* no credentials, a wrong password: no connection at all */
    natsConnection *nc = NULL;
    cr_assert_neq(connect_as(&w, NULL, NULL, NULL, NULL, NULL, &nc), NATS_OK);
    cr_assert_neq(connect_as(&w, "inst2", "wrong", NULL, NULL, NULL, &nc), NATS_OK);

    /* instance 1 on instance 2's subjects, a client on instance 1's: the
     * server refuses (a permissions violation comes back) */
    int n0 = atomic_load(&g_not_permitted);
    publish_hb(w.inc, 2, 2, 9);
    wait_not_permitted(n0 + 1, "instance 1 publishing on hb.2");
    cr_assert_neq(publish_batch(w.inc, 2, 2, 9, 1), NATS_OK,
                  "JetStream acknowledged instance 1's batch on kv.2");
    n0 = atomic_load(&g_not_permitted);
    publish_hb(w.h.nc, 1, 1, 12345);
    wait_not_permitted(n0 + 1, "a client publishing on hb.1");
    /* nor may instance 1 listen to replies meant for others */
    const char *others[] = {"_INBOX.>", "_INBOX_router.>", "_INBOX_client.>",
                            "radixkv." MODEL ".snap.2"};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        natsSubscription *sub = NULL;
        n0 = atomic_load(&g_not_permitted);
        cr_assert_eq(natsConnection_SubscribeSync(&sub, w.inc, others[i]), NATS_OK);
        natsConnection_FlushTimeout(w.inc, 1000);
        wait_not_permitted(n0 + 1, others[i]);
        natsSubscription_Destroy(sub);
    }

    /* instance 1's own subjects with payloads naming instance 2 (a batch,
     * a heartbeat): rejected by the router, counted; instance 2 never
     * shows in a route */
    cr_assert_eq(publish_batch(w.inc, 1, 2, 9, 1), NATS_OK);
    cr_assert_eq(publish_hb(w.inc, 1, 2, 9), NATS_OK);
    wait_stat(&w, "radixkv_router_forged_messages_total", 2, "forged ids");
    churn(&w, 40, 6);
    wait_agree(&w, "after forged ids");
    char log[16384];
    cr_assert_not_null(strstr(slurp(w.log, log, sizeof log), "names instance 2"), "%s",
                       log);

    /* the snapshot round trip under the permissions: a gap in instance 1's
     * own stream makes the router ask it (snap.1, answered to the router's
     * inbox) */
    uint64_t snaps = stat_of(&w, "radixkv_router_snapshots_applied_total");
    rkv_fleet_pub_stats ps;
    cr_assert_eq(rkv_fleet_pub_get_stats(w.pub, &ps), RKV_OK);
    cr_assert_eq(publish_batch(w.inc, 1, 1, 7, ps.last_published_seq + 1000), NATS_OK);
    wait_stat(&w, "radixkv_router_snapshots_applied_total", snaps + 1, "a resync");
    churn(&w, 40, 7);
    wait_agree(&w, "after a resync");

    /* the password never reached the log; the redacted URL did */
    slurp(w.log, log, sizeof log);
    cr_assert_null(strstr(log, getenv("RKV_NATS_ROUTER_PASSWORD")), "%s", log);
    cr_assert_not_null(strstr(log, "router:***@127.0.0.1"), "%s", log);
    teardown(&w);
    nats_CloseAndWait(2000);
}

/* Runs openssl with the arguments (a shell command line) in dir. */
static void openssl(const char *dir, const char *args)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s 2>/dev/null", dir, RKV_OPENSSL, args);
    cr_assert_eq(system(cmd), 0, "failed: %s", cmd);
}

Test(fleet_trust, tls_with_a_verified_client_certificate)
{
    world w;
    world_begin(&w);
    if (access(RKV_OPENSSL, X_OK) != 0) {
        fprintf(stderr, "openssl not found: the fleet TLS test is skipped\n");
        cr_skip_test("openssl not found: the fleet TLS test is skipped");
    }
    /* the certificates go to a directory of their own, made first */
    char d[64];
    snprintf(d, sizeof d, "/tmp/rkv-tls-XXXXXX");
    cr_assert_not_null(mkdtemp(d));
    const char *ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    char a[512];
    snprintf(a, sizeof a, "req -x509 %s -keyout ca.key -out ca.pem -days 2 "
             "-subj /CN=rkv-test-ca", ec);
    openssl(d, a);
    snprintf(a, sizeof a, "req %s -keyout server.key -out server.csr -subj /CN=127.0.0.1",
             ec);
    openssl(d, a);
    FILE *f;
    char p[160];
    snprintf(p, sizeof p, "%s/san.ext", d);
    cr_assert_not_null(f = fopen(p, "w"));
    fputs("subjectAltName=IP:127.0.0.1,DNS:localhost\n", f);
    fclose(f);
    openssl(d, "x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
               "-out server.pem -days 2 -extfile san.ext");
    snprintf(a, sizeof a, "req %s -keyout client.key -out client.csr -subj /CN=rkv-client",
             ec);
    openssl(d, a);
    openssl(d, "x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
               "-out client.pem -days 2");
    char ca[160], sc[160], sk[160], cc[160], ck[160];
    snprintf(ca, sizeof ca, "%s/ca.pem", d);
    snprintf(sc, sizeof sc, "%s/server.pem", d);
    snprintf(sk, sizeof sk, "%s/server.key", d);
    snprintf(cc, sizeof cc, "%s/client.pem", d);
    snprintf(ck, sizeof ck, "%s/client.key", d);
    char *extra[] = {"--tls", "--tlscert", sc, "--tlskey", sk, "--tlsverify",
                     "--tlscacert", ca, NULL};
    start_server(&w, NULL, extra);

    /* no TLS, TLS without a client certificate: refused */
    natsConnection *nc = NULL;
    cr_assert_neq(connect_as(&w, NULL, NULL, NULL, NULL, NULL, &nc), NATS_OK);
    cr_assert_neq(connect_as(&w, NULL, NULL, ca, NULL, NULL, &nc), NATS_OK);
    /* the test, the router and instance 1 with their certificates */
    cr_assert_eq(connect_as(&w, NULL, NULL, ca, cc, ck, &w.h.nc), NATS_OK);
    char *argv[] = {RKV_ROUTER_BIN, "--server", w.h.url, "--model", MODEL,
                    "--tls-ca", ca, "--tls-cert", cc, "--tls-key", ck, NULL};
    start_router(&w, argv);
    cr_assert_eq(connect_as(&w, NULL, NULL, ca, cc, ck, &w.inc), NATS_OK);
    add_instance(&w);
    churn(&w, 120, 5);
    wait_agree(&w, "over TLS");
    teardown(&w);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
    cr_assert_eq(system(cmd), 0);
    /* no nats_CloseAndWait here: with TLS loaded, nats.c's cleanup and
     * OpenSSL's own at exit collide in the test process */
}

Test(fleet_trust, snapshot_requests_are_rate_limited_per_instance)
{
    world w;
    world_begin(&w);
    start_plain(&w);
    char *argv[] = {RKV_ROUTER_BIN, "--server", w.h.url, "--model", MODEL,
                    "--snapshot-timeout-ms", "200", "--snapshot-burst", "2",
                    "--snapshot-interval-ms", "600000", NULL};
    start_router(&w, argv);
    connect_instance(&w);
    churn(&w, 60, 5);
    wait_agree(&w, "at start");
    /* an instance whose stream keeps breaking (or a peer breaking it: a
     * seq far ahead is a gap): each break would be a full snapshot */
    uint64_t req0 = stat_of(&w, "radixkv_router_snapshot_requests_total");
    cr_assert_leq(req0, 2);
    int breaks = 0;
    while (stat_of(&w, "radixkv_router_snapshot_requests_limited_total") == 0) {
        cr_assert_lt(breaks, 10, "10 breaks, no request was limited");
        uint64_t req = stat_of(&w, "radixkv_router_snapshot_requests_total");
        uint64_t applied = stat_of(&w, "radixkv_router_snapshots_applied_total");
        cr_assert_eq(publish_batch(w.inc, 1, 1, 7, 1000000 + (uint64_t)breaks * 1000),
                     NATS_OK);
        breaks++;
        /* the break is seen: a request is made (and answered) or refused */
        uint64_t deadline = harness_ms_now() + 8000;
        while (!(stat_of(&w, "radixkv_router_snapshots_applied_total") > applied &&
                 stat_of(&w, "radixkv_router_snapshot_requests_total") > req) &&
               stat_of(&w, "radixkv_router_snapshot_requests_limited_total") == 0) {
            poll_pub(&w);
            cr_assert_lt(harness_ms_now(), deadline, "break %d not seen", breaks);
            harness_nap_ms(20);
        }
    }
    cr_assert_eq((uint64_t)breaks, 3 - req0, "the burst of 2 served %llu breaks",
                 (unsigned long long)(2 - req0));
    /* more breaks and retry timeouts: no more requests */
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(publish_batch(w.inc, 1, 1, 7, 2000000 + (uint64_t)i), NATS_OK);
        poll_pub(&w);
    }
    harness_nap_ms(600); /* three retry timeouts */
    poll_pub(&w);
    cr_assert_eq(stat_of(&w, "radixkv_router_snapshot_requests_total"), 2);
    teardown(&w);
    nats_CloseAndWait(2000);
}

Test(fleet_trust, index_budget_bounds_entries_and_logs_drops)
{
    world w;
    world_begin(&w);
    start_plain(&w);
    char *argv[] = {RKV_ROUTER_BIN, "--server", w.h.url, "--model", MODEL,
                    "--index-max-entries", "16", NULL};
    start_router(&w, argv);
    cr_assert_eq(stat_of(&w, "radixkv_router_index_entries_limit"), 16);
    connect_instance(&w); /* a 96-block pool: more than 16 cached soon */
    churn(&w, 200, 5);
    wait_stat(&w, "radixkv_router_events_over_budget_total", 1, "over the budget");
    for (int i = 0; i < 20; i++) {
        churn(&w, 20, 100 + (uint64_t)i);
        cr_assert_leq(stat_of(&w, "radixkv_router_index_entries"), 16);
    }
    char log[16384];
    cr_assert_not_null(strstr(slurp(w.log, log, sizeof log),
                              "the index is at its budget of 16 entries"), "%s", log);
    teardown(&w);
    nats_CloseAndWait(2000);
}

/* The router and the test's connection by token: the router's from the
 * environment (RKV_NATS_TOKEN), the test's from a --token-file. */
Test(fleet_trust, token_authentication)
{
    world w;
    world_begin(&w);
    char tok[64], arg[80];
    snprintf(tok, sizeof tok, "tok-%d-s3cret", (int)getpid());
    snprintf(arg, sizeof arg, "--auth=%s", tok);
    char *extra[] = {arg, NULL};
    start_server(&w, NULL, extra);
    natsConnection *nc = NULL;
    cr_assert_neq(connect_as(&w, NULL, NULL, NULL, NULL, NULL, &nc), NATS_OK);
    rkv_nats_auth a;
    rkv_nats_auth_init(&a);
    cr_assert_eq(rkv_nats_auth_set_url(&a, w.h.url), RKV_OK);
    cr_assert_eq(rkv_nats_auth_option(&a, RKV_NATS_OPT_TOKEN_FILE,
                                      write_file(&w, "token", tok)), RKV_OK);
    natsOptions *o = NULL;
    cr_assert_eq(natsOptions_Create(&o), NATS_OK);
    cr_assert_eq(rkv_nats_auth_apply(&a, NULL, o), RKV_OK);
    rkv_nats_auth_free(&a);
    cr_assert_eq(natsConnection_Connect(&w.h.nc, o), NATS_OK);
    natsOptions_Destroy(o);
    setenv("RKV_NATS_TOKEN", tok, 1);
    char *argv[] = {RKV_ROUTER_BIN, "--server", w.h.url, "--model", MODEL, NULL};
    start_router(&w, argv);
    unsetenv("RKV_NATS_TOKEN");
    char log[4096];
    cr_assert_null(strstr(slurp(w.log, log, sizeof log), tok), "%s", log);
    teardown(&w);
    nats_CloseAndWait(2000);
}

#ifdef RKV_HAVE_SODIUM
#include <sodium.h>

/* NKey text encoding (nats-io/nkeys): base32 (RFC 4648, no padding) of
 * prefix bytes + key + CRC-16/XMODEM little-endian. */
static uint16_t crc16(const uint8_t *p, size_t n)
{
    uint16_t c = 0;
    for (size_t i = 0; i < n; i++) {
        c ^= (uint16_t)(p[i] << 8);
        for (int b = 0; b < 8; b++)
            c = (uint16_t)(c & 0x8000 ? (c << 1) ^ 0x1021 : c << 1);
    }
    return c;
}

static void nkey_text(const uint8_t *raw, size_t n, char *out)
{
    uint8_t b[64];
    memcpy(b, raw, n);
    uint16_t c = crc16(b, n);
    b[n] = (uint8_t)c;
    b[n + 1] = (uint8_t)(c >> 8);
    n += 2;
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    uint32_t acc = 0;
    int bits = 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        acc = (acc << 8) | b[i];
        bits += 8;
        while (bits >= 5) {
            out[k++] = A[(acc >> (bits - 5)) & 31];
            bits -= 5;
        }
    }
    if (bits)
        out[k++] = A[(acc << (5 - bits)) & 31];
    out[k] = 0;
}

/* A fresh user NKey: its public key ("U...") and seed ("SU..."). */
static void make_nkey(char *pub, char *seed)
{
    cr_assert_geq(sodium_init(), 0);
    uint8_t s[32], pk[32], sk[64], raw[40];
    randombytes_buf(s, sizeof s);
    cr_assert_eq(crypto_sign_seed_keypair(pk, sk, s), 0);
    const uint8_t user = 20 << 3, seedp = 18 << 3;
    raw[0] = user;
    memcpy(raw + 1, pk, 32);
    nkey_text(raw, 33, pub);
    raw[0] = (uint8_t)(seedp | (user >> 5));
    raw[1] = (uint8_t)((user & 31) << 3);
    memcpy(raw + 2, s, 32);
    nkey_text(raw, 34, seed);
}

/* The router with --nkey and --nkey-seed against a server that knows only
 * that NKey user (and the test's). */
Test(fleet_trust, nkey_authentication)
{
    world w;
    world_begin(&w);
    char pub[2][64], seed[2][80];
    make_nkey(pub[0], seed[0]);
    make_nkey(pub[1], seed[1]);
    char conf[512], cpath[160];
    snprintf(conf, sizeof conf,
             "authorization { users = [ {nkey: %s}, {nkey: %s} ] }\n", pub[0], pub[1]);
    char d[64];
    snprintf(d, sizeof d, "/tmp/rkv-nkey-XXXXXX");
    cr_assert_not_null(mkdtemp(d));
    snprintf(cpath, sizeof cpath, "%s/nkey.conf", d);
    FILE *f = fopen(cpath, "w");
    cr_assert_not_null(f);
    fputs(conf, f);
    fclose(f);
    start_server(&w, cpath, NULL);
    natsConnection *nc = NULL;
    cr_assert_neq(connect_as(&w, NULL, NULL, NULL, NULL, NULL, &nc), NATS_OK);
    char seedfile[2][160];
    for (int i = 0; i < 2; i++) {
        const char *p = write_file(&w, i ? "seed1" : "seed0", seed[i]);
        snprintf(seedfile[i], sizeof seedfile[i], "%s", p);
    }
    connect_harness(&w, RKV_NATS_OPT_NKEY, pub[1], RKV_NATS_OPT_NKEY_SEED, seedfile[1]);
    char *argv[] = {RKV_ROUTER_BIN, "--server", w.h.url, "--model", MODEL,
                    "--nkey", pub[0], "--nkey-seed", seedfile[0], NULL};
    start_router(&w, argv);
    /* a known public key with the wrong seed is refused */
    rkv_nats_auth a;
    rkv_nats_auth_init(&a);
    cr_assert_eq(rkv_nats_auth_set_url(&a, w.h.url), RKV_OK);
    cr_assert_eq(rkv_nats_auth_option(&a, RKV_NATS_OPT_NKEY, pub[0]), RKV_OK);
    cr_assert_eq(rkv_nats_auth_option(&a, RKV_NATS_OPT_NKEY_SEED, seedfile[1]), RKV_OK);
    natsOptions *o = NULL;
    cr_assert_eq(natsOptions_Create(&o), NATS_OK);
    cr_assert_eq(rkv_nats_auth_apply(&a, NULL, o), RKV_OK);
    rkv_nats_auth_free(&a);
    natsOptions_SetMaxReconnect(o, 0);
    cr_assert_neq(natsConnection_Connect(&nc, o), NATS_OK);
    natsOptions_Destroy(o);
    teardown(&w);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
    cr_assert_eq(system(cmd), 0);
    nats_CloseAndWait(2000);
}

/* A key pair of the given NKey prefix (operator 14, account 0, user 20,
 * shifted left by 3): public text, seed text, and the raw secret key. */
static void make_key(uint8_t prefix, char *pub, char *seed, uint8_t sk[64])
{
    cr_assert_geq(sodium_init(), 0);
    uint8_t s[32], pk[32], raw[40];
    randombytes_buf(s, sizeof s);
    cr_assert_eq(crypto_sign_seed_keypair(pk, sk, s), 0);
    raw[0] = prefix;
    memcpy(raw + 1, pk, 32);
    nkey_text(raw, 33, pub);
    raw[0] = (uint8_t)((18 << 3) | (prefix >> 5));
    raw[1] = (uint8_t)((prefix & 31) << 3);
    memcpy(raw + 2, s, 32);
    nkey_text(raw, 34, seed);
}

/* A NATS JWT (v2: header alg ed25519-nkey, base64url parts, the issuer's
 * Ed25519 signature over "header.claims") of the claims' "nats" object,
 * issued by iss (its public text and secret key) for sub. */
static void make_jwt(const char *iss, const uint8_t iss_sk[64], const char *sub,
                     const char *nats, char *out, size_t cap)
{
    static const char hdr[] = "{\"typ\":\"JWT\",\"alg\":\"ed25519-nkey\"}";
    char claims[1024], jti[64];
    uint8_t r[20];
    randombytes_buf(r, sizeof r);
    nkey_text(r, 18, jti); /* any unique id */
    snprintf(claims, sizeof claims,
             "{\"jti\":\"%s\",\"iat\":%ld,\"iss\":\"%s\",\"name\":\"rkv-test\","
             "\"sub\":\"%s\",\"nats\":%s}", jti, (long)time(NULL), iss, sub, nats);
    char h64[128], c64[2048];
    sodium_bin2base64(h64, sizeof h64, (const uint8_t *)hdr, strlen(hdr),
                      sodium_base64_VARIANT_URLSAFE_NO_PADDING);
    sodium_bin2base64(c64, sizeof c64, (const uint8_t *)claims, strlen(claims),
                      sodium_base64_VARIANT_URLSAFE_NO_PADDING);
    char signing[2304];
    snprintf(signing, sizeof signing, "%s.%s", h64, c64);
    uint8_t sig[64];
    crypto_sign_detached(sig, NULL, (const uint8_t *)signing, strlen(signing), iss_sk);
    char s64[128];
    sodium_bin2base64(s64, sizeof s64, sig, sizeof sig,
                      sodium_base64_VARIANT_URLSAFE_NO_PADDING);
    snprintf(out, cap, "%s.%s", signing, s64);
}

/* Operator mode: an operator, an account with JetStream, a user; the
 * router connects with the user's .creds file (--creds). */
Test(fleet_trust, creds_file_authentication)
{
    world w;
    world_begin(&w);
    char opub[64], oseed[80], apub[64], aseed[80], upub[64], useed[80], spub[64],
        sseed[80];
    uint8_t osk[64], ask[64], usk[64], ssk[64];
    make_key(14 << 3, opub, oseed, osk);
    make_key(0, apub, aseed, ask);
    make_key(0, spub, sseed, ssk); /* the system account JetStream needs */
    make_key(20 << 3, upub, useed, usk);
    static char ojwt[2048], ajwt[4096], ujwt[4096], sjwt[2048];
    make_jwt(opub, osk, spub, "{\"type\":\"account\",\"version\":2}", sjwt,
             sizeof sjwt);
    make_jwt(opub, osk, opub, "{\"type\":\"operator\",\"version\":2}", ojwt,
             sizeof ojwt);
    make_jwt(opub, osk, apub,
             "{\"limits\":{\"subs\":-1,\"data\":-1,\"payload\":-1,\"imports\":-1,"
             "\"exports\":-1,\"wildcards\":true,\"conn\":-1,\"leaf\":-1,"
             "\"mem_storage\":-1,\"disk_storage\":-1,\"streams\":-1,\"consumer\":-1},"
             "\"type\":\"account\",\"version\":2}", ajwt, sizeof ajwt);
    make_jwt(apub, ask, upub,
             "{\"pub\":{},\"sub\":{},\"subs\":-1,\"data\":-1,\"payload\":-1,"
             "\"type\":\"user\",\"version\":2}", ujwt, sizeof ujwt);
    char d[64];
    snprintf(d, sizeof d, "/tmp/rkv-creds-XXXXXX");
    cr_assert_not_null(mkdtemp(d));
    char cpath[160], credpath[160];
    snprintf(cpath, sizeof cpath, "%s/op.conf", d);
    FILE *f = fopen(cpath, "w");
    cr_assert_not_null(f);
    fprintf(f, "operator: %s\nsystem_account: %s\nresolver: MEMORY\n"
               "resolver_preload: {\n  %s: %s\n  %s: %s\n}\n",
            ojwt, spub, apub, ajwt, spub, sjwt);
    fclose(f);
    snprintf(credpath, sizeof credpath, "%s/user.creds", d);
    cr_assert_not_null(f = fopen(credpath, "w"));
    fprintf(f, "-----BEGIN NATS USER JWT-----\n%s\n------END NATS USER JWT------\n\n"
               "-----BEGIN USER NKEY SEED-----\n%s\n------END USER NKEY SEED------\n",
            ujwt, useed);
    fclose(f);
    start_server(&w, cpath, NULL);
    natsConnection *nc = NULL;
    cr_assert_neq(connect_as(&w, NULL, NULL, NULL, NULL, NULL, &nc), NATS_OK);
    connect_harness(&w, RKV_NATS_OPT_CREDS, credpath, 0, NULL);
    char *argv[] = {RKV_ROUTER_BIN, "--server", w.h.url, "--model", MODEL,
                    "--creds", credpath, NULL};
    start_router(&w, argv);
    teardown(&w);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
    cr_assert_eq(system(cmd), 0);
    nats_CloseAndWait(2000);
}
#else
Test(fleet_trust, nkey_and_creds_authentication)
{
    fprintf(stderr, "libsodium not found: the fleet NKey and creds tests are skipped\n");
    cr_skip_test("libsodium not found: the fleet NKey and creds tests are skipped");
}
#endif
