/*
 * attention/sim/cudasim_rt.cpp -- the CPU simulator's runtime: devices,
 * memory, streams, events, kernel execution by fibres, the cuBLAS subset.
 * What is and is not modelled is listed in cudasim.h.
 *
 * Invariants: every API entry holds the one recursive lock; a kernel runs
 * inside its launch (eager mode) or inside the synchronising call that
 * reaches it (deferred mode), on the calling thread, its CUDA threads as
 * fibres on their own stacks; a fibre gives control back only at a
 * barrier or warp collective (and at its end), and the scheduler resolves
 * those only when no fibre can run. Device allocations live in their own
 * mappings between PROT_NONE pages; a fault while a kernel runs is turned
 * into cudaErrorIllegalAddress by a SIGSEGV handler that jumps back to the
 * scheduler. Operations of a stream run in order; implicit ordering of the
 * legacy default stream with blocking streams of its device follows CUDA.
 */
#include "attention/sim/cudasim.h"

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define RKVSIM_ASAN 1
extern "C" void __sanitizer_start_switch_fiber(void **fake, const void *bottom, size_t size);
extern "C" void __sanitizer_finish_switch_fiber(void *fake, const void **bottom, size_t *size);
extern "C" void __asan_unpoison_memory_region(void const volatile *addr, size_t size);
#endif

#if !defined(__x86_64__)
#error "cudasim: the fibre switch is written for x86-64"
#endif

/* Saves callee-saved registers on the current stack, stores its pointer in
 * *save, and resumes the stack `to` (made by this function or by
 * fibre_init). */
extern "C" void rkvsim_switch_ctx(void **save, void *to) __attribute__((visibility("hidden")));
__asm__(".pushsection .text\n"
        ".globl rkvsim_switch_ctx\n"
        ".hidden rkvsim_switch_ctx\n"
        ".type rkvsim_switch_ctx,@function\n"
        "rkvsim_switch_ctx:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size rkvsim_switch_ctx, .-rkvsim_switch_ctx\n"
        ".popsection\n");

rkvsim_thread_view *rkvsim_cur = nullptr;

namespace {

const size_t PAGE = 4096;
const size_t STACK = 512 * 1024;
const size_t ALIGN = 256;
const unsigned char CANARY = 0xa5;

struct Alloc {
    char *user;
    size_t size;
    char *map;
    size_t map_len;
    int dev;
    bool freed;
};

struct Op {
    uint64_t seq;
    bool kernel; /* a kernel or GEMM, not a copy/memset/wait */
    std::function<cudaError_t()> run;
};

enum { F_RUN, F_BAR, F_WARP, F_EXIT };

/* One cp.async copy a thread has issued and not yet completed (deferred
 * mode): group = the commit count when it was issued. */
struct CpAsync {
    void *dst;
    const void *src;
    unsigned n, group;
};
enum { CP_MAX = 64 }; /* pending copies a thread: older ones complete early */

struct Fibre {
    void *sp;
    char *stack; /* usable [stack, stack + STACK) above a guard page */
    int state;
    const char *file;
    int line;
    int kind;
    unsigned mask;
    uint64_t bits;
    int arg, width;
    uint64_t result;
    rkvsim_thread_view view;
    void *fake;
    CpAsync cp[CP_MAX]; /* pending cp.async copies, oldest first */
    unsigned ncp, cp_group;
};

struct Kernel {
    std::string name;
    dim3 grid, block;
    rkvsim_body body;
    char *sh_begin, *sh_end;
};

} // namespace

struct rkvsim_stream {
    int dev;
    bool nonblocking, legacy;
    std::deque<Op> q;
    uint64_t last;
};
struct rkvsim_event {
    rkvsim_stream *s;
    uint64_t seq;
    bool recorded;
    bool notready; /* deferred: the next query reports cudaErrorNotReady */
};
struct rkvsim_blas {
    cudaStream_t s;
};

namespace {

struct State {
    std::recursive_mutex mu;
    bool init = false;
    int ndev = 2, cur = 0, sms = 132;
    size_t mem_limit = (size_t)16 << 30;
    std::vector<size_t> in_use;
    unsigned max_grid_x = 0x7fffffffu;
    int order = RKVSIM_FORWARD;
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    bool deferred = false;
    std::string kbad; /* an in-kernel misuse found by a fibre (cp.async) */
    cudaError_t last = cudaSuccess;
    cudaError_t msg_code = cudaSuccess;
    std::string msg;
    cublasStatus_t blas_code = CUBLAS_STATUS_SUCCESS;
    std::string blas_msg;
    std::map<uintptr_t, Alloc> allocs; /* by user start, freed ones too */
    std::deque<uintptr_t> quarantine;
    size_t quarantined = 0;
    std::map<uintptr_t, size_t> pinned;
    std::vector<rkvsim_stream *> legacy;
    std::set<rkvsim_stream *> streams;
    std::set<rkvsim_event *> events;
    uint64_t seq = 0;
    /* kernel execution */
    std::vector<Fibre> fibres;
    Fibre *running = nullptr;
    void *main_sp = nullptr;
    const void *main_bottom = nullptr;
    size_t main_size = 0;
    const Kernel *kern = nullptr;
    sigjmp_buf kjmp;
    volatile sig_atomic_t in_kernel = 0;
    void *fault = nullptr;
    char *altstack = nullptr;
    ~State()
    { /* at exit: what a process never released goes with the "driver" */
        for (rkvsim_stream *s : legacy)
            delete s;
        for (rkvsim_stream *s : streams)
            delete s;
        for (rkvsim_event *e : events)
            delete e;
    }
};

State G;

typedef std::lock_guard<std::recursive_mutex> Lock;

/* ---- traffic meter ----
 * Per kernel name (the text before any '<') and region: bytes read and
 * written, and launches. Host-side operations count under bracketed names
 * ("[H2D]", "[malloc]", "[sync]", ...). Regions are address ranges a tool
 * names (the KV pool, say); region 0 is everything else. */
const int METER_REGIONS = 8;
struct MeterRow {
    uint64_t launches = 0;
    uint64_t rd[METER_REGIONS] = {}, wr[METER_REGIONS] = {};
};
struct Meter {
    bool on = false;
    std::vector<std::pair<std::string, MeterRow>> rows; /* in first-seen order */
    uintptr_t lo[METER_REGIONS] = {}, hi[METER_REGIONS] = {};
    int nregions = 1;
    MeterRow *cur = nullptr; /* the running kernel's row */
};
Meter MT;

MeterRow *meter_row(const std::string &full)
{
    std::string name = full.substr(0, full.find('<'));
    for (auto &r : MT.rows)
        if (r.first == name)
            return &r.second;
    MT.rows.emplace_back(name, MeterRow());
    return &MT.rows.back().second;
}

int meter_region(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    for (int i = 1; i < MT.nregions; i++)
        if (a >= MT.lo[i] && a < MT.hi[i])
            return i;
    return 0;
}

/* A host-side event (n bytes read at src and/or written at dst). */
void meter_host(const char *what, const void *src, const void *dst, uint64_t n)
{
    if (!MT.on)
        return;
    MeterRow *r = meter_row(what);
    r->launches++;
    if (src != nullptr)
        r->rd[meter_region(src)] += n;
    if (dst != nullptr)
        r->wr[meter_region(dst)] += n;
}

uint64_t rnd()
{
    G.rng ^= G.rng << 13;
    G.rng ^= G.rng >> 7;
    G.rng ^= G.rng << 17;
    return G.rng;
}

const char *base_string(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
    case cudaErrorIllegalInstruction: return "an illegal instruction was encountered";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorNotSupported: return "operation not supported";
    default: return "unknown error";
    }
}

/* Records e as the last error with a message; returns e. */
__attribute__((format(printf, 2, 3))) cudaError_t fail(cudaError_t e, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    G.msg = std::string(base_string(e)) + " (cudasim: " + buf + ")";
    G.msg_code = e;
    G.last = e;
    return e;
}

cudaError_t note(cudaError_t e)
{
    if (e != cudaSuccess)
        G.last = e;
    return e;
}

