/*
 * bench/tier_bench.c -- load/store throughput of tier/'s block stores
 * against plain memcpy of the same bytes, in one run.
 *
 * Setup: a host pool of --blocks blocks (default 64) of a 7B-class layout
 * (--layers 32 x K,V x page 16 x 8 KV heads x head_dim 128, f16: 2 MiB a
 * block, scattered over 64 per-layer segments of 32 KiB as the pool's NHD
 * layout puts them), and stores of the same capacity.
 *   memcpy      plain memcpy of the same bytes, block by block, between two
 *               contiguous buffers (the floor any copy pays);
 *   pool copy   rkv_pool_copy_to_host / _from_host of one block at a time
 *               into / out of a plain buffer: the pool's gather/scatter
 *               alone, so the host store's own cost is the difference;
 *   host store  pool -> host slot (rkv_store_write_from_pool) and back
 *               (rkv_store_read_to_pool): the pool's gather/scatter plus
 *               the store's checks;
 *   disk store  the same on a file in a fresh directory under --dir
 *               (default /tmp), with O_DIRECT and buffered, through
 *               pread/pwrite and (built with liburing) io_uring: every block is
 *               a record (64-byte header + XXH3 of the payload + padding)
 *               written with one pwrite and read back with one pread and
 *               verified. Buffered reads of a file just written come from
 *               the page cache: that column measures the kernel copy +
 *               checksum, not the device.
 *               "keyed": buffered pread with a keyed store (rkv_store_config
 *               .mac_key, built with libsodium): a BLAKE2b MAC per record
 *               in place of the XXH3 checksums.
 *   metadata    a metadata-only store (block_bytes 0): ns per write+read,
 *               the cost the simulator pays per tier transfer.
 * --server-kv nhd|hnd puts the pool over server-owned buffers instead
 * (rkv_pool_create_external, one allocation per layer): nhd is SGLang's
 * [2][slots][H][D] (a block's segment is one run, as in the pool's own
 * layout), hnd vLLM's FlashInfer [blocks][2][H][page][D] (one run per token
 * and head); the pool copy and store columns then show what addressing the
 * server's bytes costs.
 * Each figure is the best of --reps passes (default 5); memcpy and the host
 * store alternate within each pass. GB/s are 1e9
 * bytes/s of KV payload; ratios are against memcpy of the same run.
 * Figures vary with the machine and its load (printed from /proc/loadavg);
 * nothing here passes or fails on time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench_util.h"
#include "radixkv.h"
#include "tier/store.h"

typedef struct bench_args {
    uint64_t blocks, layers, reps;
    const char *dir;
    const char *server_kv; /* NULL: the pool's own memory; "nhd" / "hnd" */
} bench_args;

static void die(const char *what)
{
    fprintf(stderr, "tier_bench: %s: %s\n", what, rkv_last_error());
    exit(1);
}

static double gbps(size_t bytes, double ns)
{
    return ns > 0 ? (double)bytes / ns : 0.0;
}

/* best-of-reps ns of a store pass (write every block) and a load pass */
typedef struct pass_ns {
    double store, load;
} pass_ns;

/* Keeps the faster store and the faster load of the two (best of reps). */
static void keep_fastest(pass_ns *best, double store, double load)
{
    if (store < best->store)
        best->store = store;
    if (load < best->load)
        best->load = load;
}

