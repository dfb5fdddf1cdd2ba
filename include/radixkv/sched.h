/*
 * radixkv/sched.h -- the cache-aware scheduler (sched/): requests, batch plans, commits and stats.
 *
 * Part of the public API; include <radixkv.h> for all of it (the
 * conventions every call follows are stated there).
 */
#ifndef RADIXKV_SCHED_H
#define RADIXKV_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "radixkv/tree.h"
#include "radixkv/retention.h"
#include "radixkv/tiers.h"

RKV_BEGIN_DECLS

typedef struct rkv_sched rkv_sched;

typedef enum rkv_policy {
    RKV_POLICY_FCFS = 0,     /* arrival order                               */
    RKV_POLICY_LPM = 1,      /* longest cached prefix first                 */
    RKV_POLICY_DFS = 2,      /* SGLang's DFS-weight order over the tree     */
    RKV_POLICY_PRIORITY = 3, /* priority, with aging                        */
    RKV_POLICY_BOUNDED = 4   /* lpm with a bound on any request's wait      */
} rkv_policy;

/* Parses "fcfs", "lpm", "dfs", "priority", "bounded". */
rkv_status rkv_policy_from_name(const char *name, rkv_policy *out);
const char *rkv_policy_name(rkv_policy policy);

/* Largest max_batch_tokens: a plan's token rows are indexed by uint32 with
 * room to spare. */
#define RKV_SCHED_MAX_BATCH_TOKENS 0x7fffffffu

/* rkv_sched_create refuses any field outside its range with
 * RKV_ERR_INVALID_ARG and a message naming the field and the range. No
 * field sizes an allocation: memory follows the live requests. */
typedef struct rkv_sched_config {
    rkv_policy policy;          /* RKV_POLICY_FCFS .. RKV_POLICY_BOUNDED   */
    uint32_t max_batch_tokens;  /* new tokens per step (prefill chunks +
                                   decodes); 1 .. RKV_SCHED_MAX_BATCH_TOKENS;
                                   default 8192                            */
    uint32_t max_running;       /* requests running at once; 1 ..
                                   UINT32_MAX; default 256                 */
    uint32_t dedup_min_tokens;  /* in-batch de-duplication: hold a request
                                   whose uncached prefix shares at least
                                   this many tokens with a prefill in
                                   flight; 0 disables; any value;
                                   default 256                             */
    double max_wait_ms;         /* bounded policy: a request waiting longer
                                   goes first; >= 0, +INFINITY allowed
                                   (never overdue), NaN refused;
                                   default 10000                           */
    double aging_per_s;         /* priority policy: priority gained per
                                   second of waiting; finite, >= 0;
                                   default 1.0                             */
    /* Tiers (rkv_tree_attach_tiers on the scheduler's tree; see "Tiers in
     * the scheduler" below). Costs are finite and >= 0, in the caller's
     * units (ms for the simulator); only their ratios matter. */
    int use_tiers;              /* 1 (default): consult lower tiers at
                                   admission and for ordering; 0: ignore
                                   them (device hits only)                 */
    int swap;                   /* 1: swap a preempted request's computed
                                   pages to host when cheaper than
                                   recomputing them; default 0             */
    double compute_ms_per_token; /* prefill cost of one token; default 0  */
    double host_load_ms_per_page; /* host -> device copy of one page      */
    double disk_load_ms_per_page; /* disk -> device copy of one page      */
    /* Prefetch (see "Tiers in the scheduler"): rkv_prefetch_mode, default
     * RKV_PREFETCH_OFF; the timeout mode's longest wait, finite, >= 0. */
    int prefetch;
    double prefetch_timeout_ms;
} rkv_sched_config;

/* What a queued request does about its prefix on disk (a host + disk
 * chain). OFF: nothing (its load at admission reads the disk). Else, when
 * it is first seen waiting, rkv_tree_prefetch moves those pages to the
 * host, and the disk is busy for pages * disk_load_ms_per_page of the
 * caller's clock (one queue for every prefetch). At admission, what has
 * not arrived yet by the clock is read as disk pages by its load (listed
 * and counted under RKV_MEDIUM_DISK). BEST_EFFORT: admitted as usual;
 * WAIT: not admitted before its prefetch completed; TIMEOUT: not before
 * it completed or prefetch_timeout_ms passed since it started (HiCache's
 * best_effort / wait_complete / timeout). A request held so holds
 * nothing (stats.prefetch_waits); rkv_sched_prefetch_ready_ms says when
 * the first one may go. */
