/*
 * tier/disk_store.c -- the disk medium: one file of records (layout in
 * tier/disk_record.h), read and written whole with pread / pwrite through
 * a staging buffer the store owns (RKV_REC_ALIGN-aligned, one record).
 *
 * The file: cfg->path, or radixkv-tier.blocks inside it when it is a
 * directory. It is a cache for this store's life, not a database: it is
 * truncated at open (stale records vanish), sized sparse to the capacity,
 * locked (flock, so two stores never share it: RKV_ERR_BUSY) and removed
 * at destroy when tier created it. An existing non-empty file that does
 * not start with tier's file header is refused rather than overwritten.
 *
 * O_DIRECT (cfg->direct_io): asked for at open; when open says EINVAL, or
 * the first I/O does (filesystems that accept the flag but not the I/O),
 * the store clears the flag and goes on buffered -- rkv_store_direct_io()
 * says which is in use. Every offset, length and buffer is a multiple of
 * RKV_REC_ALIGN, which O_DIRECT needs on every common filesystem.
 *
 * io_uring (cfg->io_uring, built with liburing: RKV_HAVE_IO_URING): each
 * record goes through a two-entry ring of the store's, submitted and
 * waited for at once -- the same one-record-at-a-time transfer as
 * pread/pwrite, through the ring (a queue of several records in flight is
 * the next step, when the tree batches them). A kernel that refuses the
 * ring (ENOSYS, EPERM: io_uring disabled) gives pread/pwrite;
 * rkv_store_get_info says which is in use.
 *
 * Invariants: fd >= 0 open read-write; staging holds record_bytes;
 * record_bytes == rkv_record_bytes(block_bytes); ring != NULL iff uring.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef RKV_HAVE_IO_URING
#include <liburing.h>
#endif

#include "common/status.h"
#include "tier/disk_record.h"
#include "tier/store.h"
#include "tier/store_internal.h"

#define TIER_FILE_NAME "radixkv-tier.blocks"

static off_t record_offset(const rkv_store *s, uint32_t slot)
{
    return (off_t)RKV_REC_ALIGN + (off_t)slot * (off_t)s->disk.record_bytes;
}

/* Clears O_DIRECT after the filesystem refused it. 0 if that failed. */
static int drop_direct(rkv_disk_file *d)
{
    int fl = fcntl(d->fd, F_GETFL);
    if (fl < 0 || fcntl(d->fd, F_SETFL, fl & ~O_DIRECT) < 0)
        return 0;
    d->direct = 0;
    d->fallbacks++;
    return 1;
}

/* One read or write of at most n bytes: through the ring when the store
 * has one, else pread / pwrite. -1 and errno on failure, as pread. */
static ssize_t rw_once(rkv_disk_file *d, int write, void *buf, size_t n, off_t off)
{
#ifdef RKV_HAVE_IO_URING
    if (d->uring) {
        struct io_uring *ring = d->ring;
        struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
        if (sqe == NULL) {
            errno = EBUSY;
            return -1;
        }
        unsigned len = n > (1u << 30) ? 1u << 30 : (unsigned)n;
        if (write)
            io_uring_prep_write(sqe, d->fd, buf, len, (uint64_t)off);
        else
            io_uring_prep_read(sqe, d->fd, buf, len, (uint64_t)off);
        int e = io_uring_submit(ring);
        struct io_uring_cqe *cqe = NULL;
        if (e >= 0)
            do
                e = io_uring_wait_cqe(ring, &cqe);
            while (e == -EINTR);
        if (e < 0) {
            errno = -e;
            return -1;
        }
        int res = cqe->res;
        io_uring_cqe_seen(ring, cqe);
        if (res < 0) {
            errno = -res;
            return -1;
        }
        return res;
    }
#endif
    return write ? pwrite(d->fd, buf, n, off) : pread(d->fd, buf, n, off);
}

/* Whole-buffer pread / pwrite; *got gets the bytes read (a read stops
 * short at end of file). EINVAL on the first O_DIRECT I/O falls back to
 * buffered I/O and retries. */