static pass_ns run_store(rkv_store *s, rkv_pool *pool, const rkv_block_id *b,
                         uint32_t n, uint64_t reps)
{
    pass_ns best = {1e300, 1e300};
    uint32_t *slot = malloc(n * sizeof *slot);
    for (uint32_t i = 0; i < n; i++)
        if (rkv_store_slot_alloc(s, &slot[i]) != RKV_OK)
            die("slot_alloc");
    for (uint64_t r = 0; r < reps; r++) {
        double t0 = rkv_bench_now_ns();
        for (uint32_t i = 0; i < n; i++)
            if (rkv_store_write_from_pool(s, slot[i], pool, b[i], 1000 + i, 1) != RKV_OK)
                die("write_from_pool");
        double t1 = rkv_bench_now_ns();
        /* read into the other half's blocks: a real load target */
        for (uint32_t i = 0; i < n; i++)
            if (rkv_store_read_to_pool(s, slot[i], pool, b[n + i], 1000 + i, 1) != RKV_OK)
                die("read_to_pool");
        double t2 = rkv_bench_now_ns();
        keep_fastest(&best, t1 - t0, t2 - t1);
    }
    if (rkv_store_check(s) != RKV_OK)
        die("rkv_store_check");
    for (uint32_t i = 0; i < n; i++)
        (void)rkv_store_slot_free(s, slot[i]);
    free(slot);
    return best;
}

static double load_avg(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f != NULL) {
        if (fscanf(f, "%lf", &l) != 1)
            l = -1;
        fclose(f);
    }
    return l;
}

static void usage(void)
{
    fprintf(stderr, "usage: tier_bench [--blocks N] [--layers L] [--reps R] [--dir DIR]"
                    " [--server-kv nhd|hnd]\n");
    exit(2);
}

static bench_args parse(int argc, char **argv)
{
    bench_args a = {64, 32, 5, "/tmp", NULL};
    for (int i = 1; i < argc; i++) {
        uint64_t *dst = NULL;
        if (strcmp(argv[i], "--blocks") == 0)
            dst = &a.blocks;
        else if (strcmp(argv[i], "--layers") == 0)
            dst = &a.layers;
        else if (strcmp(argv[i], "--reps") == 0)
            dst = &a.reps;
        else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
            a.dir = argv[++i];
            continue;
        } else if (strcmp(argv[i], "--server-kv") == 0 && i + 1 < argc) {
            a.server_kv = argv[++i];
            if (strcmp(a.server_kv, "nhd") != 0 && strcmp(a.server_kv, "hnd") != 0)
                usage();
            continue;
        } else
            usage();
        if (i + 1 >= argc || !rkv_bench_parse_u64(argv[++i], dst) || *dst == 0 ||
            *dst > 1u << 20)
            usage();
    }
    return a;
}