typedef enum rkv_prefetch_mode {
    RKV_PREFETCH_OFF = 0,
    RKV_PREFETCH_BEST_EFFORT = 1,
    RKV_PREFETCH_WAIT = 2,
    RKV_PREFETCH_TIMEOUT = 3
} rkv_prefetch_mode;

/*
 * Tiers in the scheduler. With use_tiers and lower tiers attached to the
 * tree, a waiting request's cached prefix is its device prefix plus its
 * host/disk continuation (rkv_tree_match_tiers). For ordering (lpm,
 * bounded) a lower page counts as cached minus its load time, converted to
 * tokens at compute_ms_per_token: credit = P - load_ms_per_page /
 * compute_ms_per_token tokens per page, at least 0 (all costs 0: a lower
 * page counts as a full page; compute 0 and load > 0: 0). dfs groups by the
 * device node and fcfs / priority ignore the cache, as without tiers.
 * Admission: a request whose continuation is worth loading (total credit
 * > 0), and whose whole need fits beside what the running and loading
 * requests will need, gets rkv_tree_load instead of being admitted; it stays WAITING, holds the load's lease, takes a running slot
 * (max_running counts it) but no batch tokens, and is skipped by
 * admission until its own ticket completes. A request whose continuation
 * another request is loading (rkv_tier_match.loading_ticket) waits for
 * that ticket instead of computing those tokens: it is skipped (holding
 * nothing, stats.load_waits) until the load completes, then matches the
 * pages on the device (a failed load: it loads or computes them itself).
 * rkv_sched_step calls
 * rkv_tree_tier_poll first (so the caller must not poll a tree the
 * scheduler uses: the tickets are the scheduler's). A completed load makes
 * the request admissible with the loaded pages on the device (they count
 * in cached_tokens, and in cached_tokens_by_medium under the medium they
 * came from); a failed load makes it compute those tokens. When nothing
 * runs and the next admission does not fit, completed loads let go of
 * their pages (they stay cached; stats.loads_released), so loads never
 * hold the pool against each other. Swap (swap = 1
 * and a host tier): a preempted request's computed full pages are
 * inserted, then copied to host with rkv_tree_store_prefix when restoring
 * them (pages * host_load_ms_per_page) costs less than recomputing them
 * (tokens * compute_ms_per_token); on resume the ordinary load path brings
 * back whatever device eviction took. Without swap a write-back tier still
 * demotes evicted pages; swap stores them at once, ahead of the write
 * policy.
 */
void rkv_sched_config_init(rkv_sched_config *cfg);

/* The scheduler uses the tree (and its pool) and must not outlive them. */
rkv_status rkv_sched_create(rkv_tree *tree, const rkv_sched_config *cfg,
                            rkv_sched **out);
/* Aborts whatever is still waiting or running, releasing every block. */
void rkv_sched_destroy(rkv_sched *sched);

typedef struct rkv_request_desc {
    uint64_t id;             /* unique among live requests                  */
    rkv_namespace ns;
    const int32_t *prompt;   /* copied                                      */
    uint32_t prompt_len;     /* >= 1                                        */
    uint32_t max_new_tokens; /* >= 1                                        */
    int32_t priority;        /* larger runs first under RKV_POLICY_PRIORITY */
    double arrival_ms;
    const rkv_retention *retention; /* NULL: none. Copied at submit and
                                applied (rkv_tree_retain) to the request's
                                cached pages each time the scheduler inserts
                                its computed pages: the priority range and
                                pin_tokens count from the prompt's first
                                token over prompt + output. The pin is made
                                once its pin_tokens are inserted, or at the
                                request's end with what was computed (fewer
                                tokens); deadline = the time of the step or
                                commit + ttl_ms, renewed at every such
                                insert. A pin refused for the cap keeps the
                                priority (stats.pins_refused); nothing the
                                retention does fails a step. With
                                session_end, the request's finish ends its
                                session (owner's pins released, the pages
                                only it used evicted first; stats
                                sessions_ended).                          */
} rkv_request_desc;

