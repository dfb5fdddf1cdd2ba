/*
 * sim/workload.h -- request records for replay: loaded from a trace or
 * generated from a seed (agentic sessions, few-shot batches).
 *
 * A request's prompt is a list of segments; segment (key, len) stands for
 * the first len (1..512) tokens of the expansion of block id `key`
 * (rkv_trace_block_token in trace.h). A trace request's segments are its
 * hash_ids, all of the trace's block size (512 tokens for Mooncake, 16 for
 * Bailian, or --block-tokens) but the last, cut to input_length -- the
 * trace convention, so seg_keys of a trace request ARE its hash_ids.
 * Synthetic workloads draw keys from a counter, so equal content (a shared
 * system prompt, a previous turn) has equal keys and anything new has keys
 * never used before.
 *
 * Output tokens are deterministic too: output token k of a request is token
 * k % 512 of block id output_key + k / 512. The replay's fake engine emits
 * exactly these, so an agentic turn whose prompt contains the previous
 * turn's output (segments with those keys) hits the cached output.
 * A trace's output keys are one run of ids that no prompt of the trace
 * uses, for any ids (2^64-1 included), so an output never aliases a prompt.
 *
 * Invariants (rkv_workload_check): segment lengths are 1..512 and sum to
 * input_length; every request has input_length >= 1; ids are 0..n-1 in
 * order; arrival times are finite and >= 0; a parent precedes its child;
 * hint_priority is -1..100.
 */
#ifndef RKV_SIM_WORKLOAD_H
#define RKV_SIM_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "sim/trace.h"
#include "radixkv.h"

#define RKV_WL_NO_PARENT UINT64_MAX
#define RKV_WL_NO_SESSION UINT64_MAX

typedef struct rkv_wl_request {
    uint64_t id;           /* index in the workload                      */
    double arrival_ms;     /* nominal arrival (open loop)                 */
    uint32_t input_length; /* prompt tokens                              */
    uint32_t output_length;
    uint64_t seg_begin;    /* first segment in the workload's arrays     */
    uint32_t num_segs;
    uint64_t output_key;   /* block id of output tokens 0..511           */
    uint64_t line;         /* 1-based trace line; 0 when synthetic       */
    uint64_t parent;       /* closed loop: this request is sent think_ms
                              after `parent` finished (agentic turns);
                              RKV_WL_NO_PARENT otherwise                 */
    double think_ms;
    /* retention (README "Retention in the simulator"): the session the
     * request belongs to (agentic: its session index; a trace: its
     * "session" field, or a Bailian line's root chat id;
     * RKV_WL_NO_SESSION: none), the retention hints of its trace line
     * (hint_priority 0..100, -1: none; hint_ttl_ms > 0: pin its context
     * that long; 0: none), and whether the session's next turn follows a
     * tool call (agentic tool sessions). */
    uint64_t session;
    int32_t hint_priority;
    uint64_t hint_ttl_ms;
    uint64_t hint_prio_dur_ms; /* with hint_priority: it reverts that long
                                  after (scaled like a TTL); 0: it stays */
    uint8_t tool_call;
    uint8_t session_end;   /* the session's last request: a trace line's
                              "session_end": true, or an agentic
                              session's last turn                       */
} rkv_wl_request;

typedef struct rkv_workload {
    char *name;            /* trace name (in full), "agentic" or
                              "fewshot"; owned, freed with the workload  */
    rkv_wl_request *reqs;
    size_t num_reqs, reqs_cap;
    uint64_t *seg_keys;
    uint32_t *seg_lens;
    size_t num_segs, segs_cap;
    uint64_t prompt_tokens; /* sum of input_length                        */
    uint64_t output_tokens; /* sum of output_length                       */
    uint64_t next_key;      /* next unused key of the run that output keys
                               (and synthetic content) are drawn from     */
    int marks_tool_calls;   /* 1: requests' tool_call flags say which turns
                               end in a tool call (agentic); 0: the source
                               cannot tell (a trace)                      */
} rkv_workload;

void rkv_workload_init(rkv_workload *wl);
void rkv_workload_free(rkv_workload *wl); /* then it is empty again       */

/* Reads every record of r (at most limit; 0 = all) into wl (which must be
 * empty). Errors of the reader pass through unchanged ("NAME:LINE: what");
 * a trace without a single record is RKV_ERR_FORMAT "NAME: no requests
 * ...". On failure wl is left empty. */
rkv_status rkv_workload_load_trace(rkv_workload *wl, rkv_trace_reader *r,
                                   size_t limit);

/* Agentic sessions: every prompt starts with one shared system prompt and
 * tool list; turn t+1's prompt = turn t's prompt + turn t's output + a new
 * user message (a tool result). Turn t+1 is sent think_ms after turn t
 * finished (parent link; nominal arrival = parent's arrival + an estimate
 * of its service time + think time, used by open-loop consumers).
 *
 * Tool calls: a session is a tool session with probability
 * 1 - chat_share. In a tool session every turn but the last ends in a tool
 * call, and think_ms is the tool's latency: lognormal, exp(N(ln
 * tool_median_ms, tool_sigma^2)), capped at tool_max_ms. The defaults
 * (median 2 s, sigma 1.4) give a mean of 5.3 s, p90 12 s, p99 52 s and
 * 0.75 % of calls beyond 60 s (cap 600 s). Chat sessions keep the
 * exponential think time of mean think_ms_mean (a person replying). With
 * the defaults (128 sessions starting within 30 s, contexts up to 32768
 * tokens) the sessions' contexts add up to several times the default
 * capacity (426,788 tokens of an 8B model on an H100), so LRU evicts what
 * a waiting session needs next. Every request carries its session index
 * (rkv_wl_request.session) and tool_call = 1 when its next turn follows a
 * tool call. */