int main(int argc, char **argv)
{
    bench_args a = parse(argc, argv);
    uint32_t n = (uint32_t)a.blocks;
    rkv_pool_config pc;
    rkv_pool_config_init(&pc);
    pc.num_blocks = 2 * n;
    pc.page_size = 16;
    pc.num_layers = (uint32_t)a.layers;
    pc.num_kv_heads = 8;
    pc.head_dim = 128;
    pc.dtype = RKV_DTYPE_F16;
    rkv_pool *pool = NULL;
    void **kvmem = NULL, **kp = NULL, **vp = NULL;
    if (a.server_kv == NULL) {
        if (rkv_pool_create(&pc, &pool) != RKV_OK)
            die("rkv_pool_create");
    } else {
        /* the server's buffers: one per layer, K and V inside it */
        const size_t es = 2, row = (size_t)pc.head_dim * es;
        const size_t P = pc.page_size, H = pc.num_kv_heads, NB = pc.num_blocks;
        size_t layer = 2 * NB * P * H * row, vofs;
        rkv_kv_buffers kb;
        if (strcmp(a.server_kv, "nhd") == 0) {
            kb.head_stride = row;
            kb.token_stride = H * row;
            kb.block_stride = P * H * row;
            vofs = NB * P * H * row;
        } else {
            kb.token_stride = row;
            kb.head_stride = P * row;
            kb.block_stride = 2 * H * P * row;
            vofs = H * P * row;
        }
        kvmem = calloc(pc.num_layers, sizeof *kvmem);
        kp = calloc(pc.num_layers, sizeof *kp);
        vp = calloc(pc.num_layers, sizeof *vp);
        if (kvmem == NULL || kp == NULL || vp == NULL)
            die("malloc");
        for (uint32_t l = 0; l < pc.num_layers; l++) {
            if (posix_memalign(&kvmem[l], 256, layer) != 0)
                die("malloc");
            memset(kvmem[l], 1, layer);
            kp[l] = kvmem[l];
            vp[l] = (char *)kvmem[l] + vofs;
        }
        kb.k = kp;
        kb.v = vp;
        if (rkv_pool_create_external(&pc, &kb, &pool) != RKV_OK)
            die("rkv_pool_create_external");
        printf("pool over server-owned buffers, layout %s\n", a.server_kv);
    }
    size_t bb = rkv_pool_bytes_per_block(pool);
    size_t total = bb * n;
    rkv_block_id *b = malloc(2 * n * sizeof *b);
    if (rkv_pool_alloc_n(pool, 2 * n, b) != RKV_OK)
        die("rkv_pool_alloc_n");
    /* non-zero KV so no page is a shared zero page */
    unsigned char *src = malloc(total), *dst = malloc(total);
    if (src == NULL || dst == NULL)
        die("malloc");
    for (size_t i = 0; i < total; i++)
        src[i] = (unsigned char)(i * 2654435761u >> 13);
    if (rkv_pool_copy_from_host(pool, n, b, src) != RKV_OK)
        die("fill");
    memset(dst, 1, total);

    printf("tier_bench: %u blocks of %zu bytes (%.0f MiB), layers %llu, best of %llu; "
           "load average %.2f\n",
           n, bb, (double)total / (1 << 20), (unsigned long long)a.layers,
           (unsigned long long)a.reps, load_avg());

    rkv_store_config c;
    rkv_store_config_init(&c, RKV_MEDIUM_HOST);
    c.capacity_blocks = n;
    c.block_bytes = bb;
    rkv_store *h = NULL;
    if (rkv_store_create(&c, &h) != RKV_OK)
        die("host store");
    /* memcpy and the host store alternate within each rep, so that the
     * load of a shared machine falls on both alike */
    double memcpy_ns = 1e300;
    pass_ns p = {1e300, 1e300}, pc_ns = {1e300, 1e300};
    for (uint64_t r = 0; r < a.reps; r++) {
        double t0 = rkv_bench_now_ns();
        for (uint32_t i = 0; i < n; i++)
            memcpy(dst + (size_t)i * bb, src + (size_t)i * bb, bb);
        double t = rkv_bench_now_ns() - t0;
        if (t < memcpy_ns)
            memcpy_ns = t;
        /* the pool's own gather / scatter into a plain buffer: what the
         * host store costs beyond it is the store's */
        t0 = rkv_bench_now_ns();
        for (uint32_t i = 0; i < n; i++)
            if (rkv_pool_copy_to_host(pool, 1, &b[i], dst + (size_t)i * bb) != RKV_OK)
                die("copy_to_host");
        double t1 = rkv_bench_now_ns();
        for (uint32_t i = 0; i < n; i++)
            if (rkv_pool_copy_from_host(pool, 1, &b[n + i], dst + (size_t)i * bb) != RKV_OK)
                die("copy_from_host");
        double t2 = rkv_bench_now_ns();
        keep_fastest(&pc_ns, t1 - t0, t2 - t1);
        pass_ns q = run_store(h, pool, b, n, 1);
        keep_fastest(&p, q.store, q.load);
    }
    if (memcmp(dst, src, total) != 0)
        die("memcpy check");
    double base = gbps(total, memcpy_ns);
    printf("%-26s %10s %10s %12s %12s\n", "", "store GB/s", "load GB/s", "store/memcpy",
           "load/memcpy");
    printf("%-26s %10.2f %10.2f %12s %12s\n", "memcpy (same bytes)", base, base, "1.00",
           "1.00");
    printf("%-26s %10.2f %10.2f %12.2f %12.2f\n", "pool copy to/from buffer",
           gbps(total, pc_ns.store), gbps(total, pc_ns.load), gbps(total, pc_ns.store) / base,
           gbps(total, pc_ns.load) / base);
    printf("%-26s %10.2f %10.2f %12.2f %12.2f\n",
           rkv_store_pinned(h) ? "host store (pinned)" : "host store (aligned)",
           gbps(total, p.store), gbps(total, p.load), gbps(total, p.store) / base,
           gbps(total, p.load) / base);
    rkv_store_destroy(h);

    char dir[4096];
    snprintf(dir, sizeof dir, "%s/rkv-tier-bench-XXXXXX", a.dir);
    if (mkdtemp(dir) == NULL) {
        perror("tier_bench: mkdtemp");
        return 1;
    }
    /* modes 0-3: O_DIRECT or buffered x io_uring or pread; 4: buffered,
     * pread, keyed (a BLAKE2b MAC per record instead of XXH3) */
    static const unsigned char key[RKV_STORE_MAC_KEY_BYTES] = {0x6b, 0x65, 0x79};
#ifdef RKV_HAVE_SODIUM
    const int modes = 5;
#else
    const int modes = 4;
#endif
    for (int mode = 0; mode < modes; mode++) {
        int direct = mode < 2, uring = mode < 4 && (mode & 1), keyed = mode == 4;
        rkv_store_config_init(&c, RKV_MEDIUM_DISK);
        c.capacity_blocks = n;
        c.block_bytes = bb;
        c.path = dir;
        c.direct_io = direct;
        c.io_uring = uring;
        c.mac_key = keyed ? key : NULL;
        rkv_store *d = NULL;
        if (rkv_store_create(&c, &d) != RKV_OK)
            die("disk store");
        if (uring && !rkv_store_io_uring(d)) { /* not built with it, or refused */
            rkv_store_destroy(d);
            continue;
        }
        p = run_store(d, pool, b, n, a.reps);
        char name[64];
        snprintf(name, sizeof name, "disk (%s, %s)",
                 rkv_store_direct_io(d) ? "O_DIRECT" : direct ? "buffered*" : "buffered",
                 keyed ? "keyed" : uring ? "io_uring" : "pread");
        printf("%-26s %10.2f %10.2f %12.2f %12.2f\n", name, gbps(total, p.store),
               gbps(total, p.load), gbps(total, p.store) / base, gbps(total, p.load) / base);
        rkv_store_destroy(d);
    }
    (void)rmdir(dir);
    printf("(* O_DIRECT refused by the filesystem; disk files under %s)\n", a.dir);

    /* metadata only: the per-transfer cost the simulator pays */
    rkv_pool_config_init(&pc);
    pc.num_blocks = 1024;
    rkv_pool *mpool = NULL;
    if (rkv_pool_create(&pc, &mpool) != RKV_OK)
        die("metadata pool");
    rkv_block_id mb[2048];
    if (rkv_pool_alloc_n(mpool, 1024, mb) != RKV_OK)
        die("metadata alloc");
    rkv_store_config_init(&c, RKV_MEDIUM_HOST);
    c.capacity_blocks = 512;
    rkv_store *m = NULL;
    if (rkv_store_create(&c, &m) != RKV_OK)
        die("metadata store");
    double best = 1e300;
    for (int r = 0; r < 20; r++) {
        pass_ns q = run_store(m, mpool, mb, 512, 1);
        if (q.store + q.load < best)
            best = q.store + q.load;
    }
    printf("%-26s %.1f ns per write + read (slot alloc/free not timed)\n",
           "metadata-only store", best / 512);
    rkv_store_destroy(m);
    rkv_pool_destroy(mpool);

    free(src);
    free(dst);
    free(b);
    rkv_pool_destroy(pool);
    for (uint32_t l = 0; kvmem != NULL && l < (uint32_t)a.layers; l++)
        free(kvmem[l]);
    free(kvmem);
    free(kp);
    free(vp);
    return 0;
}
