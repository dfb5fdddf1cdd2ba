/*
 * fleet/daemon_util.c -- the stop flag, the clocks and the NATS connection
 * of the fleet's programs (fleet/daemon_util.h).
 */
#include "fleet/daemon_util.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

volatile sig_atomic_t rkv_fleet_stop;

static void on_stop(int sig)
{
    (void)sig;
    rkv_fleet_stop = 1;
}

void rkv_fleet_catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

uint64_t rkv_fleet_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t rkv_fleet_now_ms(void)
{
    return rkv_fleet_now_us() / 1000u;
}

void rkv_fleet_nats_error(natsConnection *nc, natsSubscription *sub,
                          natsStatus err, void *prog)
{
    (void)sub;
    const char *text = NULL;
    if (nc)
        natsConnection_GetLastError(nc, &text);
    fprintf(stderr, "%s: NATS: %s%s%s\n", (const char *)prog, natsStatus_GetText(err),
            text && *text ? ": " : "", text && *text ? text : "");
}

uint64_t rkv_fleet_epoch_now(void)
{
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    return (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec;
}

natsStatus rkv_fleet_nats_connect(const char *prog, const rkv_nats_auth *auth,
                                  const char *server_log, natsOptions **no,
                                  natsConnection **nc)
{
    natsStatus s = natsOptions_Create(no);
    if (s == NATS_OK && rkv_nats_auth_apply(auth, "nats://127.0.0.1:4222", *no) != RKV_OK) {
        fprintf(stderr, "%s: %s\n", prog, rkv_last_error());
        return NATS_ERR;
    }
    if (s == NATS_OK)
        s = natsOptions_SetErrorHandler(*no, rkv_fleet_nats_error, (void *)prog);
    if (s == NATS_OK) s = natsOptions_SetMaxReconnect(*no, -1);
    if (s == NATS_OK) s = natsConnection_Connect(nc, *no);
    if (s != NATS_OK)
        fprintf(stderr, "%s: connect %s: %s\n", prog, server_log, natsStatus_GetText(s));
    return s;
}

void rkv_fleet_pub_config_for(rkv_fleet_pub_config *cfg, const char *model, uint64_t id,
                              uint64_t heartbeat_ms)
{
    rkv_fleet_pub_config_init(cfg);
    cfg->model = model;
    cfg->instance = id;
    cfg->heartbeat_ms = heartbeat_ms;
    cfg->epoch = rkv_fleet_epoch_now();
}