void init()
{
    if (G.init)
        return;
    G.init = true;
    const char *v;
    if ((v = getenv("RKV_CUDASIM_DEVICES")) != nullptr)
        G.ndev = atoi(v);
    if ((v = getenv("RKV_CUDASIM_SMS")) != nullptr && atoi(v) > 0)
        G.sms = atoi(v);
    if ((v = getenv("RKV_CUDASIM_MEM")) != nullptr && strtoull(v, nullptr, 0) > 0)
        G.mem_limit = strtoull(v, nullptr, 0);
    if ((v = getenv("RKV_CUDASIM_DEFER")) != nullptr)
        G.deferred = atoi(v) != 0;
    if ((v = getenv("RKV_CUDASIM_SCHEDULE")) != nullptr) {
        if (strncmp(v, "reverse", 7) == 0)
            G.order = RKVSIM_REVERSE;
        else if (strncmp(v, "random", 6) == 0) {
            G.order = RKVSIM_RANDOM;
            if (v[6] == ':')
                G.rng = strtoull(v + 7, nullptr, 0) * 2654435761u + 1;
        }
    }
    if (G.ndev < 0)
        G.ndev = 0;
    G.in_use.assign((size_t)G.ndev, 0);
    for (int d = 0; d < G.ndev; d++) {
        rkvsim_stream *s = new rkvsim_stream();
        s->dev = d;
        s->nonblocking = false;
        s->legacy = true;
        s->last = 0;
        G.legacy.push_back(s);
    }
}

#define ENTER()                                                                    \
    Lock lock_(G.mu);                                                              \
    init()

#define NEED_DEVICE()                                                              \
    do {                                                                           \
        if (G.ndev == 0)                                                           \
            return fail(cudaErrorNoDevice, "RKV_CUDASIM_DEVICES=0");               \
    } while (0)

/* ---- memory lookup ---- */

/* The allocation (live or freed) whose user range holds p; end inclusive
 * when `end_ok`. */
Alloc *find_alloc(const void *p, bool end_ok)
{
    uintptr_t a = (uintptr_t)p;
    auto it = G.allocs.upper_bound(a);
    if (it == G.allocs.begin())
        return nullptr;
    --it;
    Alloc &al = it->second;
    if (a < (uintptr_t)al.user + al.size || (end_ok && a == (uintptr_t)al.user + al.size))
        return &al;
    return nullptr;
}

/* The allocation whose mapping (guards included) holds p. */
Alloc *find_mapping(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    for (auto &kv : G.allocs) {
        Alloc &al = kv.second;
        if (a >= (uintptr_t)al.map && a < (uintptr_t)al.map + al.map_len)
            return &al;
    }
    return nullptr;
}

bool is_pinned(const void *p, size_t n)
{
    uintptr_t a = (uintptr_t)p;
    auto it = G.pinned.upper_bound(a);
    if (it == G.pinned.begin())
        return false;
    --it;
    return a >= it->first && a + n <= it->first + it->second;
}

std::string describe(const void *p)
{
    char buf[256];
    Alloc *al = find_mapping(p);
    if (al == nullptr) {
        snprintf(buf, sizeof buf, "%p is not device memory", p);
        return buf;
    }
    intptr_t off = (char *)p - al->user;
    const char *st = al->freed ? "freed " : "";
    if (off < 0)
        snprintf(buf, sizeof buf, "%p is %td bytes before a %s%zu-byte device allocation", p,
                 -off, st, al->size);
    else if ((size_t)off >= al->size)
        snprintf(buf, sizeof buf, "%p is %zu bytes past the end of a %s%zu-byte device allocation",
                 p, (size_t)off - al->size, st, al->size);
    else
        snprintf(buf, sizeof buf, "%p is at offset %td of a %s%zu-byte device allocation", p, off,
                 st, al->size);
    return buf;
}

/* Checks that [p, p+n) lies in one live device allocation of a device. */
cudaError_t check_dev_range(const void *p, size_t n, const char *what, const char *fn)
{
    Alloc *al = find_alloc(p, n == 0);
    if (al == nullptr || al->freed)
        return fail(cudaErrorInvalidValue, "%s: %s: %s", fn, what, describe(p).c_str());
    if ((size_t)((const char *)p - al->user) + n > al->size)
        return fail(cudaErrorInvalidValue,
                    "%s: %s: %zu bytes at offset %td overrun the %zu-byte allocation", fn, what,
                    n, (const char *)p - al->user, al->size);
    return cudaSuccess;
}

bool is_device(const void *p) { return find_mapping(p) != nullptr; }

/* Canary bytes around an allocation still intact? */
bool slack_ok(const Alloc &al)
{
    char *data = al.map + PAGE, *end = al.map + al.map_len - PAGE;
    for (char *c = data; c < al.user; c++)
        if ((unsigned char)*c != CANARY)
            return false;
    for (char *c = al.user + al.size; c < end; c++)
        if ((unsigned char)*c != CANARY)
            return false;
    return true;
}

cudaError_t check_all_slack(const char *after)
{
    for (auto &kv : G.allocs) {
        Alloc &al = kv.second;
        if (!al.freed && !slack_ok(al))
            return fail(cudaErrorIllegalAddress,
                        "%s wrote outside the %zu-byte device allocation at %p", after, al.size,
                        (void *)al.user);
    }
    return cudaSuccess;
}

/* ---- streams ---- */

cudaError_t resolve(cudaStream_t s, rkvsim_stream **out, const char *fn)
{
    if (s == nullptr) {
        *out = G.legacy[(size_t)G.cur];
        return cudaSuccess;
    }
    if (G.streams.count(s) == 0)
        return fail(cudaErrorInvalidResourceHandle, "%s: %p is not a live stream", fn, (void *)s);
    *out = s;
    return cudaSuccess;
}

cudaError_t run_until(rkvsim_stream *s, uint64_t seq);

cudaError_t run_deps(rkvsim_stream *s, uint64_t seq)
{
    cudaError_t first = cudaSuccess, e;
    if (s->legacy) {
        for (rkvsim_stream *b : G.streams)
            if (b->dev == s->dev && !b->nonblocking &&
                (e = run_until(b, seq)) != cudaSuccess && first == cudaSuccess)
                first = e;
    } else if (!s->nonblocking) {
        first = run_until(G.legacy[(size_t)s->dev], seq);
    }
    return first;
}

/* Runs s's operations with sequence numbers below or at seq, after what
 * each implicitly waits for. Returns the first error. */
cudaError_t run_until(rkvsim_stream *s, uint64_t seq)
{
    cudaError_t first = cudaSuccess, e;
    while (!s->q.empty() && s->q.front().seq <= seq) {
        Op op = std::move(s->q.front());
        s->q.pop_front();
        if ((e = run_deps(s, op.seq)) != cudaSuccess && first == cudaSuccess)
            first = e;
        if ((e = op.run()) != cudaSuccess && first == cudaSuccess)
            first = e;
    }
    return first;
}

cudaError_t sync_device(int dev)
{
    cudaError_t first = run_until(G.legacy[(size_t)dev], UINT64_MAX), e;
    for (rkvsim_stream *s : G.streams)
        if (s->dev == dev && (e = run_until(s, UINT64_MAX)) != cudaSuccess &&
            first == cudaSuccess)
            first = e;
    return first;
}

/* Queues (deferred) or runs op on s. */
cudaError_t enqueue(rkvsim_stream *s, std::function<cudaError_t()> fn, uint64_t *seq_out,
                    bool kernel = false)
{
    uint64_t seq = ++G.seq;
    if (seq_out != nullptr)
        *seq_out = seq;
    s->last = seq;
    if (!G.deferred)
        return fn();
    s->q.push_back(Op{seq, kernel, std::move(fn)});
    return cudaSuccess;
}

/* Deferred mode, before s is synchronised: the copy engines run ahead,
 * so every other stream of s's device completes the copies and memsets
 * at its head (not its kernels). A legal GPU schedule, and the one that
 * exposes a buffer reused across streams without ordering. */
void copies_run_ahead(rkvsim_stream *s)
{
    std::vector<rkvsim_stream *> all(G.streams.begin(), G.streams.end());
    all.push_back(G.legacy[(size_t)s->dev]);
    for (rkvsim_stream *t : all) {
        if (t == s || t->dev != s->dev || (!s->nonblocking && !t->nonblocking))
            continue; /* implicitly ordered with s: runs with it anyway */
        while (!t->q.empty() && !t->q.front().kernel) {
            uint64_t seq = t->q.front().seq;
            if (run_until(t, seq) != cudaSuccess)
                break;
        }
    }
}

/* ---- fibres ---- */

void fibre_entry();