/* Refused, changing nothing: RKV_ERR_DUPLICATE for a live id (finished or
 * aborted ids may be reused); RKV_ERR_INVALID_ARG for prompt_len 0, a
 * negative token, max_new_tokens 0, or a retention that rkv_tree_retain
 * would refuse (priority outside -1..100, prio_begin > prio_end,
 * priority_duration_ms without a priority, a pin with ttl_ms 0 in a
 * namespace without a default TTL at submit); RKV_ERR_NO_SPACE for a request that
 * could not fit the pool even alone: ceil((prompt_len + max_new_tokens - 1)
 * / page_size) > num_blocks (the KV never holds the last sampled token). */
rkv_status rkv_sched_submit(rkv_sched *sched, const rkv_request_desc *req);

/* One entry of rkv_batch_plan.copies: `pages` pages of one transfer. */
typedef struct rkv_plan_copy {
    uint64_t req_id;  /* the request it serves (0 for write-policy stores) */
    uint64_t ticket;  /* the tree's ticket (0 for write-policy stores)     */
    int kind;         /* rkv_transfer_kind: LOAD / SWAP_IN (lower -> device),
                         SWAP_OUT / STORE (device or host -> lower)          */
    int medium;       /* the lower medium read from (loads) or written to
                         (stores)                                           */
    uint32_t pages;
    int done;         /* STORE: 1 when the tree already made the copy (a
                         device eviction's demotion, or a store queued
                         before this step's poll, which ran it -- issued
                         it, on a CUDA pool: its source blocks may have
                         been freed since and hold other pages by now; or
                         the host's write to the disk); 0 when queued
                         after this step's poll: it runs in the next
                         rkv_sched_step's poll and its source blocks hold
                         the pages until then. Other kinds: 0 (they
                         complete by ticket)                                */
} rkv_plan_copy;

/*
 * A batch plan: what the attention kernels consume for one step. Request r's
 * new tokens are rows qo_indptr[r]..qo_indptr[r+1] (a prefill chunk, or one
 * decode token); they sit at positions prefix_len[r] .. prefix_len[r] +
 * q_len - 1, and their K/V go to slots[row] (block * page_size + offset).
 * The block table is in CSR form, after the new tokens are appended:
 * kv_indices[kv_indptr[r] .. kv_indptr[r+1]) with kv_last_page_len[r] tokens
 * in the last page (1..page_size). All arrays are host memory owned by the
 * scheduler, valid until the next step or commit.
 */
typedef struct rkv_batch_plan {
    uint32_t num_reqs;
    uint32_t num_prefill;          /* requests 0..num_prefill-1 prefill     */
    uint32_t num_tokens;           /* qo_indptr[num_reqs]                   */
    const uint64_t *req_ids;
    const uint32_t *qo_indptr;     /* [num_reqs + 1]                        */
    const uint32_t *prefix_len;    /* [num_reqs] KV tokens before this step */
    const uint32_t *cached_len;    /* [num_reqs] of prefix_len, tokens that
                                      came from the cache at admission      */
    const uint32_t *kv_indptr;     /* [num_reqs + 1]                        */
    const uint32_t *kv_indices;    /* [kv_indptr[num_reqs]]                 */
    const uint32_t *kv_last_page_len; /* [num_reqs]                         */
    const uint32_t *slots;         /* [num_tokens]                          */
    const int32_t *input_tokens;   /* [num_tokens] token ids to run         */
    const uint8_t *emits_token;    /* [num_reqs] 1 if this step samples a
                                      token for the request (decode, or the
                                      last prefill chunk)                   */
    /* Block copies this step queued between tiers (loads for admissions,
     * swap-outs of preempted requests, and the stores the tree queued or
     * made since the previous step: its write policy's, device eviction's
     * demotions, the host's writes to the disk), for an engine to overlap
     * with the step's compute. They run in rkv_tree_tier_poll, which the
     * next rkv_sched_step calls first. Same lifetime as the arrays above;
     * a plan with num_reqs == 0 may still list copies. */
    uint32_t num_copies;
    const rkv_plan_copy *copies;        /* [num_copies]                    */
    /* Copy c's device blocks, in CSR form like kv_indices:
     * copy_blocks[copy_indptr[c] .. copy_indptr[c+1]) -- for LOAD / SWAP_IN
     * the destination blocks, `pages` of them in token order (the blocks
     * the request's kv_indices use once it is admitted); for SWAP_OUT the
     * `pages` source blocks (rkv_tree_store_prefix's blocks_out); for a
     * STORE from the device (write-through, selective, or a demotion by
     * device eviction; see `done`) its `pages` source device blocks, in
     * the order the tree recorded them (rkv_tree_store_log_read); for a
     * STORE from the host to the disk below, or one the tree's store log
     * dropped when full, none (a count only).
     * copy_indptr[0] is 0; both may be NULL when no step listed a copy. */
    const uint32_t *copy_indptr;        /* [num_copies + 1]                */
    const uint32_t *copy_blocks;        /* [copy_indptr[num_copies]]       */
} rkv_batch_plan;


