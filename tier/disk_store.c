/*
 * tier/disk_store.c -- the disk medium: one file of records (layout in
 * tier/disk_record.h), read and written whole with pread / pwrite through
 * a staging buffer the store owns (RKV_REC_ALIGN-aligned, one record).
 *
 * The file: cfg->path, or radixkv-tier.blocks inside it when it is a
 * directory. It is a cache for this store's life, not a database: it is
 * truncated at open (stale records vanish), given its header, sized
 * sparse to the capacity, locked (flock, so two stores never share it:
 * RKV_ERR_BUSY) and removed at destroy when the store made it or took it
 * over from an earlier store -- and only if the path still names it.
 *
 * Whoever can write the directory may have put something at the path, so
 * the store creates the file with O_EXCL | O_NOFOLLOW, mode 0600, and
 * takes an existing one only when it is a regular file (no link, FIFO or
 * device: checked on the descriptor, opened O_NOFOLLOW | O_NONBLOCK), of
 * this user, with no group or other permission and one name, and its
 * first page is empty or a tier header -- intact (an earlier store's),
 * torn or zeroed (a crash's), or of an older format. Anything else is
 * refused (RKV_ERR_INVALID_ARG, the reason in the message) and left as
 * it is. rkv_store_info.file_origin says which case it was.
 *
 * O_DIRECT (cfg->direct_io): set on the open file (fcntl); when that
 * says EINVAL, or the first I/O does (filesystems that accept the flag but not the I/O),
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
 * Keyed stores (cfg->mac_key, libsodium): the key is copied into the
 * store and a random file id is drawn at open; records are sealed and
 * verified with both (tier/disk_record.h); both are wiped at close.
 *
 * Warm restart (cfg->warm_restart; tier/README.md "Warm restart"): an
 * intact header whose identity (geometry, page size, layout and model
 * ids, keyed or not -- and for a keyed file its header MAC under this
 * key) equals the store's is reopened as it is: no truncation, the file
 * id kept (records sealed under it verify), the records scanned at the
 * first attach (rkv_store_warm_scan). An intact header of another
 * identity is refused, naming the field; a torn or zeroed one is started
 * afresh (nothing ties its records to a geometry). A warm store never
 * removes its file: the next start is what it is kept for.
 *
 * Invariants: fd >= 0 open read-write; staging holds record_bytes;
 * record_bytes == rkv_record_bytes_tok(block_bytes, page_tokens); ring !=
 * NULL iff uring; pend_tokens holds page_tokens ids when page_tokens > 0;
 * (dev, ino) is the open file's.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef RKV_HAVE_IO_URING
#include <liburing.h>
#endif
#ifdef RKV_HAVE_SODIUM
#include <sodium.h>
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
    rkv_disk_file *d = &s->disk;
    rkv_record_chain chain = {0, 0, NULL};
    if (d->pend_slot == slot && d->pend_tokens != NULL) {
        chain.parent = d->pend_parent;
        chain.ntokens = d->pend_n;
        chain.tokens = d->pend_tokens;
    }
    d->pend_slot = RKV_NO_SLOT;
    rkv_record_seal_chain(d->staging, slot, hash, ns, s->block_bytes, &chain,
                          d->keyed ? &d->auth : NULL);
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
                               s->disk.keyed ? &s->disk.auth : NULL, s->disk.path);
    /* a read may leave the staging buffer (the next commit's record) with
     * another record's token ids: the next commit rewrites them */
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
        /* only the file the store opened: the path may name another one
         * by now (renamed away, replaced), which is not the store's */
        struct stat st;
        if (d->made_file && lstat(d->path, &st) == 0 && st.st_dev == d->dev &&
            st.st_ino == d->ino)
            (void)unlink(d->path);
        (void)close(d->fd);
    }
    free(d->path);
    free(d->staging);
    free(d->pend_tokens);
    d->pend_tokens = NULL;
    d->fd = -1;
    d->path = NULL;
    d->staging = NULL;
#ifdef RKV_HAVE_SODIUM
    sodium_memzero(&d->auth, sizeof d->auth);
#else
    explicit_bzero(&d->auth, sizeof d->auth);
#endif
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
    if (d->record_bytes != rkv_record_bytes_tok(s->block_bytes, d->page_tokens))
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