void fibre_init(Fibre &f)
{
    if (f.stack == nullptr) {
        char *m = (char *)mmap(nullptr, STACK + PAGE, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED)
            abort(); /* the simulator cannot continue without stacks */
        mprotect(m, PAGE, PROT_NONE);
        f.stack = m + PAGE;
    }
    uintptr_t top = ((uintptr_t)f.stack + STACK) & ~(uintptr_t)15;
    uint64_t *sp = (uint64_t *)top;
    *--sp = 0;
    *--sp = (uint64_t)(uintptr_t)&fibre_entry;
    for (int i = 0; i < 6; i++)
        *--sp = 0;
    f.sp = sp;
    f.state = F_RUN;
    f.fake = nullptr;
    f.ncp = 0; /* copies a thread never waited for are dropped with it */
    f.cp_group = 0;
}

/* From a fibre back to the scheduler. */
void yield_to_main(Fibre *f, bool exiting)
{
#ifdef RKVSIM_ASAN
    __sanitizer_start_switch_fiber(exiting ? nullptr : &f->fake, G.main_bottom, G.main_size);
#else
    (void)exiting;
#endif
    rkvsim_switch_ctx(&f->sp, G.main_sp);
#ifdef RKVSIM_ASAN
    __sanitizer_finish_switch_fiber(f->fake, &G.main_bottom, &G.main_size);
#endif
}

void fibre_entry()
{
#ifdef RKVSIM_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &G.main_bottom, &G.main_size);
#endif
    G.kern->body();
    Fibre *f = G.running;
    f->state = F_EXIT;
    yield_to_main(f, true);
    abort(); /* an exited fibre is never resumed */
}

void run_fibre(Fibre &f)
{
    G.running = &f;
    rkvsim_cur = &f.view;
#ifdef RKVSIM_ASAN
    void *fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, f.stack, STACK);
#endif
    rkvsim_switch_ctx(&G.main_sp, f.sp);
#ifdef RKVSIM_ASAN
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
    G.running = nullptr;
}

const char *kind_name(int k)
{
    static const char *n[] = {"__shfl_sync", "__shfl_xor_sync", "__shfl_down_sync",
                              "__shfl_up_sync", "__syncwarp", "__ballot_sync", "__any_sync",
                              "__all_sync"};
    return k >= 0 && k < 8 ? n[k] : "?";
}

std::string where(const Fibre &f)
{
    char buf[256];
    const char *file = f.file ? strrchr(f.file, '/') : nullptr;
    file = file ? file + 1 : f.file ? f.file : "?";
    if (f.state == F_EXIT)
        snprintf(buf, sizeof buf, "has exited");
    else if (f.state == F_BAR)
        snprintf(buf, sizeof buf, "waits at __syncthreads (%s:%d)", file, f.line);
    else
        snprintf(buf, sizeof buf, "waits at %s mask 0x%08x (%s:%d)", kind_name(f.kind), f.mask,
                 file, f.line);
    return buf;
}

bool same_site(const Fibre &a, const Fibre &b)
{
    return a.line == b.line && (a.file == b.file || strcmp(a.file, b.file) == 0);
}

std::string tname(const Fibre &f)
{
    char buf[96];
    snprintf(buf, sizeof buf, "block (%u,%u,%u) thread (%u,%u,%u)", f.view.bidx.x, f.view.bidx.y,
             f.view.bidx.z, f.view.tidx.x, f.view.tidx.y, f.view.tidx.z);
    return buf;
}

/* Completes every warp collective; all fibres are blocked or exited. */
cudaError_t resolve_warps(unsigned n, bool *any)
{
    const Kernel &k = *G.kern;
    *any = false;
    for (unsigned i = 0; i < n; i++) {
        Fibre &f = G.fibres[i];
        if (f.state != F_WARP)
            continue;
        *any = true;
        unsigned lane = i & 31, wbase = i - lane;
        if (!(f.mask >> lane & 1))
            return fail(cudaErrorIllegalInstruction,
                        "kernel %s: %s: lane %u %s, a mask without its own lane", k.name.c_str(),
                        tname(f).c_str(), lane, where(f).c_str());
        if (f.width < 1 || f.width > 32 || (f.width & (f.width - 1)) != 0)
            return fail(cudaErrorIllegalInstruction, "kernel %s: %s: %s with width %d",
                        k.name.c_str(), tname(f).c_str(), kind_name(f.kind), f.width);
        for (unsigned j = 0; j < 32; j++) {
            if (!(f.mask >> j & 1))
                continue;
            if (wbase + j >= n)
                return fail(cudaErrorIllegalInstruction,
                            "kernel %s: %s: %s names lane %u, absent in a block of %u threads",
                            k.name.c_str(), tname(f).c_str(), where(f).c_str(), j, n);
            Fibre &o = G.fibres[wbase + j];
            bool ok = o.state == F_WARP && o.kind == f.kind && o.mask == f.mask &&
                      (f.kind == RKVSIM_SYNCWARP || same_site(o, f));
            if (!ok)
                return fail(cudaErrorIllegalInstruction,
                            "kernel %s: %s %s, but lane %u named in its mask %s", k.name.c_str(),
                            tname(f).c_str(), where(f).c_str(), j, where(o).c_str());
        }
        uint64_t vote = 0;
        for (unsigned j = 0; j < 32; j++)
            if (f.mask >> j & 1)
                vote |= (G.fibres[wbase + j].bits != 0 ? 1ull : 0ull) << j;
        for (unsigned j = 0; j < 32; j++) {
            if (!(f.mask >> j & 1))
                continue;
            Fibre &o = G.fibres[wbase + j];
            unsigned w = (unsigned)o.width, src = j;
            int a = o.arg;
            switch (o.kind) {
            case RKVSIM_SHFL_IDX: src = (j & ~(w - 1)) + ((unsigned)a & (w - 1)); break;
            case RKVSIM_SHFL_XOR:
                src = j ^ (unsigned)a;
                if (src >= 32 || src / w > j / w)
                    src = j;
                break;
            case RKVSIM_SHFL_DOWN: src = (j % w) + (unsigned)a >= w ? j : j + (unsigned)a; break;
            case RKVSIM_SHFL_UP: src = (j % w) < (unsigned)a ? j : j - (unsigned)a; break;
            default: break;
            }
            switch (o.kind) {
            case RKVSIM_SHFL_IDX:
            case RKVSIM_SHFL_XOR:
            case RKVSIM_SHFL_DOWN:
            case RKVSIM_SHFL_UP:
                if (!(f.mask >> src & 1))
                    return fail(cudaErrorIllegalInstruction,
                                "kernel %s: %s: %s reads lane %u, outside mask 0x%08x",
                                k.name.c_str(), tname(o).c_str(), kind_name(o.kind), src, f.mask);
                o.result = G.fibres[wbase + src].bits;
                break;
            case RKVSIM_BALLOT: o.result = vote; break;
            case RKVSIM_ANY: o.result = vote != 0; break;
            case RKVSIM_ALL: o.result = vote == (uint64_t)f.mask; break;
            default: o.result = 0; break;
            }
        }
        for (unsigned j = 0; j < 32; j++)
            if (f.mask >> j & 1)
                G.fibres[wbase + j].state = F_RUN;
    }
    return cudaSuccess;
}

void order_of(unsigned n, std::vector<unsigned> &ord)
{
    ord.resize(n);
    for (unsigned i = 0; i < n; i++)
        ord[i] = G.order == RKVSIM_REVERSE ? n - 1 - i : i;
    if (G.order == RKVSIM_RANDOM)
        for (unsigned i = n; i > 1; i--)
            std::swap(ord[i - 1], ord[rnd() % i]);
}

cudaError_t run_block(uint3 bidx, unsigned n, std::vector<unsigned> &ord)
{
    const Kernel &k = *G.kern;
    for (unsigned t = 0; t < n; t++) {
        Fibre &f = G.fibres[t];
        fibre_init(f);
        f.view.tidx = uint3{t % k.block.x, t / k.block.x % k.block.y,
                            t / (k.block.x * k.block.y)};
        f.view.bidx = bidx;
        f.view.bdim = uint3{k.block.x, k.block.y, k.block.z};
        f.view.gdim = uint3{k.grid.x, k.grid.y, k.grid.z};
    }
    for (;;) {
        order_of(n, ord);
        for (unsigned i = 0; i < n; i++)
            if (G.fibres[ord[i]].state == F_RUN)
                run_fibre(G.fibres[ord[i]]);
        if (!G.kbad.empty()) {
            std::string m = G.kbad;
            G.kbad.clear();
            return fail(cudaErrorIllegalInstruction, "kernel %s: %s", k.name.c_str(), m.c_str());
        }
        bool warps;
        cudaError_t e = resolve_warps(n, &warps);
        if (e != cudaSuccess)
            return e;
        if (warps)
            continue;
        int bar = -1, exited = -1;
        for (unsigned t = 0; t < n; t++) {
            if (G.fibres[t].state == F_BAR && bar < 0)
                bar = (int)t;
            if (G.fibres[t].state == F_EXIT && exited < 0)
                exited = (int)t;
        }
        if (bar < 0)
            return cudaSuccess; /* all exited */
        Fibre &b = G.fibres[(size_t)bar];
        for (unsigned t = 0; t < n; t++) {
            Fibre &f = G.fibres[t];
            if (f.state != F_BAR || !same_site(f, b))
                return fail(cudaErrorIllegalInstruction,
                            "kernel %s: barrier divergence: %s %s while %s %s", k.name.c_str(),
                            tname(b).c_str(), where(b).c_str(), tname(f).c_str(),
                            where(f).c_str());
        }
        for (unsigned t = 0; t < n; t++)
            G.fibres[t].state = F_RUN;
    }
}