/* Plans the next step at time now_ms. An empty plan (num_reqs == 0) means
 * nothing can run now and needs no commit. The plan is valid until the next
 * step/commit. RKV_ERR_STATE while a non-empty plan awaits its commit. */
rkv_status rkv_sched_step(rkv_sched *sched, double now_ms,
                          const rkv_batch_plan **plan_out);

/* Reports the step's results: next_tokens[r] for each plan request r with
 * emits_token[r] (other entries ignored), and finished[r] != 0 for a request
 * that stopped (EOS); finished may be NULL. A request also finishes at
 * max_new_tokens. A finished request's prompt + generated tokens are
 * inserted into the tree and its locks released; rkv_sched_request_info()
 * then reports it finished, until the next step. RKV_ERR_STATE when no
 * plan awaits a commit; a negative next token (RKV_ERR_INVALID_ARG)
 * changes nothing. */
rkv_status rkv_sched_commit(rkv_sched *sched, const int32_t *next_tokens,
                            const uint8_t *finished, double now_ms);

/* Removes a waiting or running request, releasing everything it holds (its
 * computed full pages stay cached in the tree). Allowed between step and
 * commit: commit then ignores that request's entry. A request whose load
 * is still queued lets go of it when the tree completes the ticket (the
 * next step's poll): the tree holds a loading path until then. */
rkv_status rkv_sched_abort(rkv_sched *sched, uint64_t id);

typedef enum rkv_req_state {
    RKV_REQ_WAITING = 0,
    RKV_REQ_RUNNING = 1,
    RKV_REQ_FINISHED = 2  /* finished or aborted: holds nothing any more   */
} rkv_req_state;

typedef enum rkv_finish_reason {
    RKV_FINISH_NONE = 0,   /* not finished (waiting or running)            */
    RKV_FINISH_STOP = 1,   /* commit's finished[r] was set (EOS, stop word);
                              wins over LENGTH when both hold              */
    RKV_FINISH_LENGTH = 2, /* reached max_new_tokens                       */
    RKV_FINISH_ABORT = 3   /* rkv_sched_abort()                            */
} rkv_finish_reason;

typedef struct rkv_request_info {
    uint64_t id;
    rkv_req_state state;
    rkv_finish_reason finish;
    uint32_t prompt_len;
    uint32_t max_new_tokens;
    uint32_t generated_tokens; /* sampled tokens committed so far (a
                                  pending plan's are not counted yet)      */
    uint32_t cached_tokens;    /* tokens the cache served at the latest
                                  admission (prompt plus, after a
                                  preemption, generated tokens); 0 before
                                  the first admission                      */
    uint32_t kv_tokens;        /* tokens whose KV it holds now, cached or
                                  computed (RUNNING; a pending plan's not
                                  counted; 0 while waiting, once finished) */
    uint32_t preemptions;      /* times it was preempted back to waiting   */
    uint32_t cached_host_tokens; /* of cached_tokens, loaded for it from the
                                  host tier / from disk (see "Tiers in the
                                  scheduler")                               */
    uint32_t cached_disk_tokens;
    int loading;               /* WAITING for its own load (queued or done,
                                  not admitted yet)                         */
} rkv_request_info;

