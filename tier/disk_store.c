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
 * Invariants: fd >= 0 open read-write; staging holds record_bytes;
 * record_bytes == rkv_record_bytes(block_bytes).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

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
        } else if (write) {
            r = pwrite(d->fd, (char *)buf + done, n - done, off + (off_t)done);
        } else {
            r = pread(d->fd, (char *)buf + done, n - done, off + (off_t)done);
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && errno == EINVAL && d->direct && !d->direct_verified &&
            drop_direct(d))
            continue;
        if (r < 0)
            return rkv_set_error(RKV_ERR_IO, "%s: %s of %zu bytes at offset %lld: %s",
                                 d->path, write ? "pwrite" : "pread", n - done,
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