void on_fault(int sig, siginfo_t *si, void *)
{
    if (!G.in_kernel) {
        signal(sig, SIG_DFL);
        return; /* faults again with the default action */
    }
    G.fault = si->si_addr;
    G.in_kernel = 0;
    siglongjmp(G.kjmp, 1);
}

cudaError_t run_kernel(const Kernel &k)
{
    unsigned n = k.block.x * k.block.y * k.block.z;
    if (G.fibres.size() < n) {
        size_t old = G.fibres.size();
        G.fibres.resize(n);
        for (size_t i = old; i < n; i++)
            memset(&G.fibres[i], 0, sizeof(Fibre));
    }
    if (G.altstack == nullptr) {
        G.altstack = (char *)malloc(1 << 16);
        stack_t ss;
        ss.ss_sp = G.altstack;
        ss.ss_size = 1 << 16;
        ss.ss_flags = 0;
        sigaltstack(&ss, nullptr);
    }
    struct sigaction sa, old_segv, old_bus;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old_segv);
    sigaction(SIGBUS, &sa, &old_bus);
    G.kern = &k;
    MT.cur = MT.on ? meter_row(k.name) : nullptr;
    if (MT.cur != nullptr)
        MT.cur->launches++;
    const unsigned __int128 nb = (unsigned __int128)k.grid.x * k.grid.y * k.grid.z;
    unsigned __int128 start = 0, stride = 1;
    if (G.order == RKVSIM_RANDOM && nb > 1) {
        start = rnd() % nb;
        stride = 1 + rnd() % (nb - 1);
        for (;;) { /* coprime stride: every block exactly once */
            unsigned __int128 a = stride, b = nb;
            while (b != 0) {
                unsigned __int128 t = a % b;
                a = b;
                b = t;
            }
            if (a == 1)
                break;
            stride++;
        }
    }
    std::vector<unsigned> ord;
    cudaError_t e = cudaSuccess;
    static unsigned __int128 volatile bi; /* survives the jump */
    if (sigsetjmp(G.kjmp, 1) != 0) {
#ifdef RKVSIM_ASAN
        __sanitizer_start_switch_fiber(nullptr, G.main_bottom, G.main_size);
        __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
#endif
        Fibre *f = G.running;
        G.running = nullptr;
        e = fail(cudaErrorIllegalAddress, "kernel %s: %s: access to %s", k.name.c_str(),
                 f ? tname(*f).c_str() : "?", describe(G.fault).c_str());
    } else {
        for (bi = 0; bi < nb; bi++) {
            unsigned __int128 lin = G.order == RKVSIM_REVERSE  ? nb - 1 - bi
                                    : G.order == RKVSIM_RANDOM ? (start + bi * stride) % nb
                                                               : bi;
            uint3 b;
            b.x = (unsigned)(lin % k.grid.x);
            b.y = (unsigned)(lin / k.grid.x % k.grid.y);
            b.z = (unsigned)(lin / ((unsigned __int128)k.grid.x * k.grid.y));
            if (k.sh_begin != nullptr && k.sh_end > k.sh_begin)
                memset(k.sh_begin, 0xff, (size_t)(k.sh_end - k.sh_begin));
            G.in_kernel = 1;
            e = run_block(b, n, ord);
            G.in_kernel = 0;
            if (e != cudaSuccess)
                break;
        }
    }
    G.in_kernel = 0;
    sigaction(SIGSEGV, &old_segv, nullptr);
    sigaction(SIGBUS, &old_bus, nullptr);
    G.kern = nullptr;
    MT.cur = nullptr;
    rkvsim_cur = nullptr;
    if (e != cudaSuccess) {
#ifdef RKVSIM_ASAN
        for (unsigned i = 0; i < n; i++) /* abandoned frames keep their poison */
            __asan_unpoison_memory_region(G.fibres[i].stack, STACK);
#endif
        return e;
    }
    std::string after = "kernel " + k.name;
    return check_all_slack(after.c_str());
}

/* ---- copies ---- */

struct Copy2D {
    char *dst;
    const char *src;
    size_t dpitch, spitch, width, height;
};

void do_copy(const Copy2D &c)
{
    for (size_t r = 0; r < c.height; r++)
        memmove(c.dst + r * c.dpitch, c.src + r * c.spitch, c.width);
}