/* What a server needs to follow a request: its state, why it finished,
 * and its token counts. Live requests (waiting, running) are found in
 * O(1). A request that finished (at a commit) or was aborted stays
 * queryable as RKV_REQ_FINISHED, with its final counts and finish reason,
 * until the next rkv_sched_step(): a step forgets it (one that fails may
 * or may not), and its id is then unknown. So the pattern is: commit, then
 * query the plan's ids (or the aborted id) to learn which finished. The
 * requests ended since the last step are searched linearly (few). If an
 * id was reused (an ended id submitted again), the live request is
 * reported, else the most recently ended one. An id never submitted or
 * already forgotten: RKV_ERR_NOT_FOUND, *out unchanged. Read-only. */
rkv_status rkv_sched_request_info(const rkv_sched *sched, uint64_t id,
                                  rkv_request_info *out);

typedef struct rkv_sched_stats {
    uint64_t waiting, running, finished, aborted;
    uint64_t preemptions;
    uint64_t steps;
    uint64_t prompt_tokens;       /* of admitted requests                   */
    uint64_t cached_tokens;       /* prompt tokens served from the cache    */
    uint64_t computed_tokens;     /* prefill tokens computed                */
    uint64_t dedup_holds;         /* times a request was held for dedup     */
    uint64_t peak_blocks_used;
    /* retention (rkv_request_desc.retention) */
    uint64_t retains;             /* rkv_tree_retain calls that succeeded   */
    uint64_t pins_refused;        /* pins refused for the tree's cap (the
                                     priority was applied without them)     */
    uint64_t retain_failed;       /* retains that failed otherwise (out of
                                     memory): skipped, the step went on    */
    uint64_t sessions_ended;      /* finished requests with session_end   */
    /* tiers (see "Tiers in the scheduler") */
    uint64_t cached_tokens_by_medium[RKV_MEDIUM_COUNT]; /* of cached_tokens:
                                     on the device at admission, or loaded
                                     from host / disk for it                */
    uint64_t loading;             /* requests waiting for their load now    */
    uint64_t loads;               /* rkv_tree_load tickets taken            */
    uint64_t load_pages, load_disk_pages; /* pages they promote (of them,
                                     from disk)                             */
    uint64_t failed_loads;        /* tickets that failed (computed instead) */
    uint64_t swap_outs, swap_out_pages; /* preemptions that swapped, pages  */
    uint64_t swap_ins, swap_in_pages;   /* loads of swapped-out requests    */
    uint64_t loads_released;      /* completed loads let go unadmitted: the
                                     pool was full with nothing running    */
    uint64_t load_waits;          /* admissions deferred a step: the
                                     request's continuation was another
                                     request's load in flight              */
    uint64_t prefetches, prefetch_pages; /* rkv_tree_prefetch calls that
                                     moved pages, and the pages            */
    uint64_t prefetch_waits;      /* admissions deferred a step: the
                                     request's prefetch had not arrived
                                     (WAIT, TIMEOUT)                       */
    uint64_t prefetch_late_pages; /* prefetched pages admitted before they
                                     arrived (read as disk pages)          */
} rkv_sched_stats;
rkv_status rkv_sched_get_stats(const rkv_sched *sched, rkv_sched_stats *out);

/* The earliest time (caller's clock) a waiting request held for its
 * prefetch may be admitted, or 0 when none is held: a caller whose step
 * planned nothing advances its clock to it (or to its next arrival). */
double rkv_sched_prefetch_ready_ms(const rkv_sched *sched);

/* Verifies the scheduler's invariants (queues, block ownership, locks,
 * budgets) and calls rkv_tree_check(). */
rkv_status rkv_sched_check(const rkv_sched *sched);

RKV_END_DECLS

#endif /* RADIXKV_SCHED_H */
