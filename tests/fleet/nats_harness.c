/*
 * tests/fleet/nats_harness.c -- the NATS tests' server and processes
 * and the router requests they make (tests/fleet/nats_harness.h).
 */
#include "tests/fleet/nats_harness.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

rkv_fleet_pub_config harness_pub_config(const char *model, uint64_t instance,
                                        uint64_t epoch, uint32_t batch_events)
{
    rkv_fleet_pub_config pc;
    rkv_fleet_pub_config_init(&pc);
    pc.model = model;
    pc.instance = instance;
    pc.epoch = epoch;
    if (batch_events != 0)
        pc.batch_events = batch_events;
    pc.heartbeat_ms = 100;
    return pc;
}

uint64_t harness_ms_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void harness_nap_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int harness_have_server(void)
{
    if (access(RKV_NATS_SERVER, X_OK) != 0) {
        fprintf(stderr, HARNESS_SKIP_MESSAGE "\n");
        return 0;
    }
    return 1;
}

int harness_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(fd, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t len = sizeof a;
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

pid_t harness_spawn(char *const argv[], int quiet)
{
    pid_t p = fork();
    cr_assert_geq(p, 0);
    if (p == 0) {
        /* a failed assertion ends the test process without teardown: no
         * child may outlive it (nor hold ctest's pipe) */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        FILE *f = freopen("/dev/null", "w", stdout);
        if (quiet)
            f = freopen("/dev/null", "w", stderr);
        (void)f;
        /* RKV_TEST_BIN_DIR: the programs of another build (.ci/run runs
         * this test's processes built with ThreadSanitizer) */
        const char *dir = getenv("RKV_TEST_BIN_DIR");
        const char *base = strrchr(argv[0], '/');
        char path[4096];
        if (dir && *dir && base && strstr(argv[0], "nats-server") == NULL &&
            snprintf(path, sizeof path, "%s%s", dir, base) < (int)sizeof path)
            execv(path, argv);
        else
            execv(argv[0], argv);
        _exit(127);
    }
    return p;
}

static void spawn_server(nats_harness *h)
{
    char *argv[] = {RKV_NATS_SERVER, "-js", "-a", "127.0.0.1", "-p", h->port,
                    "-sd", h->dir, NULL};
    h->server = harness_spawn(argv, 1);
}

void harness_start(nats_harness *h)
{
    memset(h, 0, sizeof *h);
    snprintf(h->dir, sizeof h->dir, "/tmp/rkv-nats-XXXXXX");
    cr_assert_not_null(mkdtemp(h->dir));
    snprintf(h->port, sizeof h->port, "%d", harness_free_port());
    snprintf(h->url, sizeof h->url, "nats://127.0.0.1:%s", h->port);
    spawn_server(h);
    uint64_t deadline = harness_ms_now() + 10000;
    natsOptions *o = NULL;
    cr_assert_eq(natsOptions_Create(&o), NATS_OK);
    natsOptions_SetURL(o, h->url);
    natsOptions_SetMaxReconnect(o, -1);
    natsOptions_SetReconnectWait(o, 50);
    while (natsConnection_Connect(&h->nc, o) != NATS_OK) {
        cr_assert_lt(harness_ms_now(), deadline, "nats-server did not start on %s", h->url);
        harness_nap_ms(20);
    }
    natsOptions_Destroy(o);
}

void harness_end(pid_t *p, int sig)
{
    int st = 0;
    pid_t was = *p;
    if (*p > 0) {
        kill(*p, sig);
        waitpid(*p, &st, 0);
    }
    *p = 0;
    /* 66: a ThreadSanitizer report (its exit code) in a child */
    cr_assert(was <= 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 66,
              "child %d exited 66: a ThreadSanitizer report", (int)was);
}

void harness_kill_server(nats_harness *h, int sig)
{
    harness_end(&h->server, sig);
}

void harness_restart_server(nats_harness *h)
{
    cr_assert_eq(h->server, 0, "the server still runs");
    spawn_server(h);
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void harness_stop(nats_harness *h)
{
    natsConnection_Destroy(h->nc);
    h->nc = NULL;
    harness_end(&h->server, SIGTERM);
    if (h->dir[0])
        nftw(h->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

double harness_stat_value(const char *text, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, name, n) == 0 && p[n] == ' ')
            return strtod(p + n + 1, NULL);
    cr_assert_fail("no %s in the stats:\n%s", name, text);
    return 0;
}

int harness_stats(nats_harness *h, const char *model, char *buf, size_t cap,
             int64_t wait_ms)
{
    char subject[128];
    snprintf(subject, sizeof subject, "radixkv.%s.stats", model);
    natsMsg *m = NULL;
    if (natsConnection_RequestString(&m, h->nc, subject, "", wait_ms) != NATS_OK)
        return 0;
    snprintf(buf, cap, "%.*s", natsMsg_GetDataLength(m), natsMsg_GetData(m));
    natsMsg_Destroy(m);
    return 1;
}

int harness_route(nats_harness *h, const char *model, const uint8_t *query, size_t len,
             int64_t wait_ms, rkv_wire_reply *rep)
{
    char subject[128];
    snprintf(subject, sizeof subject, "radixkv.%s.route", model);
    natsMsg *m = NULL;
    if (natsConnection_Request(&m, h->nc, subject, query, (int)len, wait_ms) != NATS_OK)
        return 0;
    rkv_status s = rkv_wire_decode_reply(natsMsg_GetData(m),
                                         (size_t)natsMsg_GetDataLength(m), rep);
    natsMsg_Destroy(m);
    cr_assert_eq(s, RKV_OK, "%s", rkv_last_error());
    return 1;
}

int harness_route_tokens(nats_harness *h, const char *model, uint64_t ns,
                         const int32_t *tokens, uint32_t n, uint32_t P, int64_t wait_ms,
                         rkv_wire_reply *rep)
{
    enum { MAX_PAGES = 96 };
    uint64_t hashes[MAX_PAGES], parent = RKV_HASH_ROOT;
    uint32_t np = n / P;
    cr_assert_leq(np, MAX_PAGES);
    for (uint32_t j = 0; j < np; j++)
        hashes[j] = parent = rkv_block_hash(parent, ns, tokens + j * P, P);
    uint8_t buf[RKV_WIRE_HEADER + 12 + 8 * MAX_PAGES];
    size_t len = 0;
    cr_assert_eq(rkv_wire_encode_query(ns, hashes, np, buf, sizeof buf, &len), RKV_OK);
    return harness_route(h, model, buf, len, wait_ms, rep);
}