cudaError_t copy_impl(const char *fn, Copy2D c, cudaMemcpyKind kind, cudaStream_t s, bool sync)
{
    ENTER();
    NEED_DEVICE();
    if (c.height == 0 || c.width == 0)
        return cudaSuccess;
    if (c.width > c.dpitch || c.width > c.spitch)
        return fail(cudaErrorInvalidValue, "%s: width %zu exceeds a pitch (%zu, %zu)", fn,
                    c.width, c.dpitch, c.spitch);
    rkvsim_stream *st = nullptr;
    cudaError_t e = resolve(s, &st, fn);
    if (e != cudaSuccess)
        return e;
    const size_t ext_d = (c.height - 1) * c.dpitch + c.width;
    const size_t ext_s = (c.height - 1) * c.spitch + c.width;
    bool dd = is_device(c.dst), sd = is_device(c.src);
    if (kind == cudaMemcpyDefault)
        kind = dd ? (sd ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                  : (sd ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
    bool want_dd = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    bool want_sd = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (kind > cudaMemcpyDefault)
        return fail(cudaErrorInvalidMemcpyDirection, "%s: kind %d", fn, (int)kind);
    if (dd != want_dd || sd != want_sd)
        return fail(cudaErrorInvalidValue,
                    "%s: kind %d, but the destination is %s memory and the source %s memory",
                    fn, (int)kind, dd ? "device" : "host", sd ? "device" : "host");
    if (want_dd && (e = check_dev_range(c.dst, ext_d, "destination", fn)) != cudaSuccess)
        return e;
    if (want_sd && (e = check_dev_range(c.src, ext_s, "source", fn)) != cudaSuccess)
        return e;
    meter_host(kind == cudaMemcpyHostToDevice   ? "[H2D]"
               : kind == cudaMemcpyDeviceToHost ? "[D2H]"
               : kind == cudaMemcpyDeviceToDevice ? "[D2D]"
                                                  : "[H2H]",
               sd ? c.src : nullptr, dd ? c.dst : nullptr, (uint64_t)c.width * c.height);
    if (sync)
        meter_host("[sync]", nullptr, nullptr, 0);
    uint64_t seq;
    if (kind == cudaMemcpyHostToDevice && !is_pinned(c.src, ext_s)) {
        /* pageable: staged before the call returns */
        auto stage = std::make_shared<std::vector<char>>(c.src, c.src + ext_s);
        Copy2D cc = c;
        e = enqueue(
            st,
            [cc, stage]() {
                Copy2D x = cc;
                x.src = stage->data();
                do_copy(x);
                return cudaSuccess;
            },
            &seq);
    } else if (kind == cudaMemcpyHostToHost) {
        if ((e = run_until(st, UINT64_MAX)) == cudaSuccess)
            do_copy(c);
        return note(e);
    } else {
        e = enqueue(
            st,
            [c]() {
                do_copy(c);
                return cudaSuccess;
            },
            &seq);
        if (e == cudaSuccess && kind == cudaMemcpyDeviceToHost && !is_pinned(c.dst, ext_d))
            e = run_until(st, seq); /* pageable destination: complete on return */
    }
    if (e == cudaSuccess && sync)
        e = run_until(st, seq);
    return note(e);
}

cudaError_t memset_impl(void *p, int v, size_t n, cudaStream_t s, bool sync)
{
    ENTER();
    NEED_DEVICE();
    const char *fn = sync ? "cudaMemset" : "cudaMemsetAsync";
    rkvsim_stream *st = nullptr;
    cudaError_t e = resolve(s, &st, fn);
    if (e != cudaSuccess)
        return e;
    if (n == 0)
        return cudaSuccess;
    if ((e = check_dev_range(p, n, "destination", fn)) != cudaSuccess)
        return e;
    meter_host("[memset]", nullptr, p, n);
    if (sync)
        meter_host("[sync]", nullptr, nullptr, 0);
    uint64_t seq;
    e = enqueue(
        st,
        [p, v, n]() {
            memset(p, v, n);
            return cudaSuccess;
        },
        &seq);
    if (e == cudaSuccess && sync)
        e = run_until(st, seq);
    return note(e);
}

/* ---- cuBLAS ---- */

__attribute__((format(printf, 2, 3))) cublasStatus_t blas_fail(cublasStatus_t s,
                                                               const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    const char *base = s == CUBLAS_STATUS_NOT_INITIALIZED ? "CUBLAS_STATUS_NOT_INITIALIZED"
                       : s == CUBLAS_STATUS_INVALID_VALUE ? "CUBLAS_STATUS_INVALID_VALUE"
                       : s == CUBLAS_STATUS_NOT_SUPPORTED ? "CUBLAS_STATUS_NOT_SUPPORTED"
                       : s == CUBLAS_STATUS_ALLOC_FAILED  ? "CUBLAS_STATUS_ALLOC_FAILED"
                                                          : "CUBLAS_STATUS_EXECUTION_FAILED";
    G.blas_msg = std::string(base) + " (cudasim: " + buf + ")";
    G.blas_code = s;
    return s;
}

size_t type_size(cudaDataType_t t) { return t == CUDA_R_32F ? 4 : 2; }

float load_t(cudaDataType_t t, const void *p, size_t i)
{
    if (t == CUDA_R_32F)
        return ((const float *)p)[i];
    unsigned short u = ((const unsigned short *)p)[i];
    return t == CUDA_R_16F ? __half2float(__ushort_as_half(u))
                           : __bfloat162float(__ushort_as_bfloat16(u));
}

void store_t(cudaDataType_t t, void *p, size_t i, float x)
{
    if (t == CUDA_R_32F)
        ((float *)p)[i] = x;
    else
        ((unsigned short *)p)[i] = t == CUDA_R_16F ? __half_as_ushort(__float2half_rn(x))
                                                   : __bfloat16_as_ushort(__float2bfloat16_rn(x));
}

/* Checks that batch matrices of rows x cols (leading dimension ld, stride
 * st elements) lie in one live device allocation. */
cublasStatus_t operand(const char *name, const void *p, cudaDataType_t t, long long rows,
                       long long cols, long long ld, long long st, long long batch)
{
    if (rows == 0 || cols == 0 || batch == 0)
        return CUBLAS_STATUS_SUCCESS;
    if (st < 0)
        return blas_fail(CUBLAS_STATUS_INVALID_VALUE, "operand %s: negative stride %lld", name,
                         st);
    size_t ext = ((size_t)(batch - 1) * (size_t)st + (size_t)(cols - 1) * (size_t)ld +
                  (size_t)rows) * type_size(t);
    Alloc *al = find_alloc(p, false);
    if (al == nullptr || al->freed || al->dev != G.cur)
        return blas_fail(CUBLAS_STATUS_INVALID_VALUE, "operand %s: %s", name,
                         describe(p).c_str());
    if ((size_t)((const char *)p - al->user) + ext > al->size)
        return blas_fail(CUBLAS_STATUS_INVALID_VALUE,
                         "operand %s: %lld x %lld (ld %lld, stride %lld, batch %lld) spans %zu "
                         "bytes from offset %td of a %zu-byte allocation",
                         name, rows, cols, ld, st, batch, ext, (const char *)p - al->user,
                         al->size);
    return CUBLAS_STATUS_SUCCESS;
}

} // namespace

/* ==== API ==== */

extern "C" {

cudaError_t cudaGetDeviceCount(int *count)
{
    ENTER();
    if (count == nullptr)
        return fail(cudaErrorInvalidValue, "cudaGetDeviceCount: NULL");
    *count = G.ndev;
    if (G.ndev == 0)
        return fail(cudaErrorNoDevice, "RKV_CUDASIM_DEVICES=0");
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int dev)
{
    ENTER();
    if (dev < 0 || dev >= G.ndev)
        return fail(cudaErrorInvalidDevice, "cudaSetDevice(%d) of %d devices", dev, G.ndev);
    G.cur = dev;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *dev)
{
    ENTER();
    NEED_DEVICE();
    if (dev == nullptr)
        return fail(cudaErrorInvalidValue, "cudaGetDevice: NULL");
    *dev = G.cur;
    return cudaSuccess;
}

cudaError_t cudaGetLastError(void)
{
    ENTER();
    cudaError_t e = G.last;
    G.last = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void)
{
    ENTER();
    return G.last;
}

const char *cudaGetErrorString(cudaError_t e)
{
    ENTER();
    if (e != cudaSuccess && e == G.msg_code)
        return G.msg.c_str();
    return base_string(e);
}

const char *cudaGetErrorName(cudaError_t e)
{
    return e == cudaSuccess ? "cudaSuccess" : base_string(e);
}

cudaError_t cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr a, int dev)
{
    ENTER();
    if (dev < 0 || dev >= G.ndev)
        return fail(cudaErrorInvalidDevice, "cudaDeviceGetAttribute: device %d", dev);
    if (v == nullptr)
        return fail(cudaErrorInvalidValue, "cudaDeviceGetAttribute: NULL");
    switch (a) {
    case cudaDevAttrMaxThreadsPerBlock: *v = 1024; break;
    case cudaDevAttrMaxBlockDimX: *v = 1024; break;
    case cudaDevAttrMaxBlockDimY: *v = 1024; break;
    case cudaDevAttrMaxBlockDimZ: *v = 64; break;
    case cudaDevAttrMaxGridDimX: *v = (int)G.max_grid_x; break;
    case cudaDevAttrMaxGridDimY: *v = 65535; break;
    case cudaDevAttrMaxGridDimZ: *v = 65535; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *v = 48 << 10; break;
    case cudaDevAttrWarpSize: *v = 32; break;
    case cudaDevAttrMultiProcessorCount: *v = G.sms; break;
    default: return fail(cudaErrorInvalidValue, "cudaDeviceGetAttribute: attribute %d", (int)a);
    }
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int dev)
{
    ENTER();
    if (dev < 0 || dev >= G.ndev || p == nullptr)
        return fail(cudaErrorInvalidDevice, "cudaGetDeviceProperties: device %d", dev);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "cudasim (CPU simulator)");
    p->totalGlobalMem = G.mem_limit;
    p->sharedMemPerBlock = 48 << 10;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
    p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = (int)G.max_grid_x;
    p->maxGridSize[1] = p->maxGridSize[2] = 65535;
    p->multiProcessorCount = G.sms;
    p->major = 9;
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
    ENTER();
    NEED_DEVICE();
    meter_host("[sync]", nullptr, nullptr, 0);
    return note(sync_device(G.cur));
}

cudaError_t cudaMalloc(void **p, size_t n)
{
    ENTER();
    NEED_DEVICE();
    if (p == nullptr)
        return fail(cudaErrorInvalidValue, "cudaMalloc: NULL");
    meter_host("[malloc]", nullptr, nullptr, 0);
    size_t rounded = (n + ALIGN - 1) / ALIGN * ALIGN;
    if (rounded == 0)
        rounded = ALIGN;
    size_t data = (rounded + PAGE - 1) / PAGE * PAGE;
    if (n > G.mem_limit || G.in_use[(size_t)G.cur] > G.mem_limit - n)
        return fail(cudaErrorMemoryAllocation,
                    "cudaMalloc of %zu bytes: %zu of %zu bytes of device %d in use", n,
                    G.in_use[(size_t)G.cur], G.mem_limit, G.cur);
    char *m = (char *)mmap(nullptr, data + 2 * PAGE, PROT_NONE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED || mprotect(m + PAGE, data, PROT_READ | PROT_WRITE) != 0)
        return fail(cudaErrorMemoryAllocation, "cudaMalloc of %zu bytes: no host memory", n);
    Alloc al;
    al.map = m;
    al.map_len = data + 2 * PAGE;
    al.user = m + PAGE + data - rounded;
    al.size = n;
    al.dev = G.cur;
    al.freed = false;
    memset(m + PAGE, CANARY, data);
    memset(al.user, 0xff, n); /* NaN in f32, f16 and bf16 */
    G.allocs[(uintptr_t)al.user] = al;
    G.in_use[(size_t)G.cur] += n;
    *p = al.user;
    return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
    ENTER();
    NEED_DEVICE();
    if (p == nullptr)
        return cudaSuccess;
    meter_host("[free]", nullptr, nullptr, 0);
    auto it = G.allocs.find((uintptr_t)p);
    if (it == G.allocs.end() || it->second.freed)
        return fail(cudaErrorInvalidValue, "cudaFree: %s%s", describe(p).c_str(),
                    it != G.allocs.end() ? " (double free)" : "");
    Alloc &al = it->second;
    cudaError_t e = sync_device(al.dev); /* cudaFree waits for the device */
    bool intact = slack_ok(al);
    al.freed = true;
    G.in_use[(size_t)al.dev] -= al.size;
    mprotect(al.map, al.map_len, PROT_NONE);
    G.quarantine.push_back((uintptr_t)p);
    G.quarantined += al.map_len;
    while (G.quarantined > ((size_t)1 << 30) && !G.quarantine.empty()) {
        auto old = G.allocs.find(G.quarantine.front());
        G.quarantine.pop_front();
        G.quarantined -= old->second.map_len;
        munmap(old->second.map, old->second.map_len);
        G.allocs.erase(old);
    }
    if (!intact)
        return fail(cudaErrorIllegalAddress,
                    "cudaFree: something wrote outside the %zu-byte device allocation at %p",
                    al.size, p);
    return note(e);
}