/* A refusal of an existing path, naming why; nothing of it is touched. */
static rkv_status refuse(const char *path, const char *why)
{
    return rkv_set_error(RKV_ERR_INVALID_ARG,
                         "rkv_store_create: %s %s; refusing to use it (a tier file is a "
                         "regular file of this user, mode 0600, made by radixkv)",
                         path, why);
}

static const char *file_type(mode_t m)
{
    return S_ISLNK(m)    ? "is a symbolic link"
           : S_ISDIR(m)  ? "is a directory"
           : S_ISFIFO(m) ? "is a FIFO"
           : S_ISSOCK(m) ? "is a socket"
           : S_ISCHR(m) || S_ISBLK(m) ? "is a device"
                                      : "is not a regular file";
}

/* The file's owner, mode and link count allow it to be a tier file: no
 * one but this user can have read or planted its records, and truncating
 * it harms no other name. */
static rkv_status check_owner(const rkv_disk_file *d, const struct stat *st)
{
    char why[128];
    if (!S_ISREG(st->st_mode))
        return refuse(d->path, file_type(st->st_mode));
    if (st->st_uid != geteuid()) {
        snprintf(why, sizeof why, "is owned by uid %u, not by this process's %u",
                 (unsigned)st->st_uid, (unsigned)geteuid());
        return refuse(d->path, why);
    }
    if ((st->st_mode & 077) != 0) {
        snprintf(why, sizeof why, "has mode %04o: other users may read or write it",
                 (unsigned)(st->st_mode & 07777));
        return refuse(d->path, why);
    }
    if (st->st_nlink != 1) {
        snprintf(why, sizeof why, "has %lu names (hard links)", (unsigned long)st->st_nlink);
        return refuse(d->path, why);
    }
    return RKV_OK;
}

/* Takes the existing file at d->path, or refuses it. The cheap lstat
 * refuses links, FIFOs and devices before any open (opening a device can
 * act on it); the open (O_NOFOLLOW, O_NONBLOCK: a FIFO swapped in
 * meanwhile does not block it) and fstat of the descriptor decide. Reads
 * the first RKV_REC_ALIGN bytes into staging to classify the content. */