static rkv_status disk_io(rkv_disk_file *d, int write, void *buf, size_t n, off_t off,
                          size_t *got)
{
    size_t done = 0;
    while (done < n) {
        ssize_t r;
        if (d->simulate_einval && d->direct) {
            d->simulate_einval = 0;
            r = -1;
            errno = EINVAL;
        } else {
            r = rw_once(d, write, (char *)buf + done, n - done, off + (off_t)done);
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && errno == EINVAL && d->direct && !d->direct_verified &&
            drop_direct(d))
            continue;
        if (r < 0)
            return rkv_set_error(RKV_ERR_IO, "%s: %s%s of %zu bytes at offset %lld: %s",
                                 d->path, d->uring ? "io_uring " : "",
                                 write ? "pwrite" : "pread", n - done,
                                 (long long)(off + (off_t)done), strerror(errno));
        if (r == 0) {
            if (!write)
                break;
            return rkv_set_error(RKV_ERR_IO, "%s: pwrite wrote nothing at offset %lld",
                                 d->path, (long long)(off + (off_t)done));
        }
        done += (size_t)r;
        if (d->direct)
            d->direct_verified = 1;
    }
    if (write)
        d->writes++;
    else
        d->reads++;
    if (got != NULL)
        *got = done;
    return RKV_OK;
}

static void *disk_stage(rkv_store *s, uint32_t slot)
{
    (void)slot;
    return (char *)s->disk.staging + RKV_REC_HEADER;
}

static rkv_status disk_commit(rkv_store *s, uint32_t slot, uint64_t hash, uint64_t ns)
{
    rkv_record_seal(s->disk.staging, slot, hash, ns, s->block_bytes);
    return disk_io(&s->disk, 1, s->disk.staging, s->disk.record_bytes,
                   record_offset(s, slot), NULL);
}

static rkv_status disk_load(rkv_store *s, uint32_t slot, uint64_t hash, uint64_t ns,
                            const void **payload)
{
    size_t got = 0;
    rkv_status st = disk_io(&s->disk, 0, s->disk.staging, s->disk.record_bytes,
                            record_offset(s, slot), &got);
    if (st == RKV_OK)
        st = rkv_record_verify(s->disk.staging, got, slot, hash, ns, s->block_bytes,
                               s->disk.path);
    if (st == RKV_OK)
        *payload = (const char *)s->disk.staging + RKV_REC_HEADER;
    return st;
}

static void disk_close(rkv_disk_file *d)
{
#ifdef RKV_HAVE_IO_URING
    if (d->ring != NULL)
        io_uring_queue_exit(d->ring);
#endif
    free(d->ring);
    d->ring = NULL;
    d->uring = 0;
    if (d->fd >= 0) {
        if (d->made_file)
            (void)unlink(d->path);
        (void)close(d->fd);
    }
    free(d->path);
    free(d->staging);
    d->fd = -1;
    d->path = NULL;
    d->staging = NULL;
}

static void disk_destroy(rkv_store *s)
{
    disk_close(&s->disk);
}

static rkv_status disk_check(const rkv_store *s)
{
    const rkv_disk_file *d = &s->disk;
    if (d->fd < 0 || d->path == NULL || d->staging == NULL)
        return rkv_set_error(RKV_ERR_CORRUPT, "rkv_store_check: disk store without %s",
                             d->fd < 0 ? "a file" : d->path == NULL ? "a path" : "staging");
    if (d->record_bytes != rkv_record_bytes(s->block_bytes))
        return rkv_set_error(RKV_ERR_CORRUPT,
                             "rkv_store_check: records of %zu bytes for blocks of %zu",
                             d->record_bytes, s->block_bytes);
    if ((d->ring != NULL) != (d->uring != 0))
        return rkv_set_error(RKV_ERR_CORRUPT, "rkv_store_check: io_uring state");
    if (d->direct && !d->direct_tried)
        return rkv_set_error(RKV_ERR_CORRUPT,
                             "rkv_store_check: O_DIRECT in use but never opened");
    return RKV_OK;
}

static const rkv_store_ops disk_ops = {
    disk_stage, disk_commit, disk_load, disk_destroy, disk_check,
};

/* The file's name: path itself, or TIER_FILE_NAME inside a directory. */
static rkv_status file_name(const char *path, char **out)
{
    struct stat st;
    int is_dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
    size_t n = strlen(path) + (is_dir ? sizeof TIER_FILE_NAME + 1 : 0) + 1;
    char *p = malloc(n);
    if (p == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_store_create: out of memory");
    if (is_dir) {
        size_t len = strlen(path);
        int slash = len > 0 && path[len - 1] == '/';
        memcpy(p, path, len);
        if (!slash)
            p[len++] = '/';
        memcpy(p + len, TIER_FILE_NAME, sizeof TIER_FILE_NAME);
    } else {
        memcpy(p, path, strlen(path) + 1);
    }
    *out = p;
    return RKV_OK;
}

/* Refuses a file that exists, is not empty and is not a tier file. */
static rkv_status refuse_foreign(const char *path, int *exists)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    *exists = fd >= 0;
    if (fd < 0)
        return RKV_OK;
    unsigned char head[8];
    ssize_t r = pread(fd, head, sizeof head, 0);
    (void)close(fd);
    if (r == 0 || (r == (ssize_t)sizeof head && rkv_record_is_tier_file(head, 8)))
        return RKV_OK;
    return rkv_set_error(RKV_ERR_INVALID_ARG,
                         "rkv_store_create: %s exists and is not a radixkv tier file; "
                         "refusing to overwrite it",
                         path);
}

