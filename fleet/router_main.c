/*
 * fleet/router_main.c -- the radixkv-router program: the daemon of
 * fleet/router_daemon.c (also `radixkv router`).
 */
#include "fleet/router_daemon.h"

int main(int argc, char **argv)
{
    return rkv_router_daemon_main("radixkv-router", argc, argv);
}