static rkv_status take_existing(rkv_disk_file *d)
{
    struct stat st;
    if (lstat(d->path, &st) != 0)
        return rkv_set_error(RKV_ERR_IO, "rkv_store_create: cannot stat %s: %s", d->path,
                             strerror(errno));
    if (!S_ISREG(st.st_mode))
        return refuse(d->path, file_type(st.st_mode));
    d->fd = open(d->path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (d->fd < 0)
        return errno == ELOOP ? refuse(d->path, "is a symbolic link")
                              : rkv_set_error(RKV_ERR_IO, "rkv_store_create: cannot open "
                                              "%s: %s", d->path, strerror(errno));
    rkv_status rs = RKV_OK;
    if (fstat(d->fd, &st) != 0)
        return rkv_set_error(RKV_ERR_IO, "rkv_store_create: cannot stat %s: %s", d->path,
                             strerror(errno));
    if ((rs = check_owner(d, &st)) != RKV_OK)
        return rs;
    d->dev = st.st_dev;
    d->ino = st.st_ino;
    int fl = fcntl(d->fd, F_GETFL);
    if (fl < 0 || fcntl(d->fd, F_SETFL, fl & ~O_NONBLOCK) != 0)
        return rkv_set_error(RKV_ERR_IO, "rkv_store_create: fcntl %s: %s", d->path,
                             strerror(errno));
    size_t got = 0;
    while (got < RKV_REC_ALIGN) {
        ssize_t r = pread(d->fd, (char *)d->staging + got, RKV_REC_ALIGN - got,
                          (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return rkv_set_error(RKV_ERR_IO, "rkv_store_create: cannot read %s: %s",
                                 d->path, strerror(errno));
        if (r == 0)
            break;
        got += (size_t)r;
    }
    switch (rkv_file_header_classify(d->staging, got)) {
    case RKV_FILE_EMPTY: d->origin = RKV_STORE_FILE_EMPTY; break;
    case RKV_FILE_INTACT: d->origin = RKV_STORE_FILE_REUSED; break;
    case RKV_FILE_TORN:
    case RKV_FILE_ZEROED: d->origin = RKV_STORE_FILE_RECREATED; break;
    default:
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_store_create: %s exists and is not a radixkv tier file; "
                             "refusing to overwrite it",
                             d->path);
    }
    return RKV_OK;
}

/* Creates d->path (O_EXCL: never through a link, never someone else's
 * file, mode 0600) or takes the file there. */
static rkv_status open_file(rkv_disk_file *d)
{
    d->fd = open(d->path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC,
                 0600);
    if (d->fd < 0 && errno == EEXIST)
        return take_existing(d);
    if (d->fd < 0)
        return rkv_set_error(RKV_ERR_IO, "rkv_store_create: cannot create %s: %s", d->path,
                             strerror(errno));
    struct stat st;
    d->made_file = 1;
    d->origin = RKV_STORE_FILE_CREATED;
    if (fstat(d->fd, &st) != 0)
        return rkv_set_error(RKV_ERR_IO, "rkv_store_create: cannot stat %s: %s", d->path,
                             strerror(errno));
    d->dev = st.st_dev;
    d->ino = st.st_ino;
    return RKV_OK;
}

/* A field of the identity that differs: refused, naming it. */
static rkv_status mismatch(const rkv_disk_file *d, const char *field, unsigned long long file,
                           unsigned long long mine)
{
    return rkv_set_error(RKV_ERR_INVALID_ARG,
                         "rkv_store_create: %s was made with %s %llu, this store has %llu "
                         "(another layout or model); refusing to reopen it warm (remove "
                         "it, or create the store with warm_restart 0 to start afresh)",
                         d->path, field, file, mine);
}

/* What a store's file header records of it (the keyed flag and the
 * file id are the seal's): written at create, checked at a warm reopen. */
static void store_identity(const rkv_store *s, rkv_file_identity *fid)
{
    const rkv_disk_file *d = &s->disk;
    *fid = (rkv_file_identity){.capacity = s->cap,
                               .block_bytes = s->block_bytes,
                               .record_bytes = d->record_bytes,
                               .page_tokens = d->page_tokens,
                               .layout_id = d->layout_id,
                               .model_id = d->model_id};
}

/* The intact header in staging (take_existing read it) against the
 * store's identity: RKV_OK (origin WARM; a keyed store adopts the file
 * id its records were sealed under) or a refusal. */
static rkv_status warm_identity(rkv_store *s)
{
    rkv_disk_file *d = &s->disk;
    rkv_file_identity id;
    rkv_file_header_read(d->staging, &id);
    if (id.keyed != (uint32_t)d->keyed)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_store_create: %s was made by %s store, this one is %s; "
                             "refusing to reopen it warm (remove it, or create the store "
                             "with warm_restart 0 to start afresh)",
                             d->path, id.keyed ? "a keyed" : "an unkeyed",
                             d->keyed ? "keyed" : "unkeyed");
    rkv_file_identity mine;
    store_identity(s, &mine);
    /* the file's word against this store's, first difference reported */
    const struct {
        const char *field;
        unsigned long long file, mine;
    } same[] = {
        {"block_bytes", id.block_bytes, mine.block_bytes},
        {"page_tokens", id.page_tokens, mine.page_tokens},
        {"layout_id", id.layout_id, mine.layout_id},
        {"model_id", id.model_id, mine.model_id},
        {"capacity_blocks", id.capacity, mine.capacity},
        {"record_bytes", id.record_bytes, mine.record_bytes},
    };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
        if (same[i].file != same[i].mine)
            return mismatch(d, same[i].field, same[i].file, same[i].mine);
    if (d->keyed) {
        if (!rkv_file_header_mac_ok(d->staging, &d->auth))
            return rkv_set_error(RKV_ERR_INVALID_ARG,
                                 "rkv_store_create: %s: header MAC mismatch (made with "
                                 "another key, or altered); refusing to reopen it warm",
                                 d->path);
        memcpy(d->auth.file_id, id.file_id, RKV_FILE_ID_BYTES);
    }
    d->origin = RKV_STORE_FILE_WARM;
    return RKV_OK;
}

rkv_status rkv_disk_store_open(rkv_store *s, const rkv_store_config *cfg)
{
    rkv_disk_file *d = &s->disk;
    memset(d, 0, sizeof *d);
    d->fd = -1;
    d->pend_slot = RKV_NO_SLOT;
    d->page_tokens = cfg->page_tokens;
    d->layout_id = cfg->layout_id;
    d->model_id = cfg->model_id;
    d->warm = cfg->warm_restart != 0;
    d->record_bytes = rkv_record_bytes_tok(s->block_bytes, d->page_tokens);
    if (d->record_bytes == 0 ||
        (uint64_t)s->cap > (uint64_t)(INT64_MAX / 2) / d->record_bytes)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_store_create: %u records of %zu-byte blocks are too large "
                             "for a file",
                             s->cap, s->block_bytes);
    rkv_status st = file_name(cfg->path, &d->path);
    if (st != RKV_OK)
        return st;
    if (cfg->mac_key != NULL) {
#ifdef RKV_HAVE_SODIUM
        if (sodium_init() < 0) {
            disk_close(d);
            return rkv_set_error(RKV_ERR_UNSUPPORTED,
                                 "rkv_store_create: libsodium failed to initialise");
        }
        memcpy(d->auth.key, cfg->mac_key, RKV_STORE_MAC_KEY_BYTES);
        /* a fresh identity per store: records of another file, or of
         * this path's earlier life, fail the MAC */
        randombytes_buf(d->auth.file_id, RKV_FILE_ID_BYTES);
        d->keyed = 1;
#endif
    }
    if (posix_memalign(&d->staging, RKV_REC_ALIGN, d->record_bytes) != 0) {
        d->staging = NULL;
        disk_close(d);
        return rkv_set_error(RKV_ERR_NOMEM,
                             "rkv_store_create: cannot allocate a %zu-byte staging buffer",
                             d->record_bytes);
    }
    memset(d->staging, 0, d->record_bytes);
    if (d->page_tokens > 0 &&
        (d->pend_tokens = calloc(d->page_tokens, sizeof *d->pend_tokens)) == NULL) {
        disk_close(d);
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_store_create: out of memory");
    }
    if ((st = open_file(d)) != RKV_OK) {
        disk_close(d);
        return st;
    }
    if (d->warm && d->origin == RKV_STORE_FILE_REUSED &&
        (st = warm_identity(s)) != RKV_OK) {
        d->made_file = 0; /* refused: left as it is */
        disk_close(d);
        return st;
    }
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
    if (cfg->direct_io) {
        /* set after the open so that a filesystem refusing O_DIRECT
         * (EINVAL) cannot leave a half-made file behind an O_EXCL open */
        int fl = fcntl(d->fd, F_GETFL);
        if (fl >= 0 && fcntl(d->fd, F_SETFL, fl | O_DIRECT) == 0)
            d->direct = d->direct_tried = 1;
        else
            d->fallbacks++;
    }
    const char *what = NULL;
    if (flock(d->fd, LOCK_EX | LOCK_NB) != 0)
        what = "flock";
    if (what == NULL)
        /* the lock is ours: a file an earlier store left is removed at
         * close like one this store made -- unless warm, whose file is
         * kept for the next start */
        d->made_file = d->origin != RKV_STORE_FILE_EMPTY && !d->warm;
    if (what == NULL && d->origin == RKV_STORE_FILE_WARM) {
        /* reopened: records stay, sized as the header says */
        d->warm_pending = 1;
        d->writes = 0;
        memset(d->staging, 0, d->record_bytes);
        if (ftruncate(d->fd, record_offset(s, s->cap)) != 0) {
            st = rkv_set_error(RKV_ERR_IO, "rkv_store_create: ftruncate %s: %s", d->path,
                               strerror(errno));
            disk_close(d);
            return st;
        }
        s->ops = &disk_ops;
        return RKV_OK;
    }
    /* the header goes in before the file is sized: a crash leaves an
     * empty file, a torn header or an intact one, never a file-sized run
     * of zeros after a valid-looking start */
    if (what == NULL && ftruncate(d->fd, 0) != 0)
        what = "ftruncate";
    if (what != NULL) {
        int e = errno;
        st = rkv_set_error(e == EWOULDBLOCK ? RKV_ERR_BUSY : RKV_ERR_IO,
                           "rkv_store_create: %s %s: %s", what, d->path,
                           e == EWOULDBLOCK ? "used by another store" : strerror(e));
        disk_close(d);
        return st;
    }
    rkv_file_identity fid;
    store_identity(s, &fid);
    rkv_file_header_seal_id(d->staging, &fid, d->keyed ? &d->auth : NULL);
    st = disk_io(d, 1, d->staging, RKV_REC_ALIGN, 0, NULL);
    memset(d->staging, 0, d->record_bytes);
    d->writes = 0;
    if (st == RKV_OK && ftruncate(d->fd, record_offset(s, s->cap)) != 0)
        st = rkv_set_error(RKV_ERR_IO, "rkv_store_create: ftruncate %s to %lld bytes: %s",
                           d->path, (long long)record_offset(s, s->cap), strerror(errno));
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

void rkv_store_set_chain(rkv_store *s, uint32_t slot, uint64_t parent,
                         const int32_t *tokens, uint32_t n)
{
    if (s == NULL || s->medium != RKV_MEDIUM_DISK || s->ops == NULL ||
        s->disk.pend_tokens == NULL || n > s->disk.page_tokens || tokens == NULL)
        return;
    rkv_disk_file *d = &s->disk;
    memcpy(d->pend_tokens, tokens, (size_t)n * sizeof *tokens);
    d->pend_n = n;
    d->pend_parent = parent;
    d->pend_slot = slot;
}

uint32_t rkv_store_page_tokens(const rkv_store *s)
{
    return s != NULL && s->medium == RKV_MEDIUM_DISK && s->ops != NULL ? s->disk.page_tokens
                                                                       : 0;
}

int rkv_store_warm_pending(const rkv_store *s)
{
    return s != NULL && s->medium == RKV_MEDIUM_DISK && s->ops != NULL &&
           s->disk.warm_pending;
}

void rkv_store_warm_dropped(rkv_store *s, uint64_t n)
{
    if (s != NULL && s->medium == RKV_MEDIUM_DISK)
        s->disk.warm_dropped += n;
}

/* The first slot at or after `from` whose record may hold data (holes of
 * the sparse file are never-written slots); cap when none. */
static uint32_t next_data_slot(rkv_store *s, uint32_t from)
{
    off_t off = record_offset(s, from);
    off_t data = lseek(s->disk.fd, off, SEEK_DATA);
    if (data < 0)
        return errno == ENXIO ? s->cap : from; /* no SEEK_DATA: every slot */
    if (data <= off)
        return from;
    uint64_t slot = (uint64_t)(data - RKV_REC_ALIGN) / s->disk.record_bytes;
    return slot >= s->cap ? s->cap : (uint32_t)slot;
}

static int all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != 0)
            return 0;
    return 1;
}