rkv_status rkv_disk_store_open(rkv_store *s, const rkv_store_config *cfg)
{
    rkv_disk_file *d = &s->disk;
    memset(d, 0, sizeof *d);
    d->fd = -1;
    d->record_bytes = rkv_record_bytes(s->block_bytes);
    if (d->record_bytes == 0 ||
        (uint64_t)s->cap > (uint64_t)(INT64_MAX / 2) / d->record_bytes)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_store_create: %u records of %zu-byte blocks are too large "
                             "for a file",
                             s->cap, s->block_bytes);
    rkv_status st = file_name(cfg->path, &d->path);
    if (st != RKV_OK)
        return st;
    int exists = 0;
    if ((st = refuse_foreign(d->path, &exists)) != RKV_OK) {
        disk_close(d);
        return st;
    }
    if (posix_memalign(&d->staging, RKV_REC_ALIGN, d->record_bytes) != 0) {
        d->staging = NULL;
        disk_close(d);
        return rkv_set_error(RKV_ERR_NOMEM,
                             "rkv_store_create: cannot allocate a %zu-byte staging buffer",
                             d->record_bytes);
    }
    memset(d->staging, 0, d->record_bytes);
#ifdef RKV_HAVE_IO_URING
    if (cfg->io_uring) {
        d->ring = malloc(sizeof(struct io_uring));
        if (d->ring == NULL) {
            disk_close(d);
            return rkv_set_error(RKV_ERR_NOMEM, "rkv_store_create: out of memory");
        }
        if (io_uring_queue_init(2, d->ring, 0) == 0) {
            d->uring = 1;
        } else { /* the kernel refuses rings: pread/pwrite */
            free(d->ring);
            d->ring = NULL;
        }
    }
#endif
    int flags = O_RDWR | O_CREAT | O_CLOEXEC;
    if (cfg->direct_io) {
        d->fd = open(d->path, flags | O_DIRECT, 0600);
        if (d->fd >= 0) {
            d->direct = d->direct_tried = 1;
        } else if (errno == EINVAL) {
            d->fallbacks++;
        }
    }
    if (d->fd < 0)
        d->fd = open(d->path, flags, 0600);
    if (d->fd < 0) {
        st = rkv_set_error(RKV_ERR_IO, "rkv_store_create: cannot open %s: %s", d->path,
                           strerror(errno));
        disk_close(d);
        return st;
    }
    d->made_file = !exists;
    const char *what = NULL;
    if (flock(d->fd, LOCK_EX | LOCK_NB) != 0)
        what = "flock";
    else if (ftruncate(d->fd, 0) != 0 ||
             ftruncate(d->fd, record_offset(s, s->cap)) != 0)
        what = "ftruncate";
    if (what != NULL) {
        int e = errno;
        st = rkv_set_error(e == EWOULDBLOCK ? RKV_ERR_BUSY : RKV_ERR_IO,
                           "rkv_store_create: %s %s: %s", what, d->path,
                           e == EWOULDBLOCK ? "used by another store" : strerror(e));
        disk_close(d);
        return st;
    }
    rkv_file_header_seal(d->staging, s->cap, s->block_bytes, d->record_bytes);
    st = disk_io(d, 1, d->staging, RKV_REC_ALIGN, 0, NULL);
    memset(d->staging, 0, d->record_bytes);
    d->writes = 0;
    if (st != RKV_OK) {
        disk_close(d);
        return st;
    }
    s->ops = &disk_ops;
    return RKV_OK;
}

int rkv_store_io_uring(const rkv_store *s)
{
    return s != NULL && s->medium == RKV_MEDIUM_DISK && s->disk.uring;
}

int rkv_store_direct_io(const rkv_store *s)
{
    return s != NULL && s->medium == RKV_MEDIUM_DISK && s->disk.direct;
}

const char *rkv_store_path(const rkv_store *s)
{
    return s != NULL && s->medium == RKV_MEDIUM_DISK ? s->disk.path : NULL;
}

void rkv_store_simulate_einval(rkv_store *s)
{
    if (s != NULL && s->medium == RKV_MEDIUM_DISK) {
        s->disk.simulate_einval = 1;
        s->disk.direct_verified = 0; /* as on a filesystem that never took it */
    }
}