typedef struct rkv_agentic_config {
    uint32_t sessions;          /* default 128                             */
    uint32_t turns_min;         /* default 4                               */
    uint32_t turns_max;         /* default 16                              */
    uint32_t system_tokens;     /* shared system prompt, default 1500      */
    uint32_t tools_tokens;      /* shared tool list, default 3000          */
    uint32_t user_min;          /* new tokens per turn, default 50         */
    uint32_t user_max;          /* default 1500                            */
    uint32_t output_min;        /* default 20                              */
    uint32_t output_max;        /* default 400                             */
    double think_ms_mean;       /* chat sessions: exponential think time,
                                   default 1000                            */
    double chat_share;          /* share of sessions that are chat (no tool
                                   calls), 0..1, default 0.25              */
    double tool_median_ms;      /* tool latency median, default 2000       */
    double tool_sigma;          /* lognormal sigma, default 1.4            */
    double tool_max_ms;         /* cap, default 600000                     */
    double start_span_ms;       /* sessions start uniformly in [0, span),
                                   default 30000                           */
    uint32_t max_prompt_tokens; /* a session ends before exceeding it,
                                   default 32768                           */
} rkv_agentic_config;
void rkv_agentic_config_init(rkv_agentic_config *cfg);
rkv_status rkv_workload_agentic(rkv_workload *wl,
                                const rkv_agentic_config *cfg, uint64_t seed);

/* Few-shot batch: `requests` prompts = one shared header + a short distinct
 * suffix, arriving together in `waves` waves wave_gap_ms apart. */
typedef struct rkv_fewshot_config {
    uint32_t requests;      /* default 2000                                */
    uint32_t header_tokens; /* default 4000                                */
    uint32_t suffix_min;    /* default 20                                  */
    uint32_t suffix_max;    /* default 200                                 */
    uint32_t output_min;    /* default 1                                   */
    uint32_t output_max;    /* default 64                                  */
    uint32_t waves;         /* default 1                                   */
    double wave_gap_ms;     /* default 10000                               */
} rkv_fewshot_config;
void rkv_fewshot_config_init(rkv_fewshot_config *cfg);
rkv_status rkv_workload_fewshot(rkv_workload *wl,
                                const rkv_fewshot_config *cfg, uint64_t seed);

/* Chat conversations, open loop like a production trace (no parent
 * links): each prompt = one of `prefixes` shared prefixes (a system prompt
 * or a document, Zipf popularity with exponent prefix_zipf) + the
 * conversation's history (earlier user messages and outputs) + a new user
 * message. Conversations start uniformly within span_ms; the number of
 * turns is geometric with mean turns_mean; a turn arrives an estimated
 * service time plus a lognormal gap (median gap_median_ms, sigma
 * gap_sigma) after the previous one, so returns come at every time scale
 * -- the shape LRU's recency gets wrong in both directions. A request
 * carries its conversation as its session, session_end on the last
 * turn. */
typedef struct rkv_chat_config {
    uint32_t conversations;     /* default 1500                            */
    uint32_t prefixes;          /* default 40                              */
    double prefix_zipf;         /* default 1.0                             */
    uint32_t prefix_min;        /* default 500 tokens                      */
    uint32_t prefix_max;        /* default 6000                            */
    double turns_mean;          /* >= 1, default 3                         */
    uint32_t user_min;          /* default 20                              */
    uint32_t user_max;          /* default 2000                            */
    uint32_t output_min;        /* default 20                              */
    uint32_t output_max;        /* default 600                             */
    double gap_median_ms;       /* default 60000                           */
    double gap_sigma;           /* 0..10, default 1.5                      */
    double span_ms;             /* default 3600000                         */
    uint32_t max_prompt_tokens; /* default 32768                           */
} rkv_chat_config;
void rkv_chat_config_init(rkv_chat_config *cfg);
rkv_status rkv_workload_chat(rkv_workload *wl, const rkv_chat_config *cfg,
                             uint64_t seed);

/* The prompt of request i: input_length tokens into out. */
rkv_status rkv_workload_prompt(const rkv_workload *wl, size_t i, int32_t *out);
/* Its first n (<= input_length) tokens: a replay expands no more of a
 * prompt than its cache could ever hold. */
rkv_status rkv_workload_prompt_n(const rkv_workload *wl, size_t i, uint32_t n,
                                 int32_t *out);
/* Output token k of request req. */
int32_t rkv_workload_output_token(const rkv_wl_request *req, uint32_t k);
/* Largest input_length in the workload. */
uint32_t rkv_workload_max_input(const rkv_workload *wl);

rkv_status rkv_workload_check(const rkv_workload *wl);

#endif