rkv_status rkv_store_warm_scan(rkv_store *s, rkv_warm_fn fn, void *ctx)
{
    if (s == NULL || fn == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_store_warm_scan: NULL argument");
    if (!rkv_store_warm_pending(s))
        return RKV_OK;
    rkv_disk_file *d = &s->disk;
    d->warm_pending = 0;
    d->pend_slot = RKV_NO_SLOT;
    const rkv_record_auth *auth = d->keyed ? &d->auth : NULL;
    for (uint32_t slot = next_data_slot(s, 0); slot < s->cap;
         slot = next_data_slot(s, slot + 1)) {
        size_t got = 0;
        rkv_status st = rkv_store_inject(s, "warm scan read");
        if (st == RKV_OK)
            st = disk_io(d, 0, d->staging, d->record_bytes, record_offset(s, slot), &got);
        if (st != RKV_OK) {
            d->warm_skipped++;
            continue;
        }
        /* a slot never written reads as zeros: not a record */
        if (got < RKV_REC_HEADER || all_zero(d->staging, RKV_REC_HEADER))
            continue;
        rkv_record_meta m;
        if (rkv_record_verify_any(d->staging, got, slot, s->block_bytes, d->page_tokens,
                                  auth, d->path, &m) != RKV_OK) {
            d->warm_skipped++;
            continue;
        }
        rkv_record_tokens(d->staging, s->block_bytes, m.chain.ntokens, d->pend_tokens);
        if ((st = rkv_store_slot_claim(s, slot, m.hash, m.ns)) != RKV_OK)
            return st;
        d->warm_records++;
        rkv_warm_rec r = {slot, m.hash, m.ns, m.chain.parent, m.chain.ntokens,
                          d->pend_tokens};
        if (fn(ctx, &r) != 0) {
            /* not taken: the slot goes back (the rest stays unscanned) */
            (void)rkv_store_slot_free(s, slot);
            d->warm_records--;
            d->warm_dropped++;
            return rkv_set_error(RKV_ERR_NOMEM,
                                 "rkv_store_warm_scan: out of memory for the records of %s",
                                 d->path);
        }
    }
    memset(d->staging, 0, d->record_bytes);
    return RKV_OK;
}