cudaError_t cudaHostAlloc(void **p, size_t n, unsigned flags)
{
    ENTER();
    (void)flags;
    if (p == nullptr)
        return fail(cudaErrorInvalidValue, "cudaHostAlloc: NULL");
    void *m = malloc(n ? n : 1);
    if (m == nullptr)
        return fail(cudaErrorMemoryAllocation, "cudaHostAlloc of %zu bytes", n);
    G.pinned[(uintptr_t)m] = n ? n : 1;
    *p = m;
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void **p, size_t n) { return cudaHostAlloc(p, n, 0); }

cudaError_t cudaFreeHost(void *p)
{
    ENTER();
    if (p == nullptr)
        return cudaSuccess;
    auto it = G.pinned.find((uintptr_t)p);
    if (it == G.pinned.end())
        return fail(cudaErrorInvalidValue, "cudaFreeHost: %p is not from cudaHostAlloc", p);
    cudaError_t e = cudaSuccess, e2;
    for (int d = 0; d < G.ndev; d++) /* pending DMA may still use it */
        if ((e2 = sync_device(d)) != cudaSuccess && e == cudaSuccess)
            e = e2;
    G.pinned.erase(it);
    free(p);
    return note(e);
}

cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total_b)
{
    ENTER();
    NEED_DEVICE();
    if (free_b)
        *free_b = G.mem_limit - G.in_use[(size_t)G.cur];
    if (total_b)
        *total_b = G.mem_limit;
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind k)
{
    return copy_impl("cudaMemcpy", Copy2D{(char *)dst, (const char *)src, n, n, n, 1}, k,
                     nullptr, true);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind k,
                            cudaStream_t s)
{
    return copy_impl("cudaMemcpyAsync", Copy2D{(char *)dst, (const char *)src, n, n, n, 1}, k,
                     s, false);
}

cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch,
                         size_t width, size_t height, enum cudaMemcpyKind k)
{
    return copy_impl("cudaMemcpy2D",
                     Copy2D{(char *)dst, (const char *)src, dpitch, spitch, width, height}, k,
                     nullptr, true);
}

cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, enum cudaMemcpyKind k,
                              cudaStream_t s)
{
    return copy_impl("cudaMemcpy2DAsync",
                     Copy2D{(char *)dst, (const char *)src, dpitch, spitch, width, height}, k, s,
                     false);
}

cudaError_t cudaMemcpyBatchAsync(void *const *dsts, const void *const *srcs,
                                 const size_t *sizes, size_t count,
                                 struct cudaMemcpyAttributes *attrs, size_t *attrsIdxs,
                                 size_t numAttrs, cudaStream_t s)
{
    static const char fn[] = "cudaMemcpyBatchAsync";
    ENTER();
    NEED_DEVICE();
    if (s == nullptr)
        return fail(cudaErrorInvalidValue, "%s: the legacy NULL stream", fn);
    if (count == 0 || dsts == nullptr || srcs == nullptr || sizes == nullptr ||
        attrs == nullptr || attrsIdxs == nullptr || numAttrs == 0 || numAttrs > count)
        return fail(cudaErrorInvalidValue, "%s: %zu copies, %zu attributes", fn, count,
                    numAttrs);
    for (size_t k = 0; k < numAttrs; k++) {
        if ((k == 0 && attrsIdxs[0] != 0) || (k > 0 && attrsIdxs[k] <= attrsIdxs[k - 1]) ||
            attrsIdxs[k] >= count)
            return fail(cudaErrorInvalidValue, "%s: attrsIdxs[%zu] = %zu", fn, k,
                        attrsIdxs[k]);
        if (attrs[k].srcAccessOrder < cudaMemcpySrcAccessOrderStream ||
            attrs[k].srcAccessOrder > cudaMemcpySrcAccessOrderAny ||
            (attrs[k].flags & ~(unsigned)cudaMemcpyFlagPreferOverlapWithCompute) != 0)
            return fail(cudaErrorInvalidValue, "%s: attributes %zu", fn, k);
    }
    uint64_t bytes = 0;
    for (size_t i = 0; i < count; i++)
        bytes += sizes[i];
    meter_host("[batch]", nullptr, nullptr, bytes);
    /* each copy as cudaMemcpyAsync of cudaMemcpyDefault (direction from the
     * pointers): a copy that fails leaves the ones before it queued */
    for (size_t i = 0; i < count; i++) {
        cudaError_t e = copy_impl(fn,
                                  Copy2D{(char *)dsts[i], (const char *)srcs[i], sizes[i],
                                         sizes[i], sizes[i], 1},
                                  cudaMemcpyDefault, s, false);
        if (e != cudaSuccess)
            return e;
    }
    return cudaSuccess;
}

cudaError_t cudaMemset(void *p, int v, size_t n) { return memset_impl(p, v, n, nullptr, true); }

cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s)
{
    return memset_impl(p, v, n, s, false);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
    ENTER();
    NEED_DEVICE();
    if (s == nullptr)
        return fail(cudaErrorInvalidValue, "cudaStreamCreate: NULL");
    rkvsim_stream *st = new rkvsim_stream();
    st->dev = G.cur;
    st->nonblocking = (flags & cudaStreamNonBlocking) != 0;
    st->legacy = false;
    st->last = 0;
    G.streams.insert(st);
    *s = st;
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithFlags(s, 0); }

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    ENTER();
    if (s == nullptr || G.streams.count(s) == 0)
        return fail(cudaErrorInvalidResourceHandle, "cudaStreamDestroy: %p", (void *)s);
    cudaError_t e = run_until(s, UINT64_MAX);
    G.streams.erase(s);
    for (rkvsim_event *ev : G.events)
        if (ev->s == s)
            ev->s = nullptr;
    delete s;
    return note(e);
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    ENTER();
    NEED_DEVICE();
    rkvsim_stream *st = nullptr;
    cudaError_t e = resolve(s, &st, "cudaStreamSynchronize");
    if (e != cudaSuccess)
        return e;
    meter_host("[sync]", nullptr, nullptr, 0);
    if (G.deferred)
        copies_run_ahead(st);
    return note(run_until(st, UINT64_MAX));
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags)
{
    ENTER();
    if (e == nullptr)
        return fail(cudaErrorInvalidValue, "cudaEventCreate: NULL");
    if ((flags & ~(unsigned)(cudaEventDisableTiming)) != 0)
        return fail(cudaErrorInvalidValue, "cudaEventCreateWithFlags: flags 0x%x", flags);
    rkvsim_event *ev = new rkvsim_event();
    ev->s = nullptr;
    ev->seq = 0;
    ev->recorded = false;
    ev->notready = false;
    G.events.insert(ev);
    *e = ev;
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, 0); }

cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    ENTER();
    if (G.events.erase(e) == 0)
        return fail(cudaErrorInvalidResourceHandle, "cudaEventDestroy: %p", (void *)e);
    delete e;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    ENTER();
    NEED_DEVICE();
    if (G.events.count(e) == 0)
        return fail(cudaErrorInvalidResourceHandle, "cudaEventRecord: %p", (void *)e);
    rkvsim_stream *st = nullptr;
    cudaError_t r = resolve(s, &st, "cudaEventRecord");
    if (r != cudaSuccess)
        return r;
    e->s = st;
    e->seq = ++G.seq; /* everything queued so far on st */
    e->recorded = true;
    e->notready = G.deferred;
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t e)
{
    ENTER();
    if (G.events.count(e) == 0)
        return fail(cudaErrorInvalidResourceHandle, "cudaEventQuery: %p", (void *)e);
    if (!e->recorded || e->s == nullptr)
        return cudaSuccess;
    if (e->notready) {
        /* recorded as the last error, as the CUDA runtime may: a caller
         * that does not clear it sees its next launch check fail */
        e->notready = false;
        G.last = cudaErrorNotReady;
        return cudaErrorNotReady;
    }
    return note(run_until(e->s, e->seq));
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    ENTER();
    if (G.events.count(e) == 0)
        return fail(cudaErrorInvalidResourceHandle, "cudaEventSynchronize: %p", (void *)e);
    if (!e->recorded || e->s == nullptr)
        return cudaSuccess;
    e->notready = false;
    meter_host("[sync]", nullptr, nullptr, 0);
    return note(run_until(e->s, e->seq));
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags)
{
    ENTER();
    (void)flags;
    rkvsim_stream *st = nullptr;
    cudaError_t r = resolve(s, &st, "cudaStreamWaitEvent");
    if (r != cudaSuccess)
        return r;
    if (G.events.count(e) == 0)
        return fail(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent: %p", (void *)e);
    if (!e->recorded || e->s == nullptr)
        return cudaSuccess;
    rkvsim_stream *on = e->s;
    uint64_t seq = e->seq;
    return note(enqueue(
        st,
        [on, seq]() {
            if (G.streams.count(on) == 0 && !on->legacy)
                return cudaSuccess;
            return run_until(on, seq);
        },
        nullptr, true));
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    ENTER();
    (void)a;
    (void)b;
    if (ms)
        *ms = 0;
    return fail(cudaErrorNotSupported, "cudaEventElapsedTime: the simulator has no clock");
}

/* ---- cuBLAS ---- */

cublasStatus_t cublasCreate(cublasHandle_t *h)
{
    ENTER();
    if (h == nullptr)
        return blas_fail(CUBLAS_STATUS_INVALID_VALUE, "cublasCreate: NULL");
    *h = new rkvsim_blas();
    (*h)->s = nullptr;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t h)
{
    ENTER();
    if (h == nullptr)
        return blas_fail(CUBLAS_STATUS_NOT_INITIALIZED, "cublasDestroy: NULL handle");
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s)
{
    ENTER();
    if (h == nullptr)
        return blas_fail(CUBLAS_STATUS_NOT_INITIALIZED, "cublasSetStream: NULL handle");
    h->s = s;
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusString(cublasStatus_t s)
{
    ENTER();
    if (s != CUBLAS_STATUS_SUCCESS && s == G.blas_code)
        return G.blas_msg.c_str();
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_EXECUTION_FAILED";
    }
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta,
                                          cublasOperation_t tb, int m, int n, int k,
                                          const void *alpha, const void *A, cudaDataType_t at,
                                          int lda, long long sa, const void *B,
                                          cudaDataType_t bt, int ldb, long long sb,
                                          const void *beta, void *C, cudaDataType_t ct, int ldc,
                                          long long sc, int batch, cublasComputeType_t compute,
                                          cublasGemmAlgo_t algo)
{
    ENTER();
    (void)algo;
    if (h == nullptr)
        return blas_fail(CUBLAS_STATUS_NOT_INITIALIZED, "GemmStridedBatchedEx: NULL handle");
    if ((ta != CUBLAS_OP_N && ta != CUBLAS_OP_T && ta != CUBLAS_OP_C) ||
        (tb != CUBLAS_OP_N && tb != CUBLAS_OP_T && tb != CUBLAS_OP_C))
        return blas_fail(CUBLAS_STATUS_INVALID_VALUE, "GemmStridedBatchedEx: bad transpose");
    if (m < 0 || n < 0 || k < 0 || batch < 0)
        return blas_fail(CUBLAS_STATUS_INVALID_VALUE,
                         "GemmStridedBatchedEx: m %d n %d k %d batch %d", m, n, k, batch);
    const long long ra = ta == CUBLAS_OP_N ? m : k, ca = ta == CUBLAS_OP_N ? k : m;
    const long long rb = tb == CUBLAS_OP_N ? k : n, cb = tb == CUBLAS_OP_N ? n : k;
    if (lda < (ra > 1 ? ra : 1) || ldb < (rb > 1 ? rb : 1) || ldc < (m > 1 ? m : 1))
        return blas_fail(CUBLAS_STATUS_INVALID_VALUE,
                         "GemmStridedBatchedEx: lda %d (needs >= %lld), ldb %d (needs >= %lld), "
                         "ldc %d (needs >= %d)",
                         lda, ra, ldb, rb, ldc, m);
    bool type_ok = at == bt && (at == CUDA_R_16F || at == CUDA_R_16BF || at == CUDA_R_32F) &&
                   (ct == CUDA_R_32F || ct == at) && compute == CUBLAS_COMPUTE_32F;
    if (!type_ok)
        return blas_fail(CUBLAS_STATUS_NOT_SUPPORTED,
                         "GemmStridedBatchedEx: types A %d B %d C %d compute %d", (int)at,
                         (int)bt, (int)ct, (int)compute);
    if (alpha == nullptr || beta == nullptr)
        return blas_fail(CUBLAS_STATUS_INVALID_VALUE, "GemmStridedBatchedEx: NULL alpha/beta");
    if (m == 0 || n == 0 || batch == 0)
        return CUBLAS_STATUS_SUCCESS;
    const float al = *(const float *)alpha, be = *(const float *)beta;
    cublasStatus_t s;
    if (k > 0 && ((s = operand("A", A, at, ra, ca, lda, sa, batch)) != CUBLAS_STATUS_SUCCESS ||
                  (s = operand("B", B, bt, rb, cb, ldb, sb, batch)) != CUBLAS_STATUS_SUCCESS))
        return s;
    if ((s = operand("C", C, ct, m, n, ldc, sc, batch)) != CUBLAS_STATUS_SUCCESS)
        return s;
    if (batch > 1 && sc < (long long)(n - 1) * ldc + m)
        return blas_fail(CUBLAS_STATUS_INVALID_VALUE,
                         "GemmStridedBatchedEx: C stride %lld overlaps batches of %d x %d (ldc %d)",
                         sc, m, n, ldc);
    {
        const char *c0 = (const char *)C;
        const char *c1 = c0 + ((size_t)(batch - 1) * sc + (size_t)(n - 1) * ldc + m) * type_size(ct);
        const char *a0 = (const char *)A, *b0 = (const char *)B;
        const char *a1 = a0 + ((size_t)(batch - 1) * sa + (size_t)(ca - 1) * lda + ra) * type_size(at);
        const char *b1 = b0 + ((size_t)(batch - 1) * sb + (size_t)(cb - 1) * ldb + rb) * type_size(bt);
        if (k > 0 && ((c0 < a1 && a0 < c1) || (c0 < b1 && b0 < c1)))
            return blas_fail(CUBLAS_STATUS_INVALID_VALUE,
                             "GemmStridedBatchedEx: C overlaps A or B");
    }
    rkvsim_stream *st = nullptr;
    if (resolve(h->s, &st, "cublasGemmStridedBatchedEx") != cudaSuccess)
        return blas_fail(CUBLAS_STATUS_EXECUTION_FAILED, "the handle's stream is not live");
    auto run = [=]() {
        if (MT.on) { /* an ideal GEMM: every operand once */
            MeterRow *r = meter_row("cublasGemmStridedBatchedEx");
            r->launches++;
            r->rd[meter_region(A)] += (uint64_t)batch * m * k * type_size(at);
            r->rd[meter_region(B)] += (uint64_t)batch * k * n * type_size(bt);
            r->wr[meter_region(C)] += (uint64_t)batch * m * n * type_size(ct);
            if (be != 0.0f)
                r->rd[meter_region(C)] += (uint64_t)batch * m * n * type_size(ct);
        }
        for (int b = 0; b < batch; b++) {
            const char *Ab = (const char *)A + (size_t)b * sa * type_size(at);
            const char *Bb = (const char *)B + (size_t)b * sb * type_size(bt);
            char *Cb = (char *)C + (size_t)b * sc * type_size(ct);
            for (int j = 0; j < n; j++)
                for (int i = 0; i < m; i++) {
                    float acc = 0.0f;
                    for (int l = 0; l < k; l++) {
                        size_t ia = ta == CUBLAS_OP_N ? (size_t)i + (size_t)l * lda
                                                      : (size_t)l + (size_t)i * lda;
                        size_t ib = tb == CUBLAS_OP_N ? (size_t)l + (size_t)j * ldb
                                                      : (size_t)j + (size_t)l * ldb;
                        acc += load_t(at, Ab, ia) * load_t(bt, Bb, ib);
                    }
                    size_t ic = (size_t)i + (size_t)j * ldc;
                    float r = al * acc;
                    if (be != 0.0f)
                        r += be * load_t(ct, Cb, ic);
                    store_t(ct, Cb, ic, r);
                }
        }
        return cudaSuccess;
    };
    if (enqueue(st, run, nullptr, true) != cudaSuccess)
        return blas_fail(CUBLAS_STATUS_EXECUTION_FAILED, "%s", G.msg.c_str());
    return CUBLAS_STATUS_SUCCESS;
}

/* ---- kernels ---- */

void rkvsim_syncthreads(const char *file, int line)
{
    Fibre *f = G.running;
    f->state = F_BAR;
    f->file = file;
    f->line = line;
    yield_to_main(f, false);
}

/* cp.async: copied at issue, or in deferred mode held until a
 * cp.async.wait_group leaves its group no longer pending (so a kernel
 * that reads the destination before waiting reads stale shared memory). */
static void cp_complete(Fibre *f, unsigned k)
{
    for (unsigned i = 0; i < k; i++)
        memcpy(f->cp[i].dst, f->cp[i].src, f->cp[i].n);
    memmove(f->cp, f->cp + k, (f->ncp - k) * sizeof f->cp[0]);
    f->ncp -= k;
}

void rkvsim_cp_async(void *dst, const void *src, unsigned n, const char *file, int line)
{
    Fibre *f = G.running;
    /* the destination's being shared memory is not checked: the statics
     * of template kernels are not in the rkv_sim_shared section */
    if ((n != 4 && n != 8 && n != 16) || (uintptr_t)dst % n != 0 || (uintptr_t)src % n != 0) {
        if (G.kbad.empty()) {
            char buf[256];
            snprintf(buf, sizeof buf, "cp.async of %u bytes to %p from %p at %s:%d: not 4, 8 "
                     "or 16 aligned bytes", n, dst, src, file, line);
            G.kbad = buf;
        }
        return;
    }
    rkvsim_meter_access(src, n, 0);
    if (!G.deferred) {
        memcpy(dst, src, n);
        return;
    }
    if (f->ncp == CP_MAX) /* a copy may land any time before its wait */
        cp_complete(f, 1);
    f->cp[f->ncp++] = CpAsync{dst, src, n, f->cp_group};
}

void rkvsim_cp_commit(void)
{
    G.running->cp_group++;
}

void rkvsim_cp_wait(unsigned pending)
{
    /* groups committed before the last `pending` ones complete; copies
     * not yet committed are in no group and stay pending */
    Fibre *f = G.running;
    unsigned k = 0;
    while (k < f->ncp && f->cp[k].group + pending < f->cp_group)
        k++;
    cp_complete(f, k);
}

uint64_t rkvsim_warp_op(int kind, unsigned mask, uint64_t bits, int arg, int width,
                        const char *file, int line)
{
    Fibre *f = G.running;
    f->state = F_WARP;
    f->kind = kind;
    f->mask = mask;
    f->bits = bits;
    f->arg = arg;
    f->width = width;
    f->file = file;
    f->line = line;
    yield_to_main(f, false);
    return f->result;
}

int rkvsim_check_arg(const void *p)
{
    ENTER();
    if (p == nullptr)
        return 0;
    Alloc *al = find_alloc(p, true);
    return al != nullptr && !al->freed && al->dev == G.cur ? 0 : 1;
}

/* ---- controls ---- */

void rkvsim_set_schedule(int order, uint64_t seed)
{
    ENTER();
    G.order = order;
    G.rng = seed * 2654435761u + 1;
}
int rkvsim_schedule(void)
{
    ENTER();
    return G.order;
}
void rkvsim_set_deferred(int on)
{
    ENTER();
    if (!on)
        for (int d = 0; d < G.ndev; d++)
            (void)sync_device(d);
    G.deferred = on != 0;
}
int rkvsim_deferred(void)
{
    ENTER();
    return G.deferred;
}
void rkvsim_set_max_grid_x(unsigned v)
{
    ENTER();
    G.max_grid_x = v ? v : 0x7fffffffu;
}
void rkvsim_set_mem_limit(size_t bytes)
{
    ENTER();
    G.mem_limit = bytes ? bytes : (size_t)16 << 30;
}
size_t rkvsim_mem_in_use(int device)
{
    ENTER();
    return device >= 0 && device < G.ndev ? G.in_use[(size_t)device] : 0;
}
const char *rkvsim_last_message(void)
{
    ENTER();
    return G.msg.c_str();
}


/* ---- traffic meter ---- */

int rkvsim_metering = 0;

void rkvsim_meter_access(const void *p, size_t n, int write)
{
    /* kernels run under the API lock, one fibre at a time */
    if (MT.cur == nullptr)
        return;
    (write ? MT.cur->wr : MT.cur->rd)[meter_region(p)] += n;
}

void rkvsim_meter_reset(void)
{
    ENTER();
    MT.rows.clear();
    MT.nregions = 1;
}

void rkvsim_meter_enable(int on)
{
    ENTER();
    MT.on = on != 0;
    rkvsim_metering = MT.on;
}

int rkvsim_meter_region(const void *p, size_t n)
{
    ENTER();
    if (MT.nregions >= METER_REGIONS || p == nullptr || n == 0)
        return -1;
    MT.lo[MT.nregions] = (uintptr_t)p;
    MT.hi[MT.nregions] = (uintptr_t)p + n;
    return MT.nregions++;
}

const char *rkvsim_meter_name(size_t i)
{
    ENTER();
    return i < MT.rows.size() ? MT.rows[i].first.c_str() : nullptr;
}

uint64_t rkvsim_meter_get(const char *name, int region, int what)
{
    ENTER();
    uint64_t t = 0;
    for (auto &r : MT.rows) {
        if (name != nullptr && r.first != name)
            continue;
        if (what == RKVSIM_METER_LAUNCHES) {
            t += r.second.launches;
            continue;
        }
        for (int g = 0; g < METER_REGIONS; g++)
            if (region < 0 || region == g)
                t += what == RKVSIM_METER_READ ? r.second.rd[g] : r.second.wr[g];
    }
    return t;
}

} /* extern "C" */

