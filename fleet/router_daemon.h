/*
 * fleet/router_daemon.h -- the fleet router daemon as a function, so that
 * the radixkv-router program (fleet/router_main.c) and the `radixkv router`
 * subcommand (cli/main.c) run one implementation with the same options.
 * Built only with libnats (RKV_HAVE_NATS in the command).
 */
#ifndef RKV_FLEET_ROUTER_DAEMON_H
#define RKV_FLEET_ROUTER_DAEMON_H

/* Runs the daemon with argv[1..argc) as its options (argv[0] is skipped,
 * as getopt does); prog names it in messages and usage ("radixkv-router",
 * "radixkv router"). Returns the exit status: 0 after SIGINT/SIGTERM or
 * --help, 1 for a runtime failure (no NATS server, the stream cannot be
 * created, the metrics port cannot be bound), 2 for a usage error. Installs
 * its SIGINT/SIGTERM/SIGPIPE handlers (fleet/daemon_util.h). */
int rkv_router_daemon_main(const char *prog, int argc, char **argv);

#endif
