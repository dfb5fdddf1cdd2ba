/*
 * cli/args.h -- the `radixkv` command line: subcommands, options (parsed
 * with getopt_long), strict values, and the usage texts.
 *
 *   radixkv replay [options] [--] [TRACE]   (TRACE '-' is stdin)
 *   radixkv sweep  [options] [--] [TRACE]
 *   radixkv help [replay|sweep]      radixkv --help      radixkv --version
 *
 * Rules: every option of either subcommand is known to the parser, so one
 * given to the wrong subcommand is named as such ("--svg is a sweep
 * option"); an unknown one gets the closest known name as a suggestion;
 * numbers are plain decimal (digits, optional fraction and exponent: 16,
 * 1e6, 2.5e5) -- "0x10", " 16", "+16", "016" are refused; lists
 * (--capacities, --policies) refuse empty items. Parsing never prints or
 * exits: it fills rkv_cli_options or says why not.
 */
#ifndef RKV_CLI_ARGS_H
#define RKV_CLI_ARGS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sim/replay.h"

#define RKV_CLI_MAX_LIST 64

enum rkv_cli_cmd { RKV_CMD_REPLAY, RKV_CMD_SWEEP };
enum rkv_cli_order { RKV_ORDER_SCHED, RKV_ORDER_FILE, RKV_ORDER_BOTH };
enum rkv_cli_workload { RKV_WL_TRACE, RKV_WL_AGENTIC, RKV_WL_FEWSHOT };

/* What parsing asks the caller to do. */
enum rkv_cli_action {
    RKV_ACT_RUN,      /* run opts->cmd                                      */
    RKV_ACT_HELP,     /* print rkv_cli_usage(opts->help_topic), exit 0       */
    RKV_ACT_VERSION,  /* print "radixkv VERSION", exit 0                     */
    RKV_ACT_USAGE_ERROR /* print the message and a hint, exit 2              */
};

/* Help topics: the whole text, or one subcommand's. */
enum rkv_cli_topic { RKV_TOPIC_ALL, RKV_TOPIC_REPLAY, RKV_TOPIC_SWEEP };

typedef struct rkv_cli_options {
    enum rkv_cli_cmd cmd;
    enum rkv_cli_topic help_topic;
    const char *trace;              /* NULL: the embedded trace; "-": stdin */
    enum rkv_cli_workload workload;
    uint64_t seed;
    uint64_t sessions, requests;    /* 0: the generator's default           */
    uint64_t limit;                 /* 0: all                               */
    enum rkv_cli_order order;
    int json;
    int progress;                   /* --no-progress clears it              */
    int capacity_set;
    int kv_bytes_set;               /* --kv-bytes given                     */
    int time_scale_auto;            /* --time-scale auto (the default)      */
    rkv_replay_config rc;
    uint64_t capacities[RKV_CLI_MAX_LIST];
    size_t num_capacities;
    rkv_policy policies[RKV_CLI_MAX_LIST];
    size_t num_policies;
    const char *svg;
    const char *model;              /* --model preset name, or NULL         */
    /* fleet replay (--instances, --route): on when either is given */
    int fleet;
    const char *instances_arg, *routes_arg; /* as given, parsed in finish */
    uint32_t instances[RKV_CLI_MAX_LIST];
    size_t num_instances;
    enum rkv_route routes[RKV_CLI_MAX_LIST];
    size_t num_routes;
    /* the kv route's router (--queue-weight, --running-weight,
     * --medium-weights, --temperature; router_set when any is given) and
     * what it sees (--event-lag-ms, --load-period-ms) */
    rkv_router_config router;
    int router_set;
    double event_lag_ms, load_period_ms;
    /* trace format: --trace-format, --block-tokens (0: the
     * format's default) */
    int trace_format;
    uint32_t block_tokens;
    double tool_share;              /* agentic: --tool-share; < 0: default */
    /* sweep --host-capacities (tiers): rows of host-tier capacities */
    const char *host_caps_arg;
    uint64_t host_capacities[RKV_CLI_MAX_LIST];
    size_t num_host_capacities;
} rkv_cli_options;

/* Parses argv (argv[0] is the program). On RKV_ACT_USAGE_ERROR, err holds
 * one sentence ("--page-size: expected ..."). argv may be permuted. */
enum rkv_cli_action rkv_cli_parse(int argc, char **argv, rkv_cli_options *o,
                                  char *err, size_t errcap);

/* Writes the help text of a topic. */
void rkv_cli_usage(FILE *f, enum rkv_cli_topic topic);

/* The subcommand's name ("replay", "sweep"). */
const char *rkv_cli_cmd_name(enum rkv_cli_cmd cmd);

/* Writes "options":{...} (no surrounding braces): every option in effect,
 * defaults included, as JSON (strings escaped, cli/escape.h). */
void rkv_cli_options_json(FILE *f, const rkv_cli_options *o);

#endif