void rkvsim_launch(const char *name, dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                   const rkvsim_body &body, char *sh_begin, char *sh_end, int bad_arg,
                   const void *bad_ptr)
{
    ENTER();
    if (G.ndev == 0) {
        fail(cudaErrorNoDevice, "launch of %s", name);
        return;
    }
    unsigned long long threads = (unsigned long long)block.x * block.y * block.z;
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || threads == 0 || block.x > 1024 ||
        block.y > 1024 || block.z > 64 || threads > 1024 || grid.x > G.max_grid_x ||
        grid.y > 65535 || grid.z > 65535) {
        fail(cudaErrorInvalidConfiguration, "kernel %s: grid (%u,%u,%u) block (%u,%u,%u)", name,
             grid.x, grid.y, grid.z, block.x, block.y, block.z);
        return;
    }
    if (smem > (48u << 10)) {
        fail(cudaErrorInvalidValue, "kernel %s: %zu bytes of dynamic shared memory", name, smem);
        return;
    }
    rkvsim_stream *st = nullptr;
    if (resolve(s, &st, name) != cudaSuccess)
        return;
    if (st->dev != G.cur) {
        fail(cudaErrorInvalidResourceHandle,
             "kernel %s: stream of device %d while device %d is current", name, st->dev, G.cur);
        return;
    }
    if (bad_arg >= 0) {
        fail(cudaErrorIllegalAddress, "kernel %s: argument %d: %s of device %d", name, bad_arg,
             describe(bad_ptr).c_str(), G.cur);
        return;
    }
    auto k = std::make_shared<Kernel>();
    k->name = name;
    k->grid = grid;
    k->block = block;
    k->body = body;
    k->sh_begin = sh_begin;
    k->sh_end = sh_end;
    cudaError_t e = enqueue(st, [k]() { return run_kernel(*k); }, nullptr, true);
    (void)note(e);
}
