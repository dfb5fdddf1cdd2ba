/*
 * fleet/bridge_daemon.h -- `radixkv bridge` as a function (the CLI calls
 * it): subscribes to a vLLM- or SGLang-format worker's KV events over ZMQ
 * (fleet/kvev.h), keeps the worker's cache as radixkv pages
 * (fleet/bridge.h) and publishes them into the fleet like a radixkv
 * instance (fleet/publisher.h): events on radixkv.<model>.kv.<id>,
 * heartbeats, snapshot answers. Gaps in the worker's sequence numbers are
 * filled from its replay socket when it has one; what cannot be filled
 * withdraws everything (ALL_CLEARED) rather than keep a stale view.
 * Built only with libnats and libzmq (RKV_HAVE_BRIDGE in the command).
 */
#ifndef RKV_FLEET_BRIDGE_DAEMON_H
#define RKV_FLEET_BRIDGE_DAEMON_H

/* Runs with argv[1..argc) as options; prog names it in messages. Returns
 * 0 after SIGINT/SIGTERM or --help, 1 for a runtime failure, 2 for a
 * usage error. */
int rkv_bridge_daemon_main(const char *prog, int argc, char **argv);

#endif
