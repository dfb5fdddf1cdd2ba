/*
 * tests/test_store_file.c -- the disk store's file as seen by other users
 * and by later runs (tier/disk_store.c, tier/disk_record.c): which paths
 * it refuses (links, FIFOs, files of other users or readable by them,
 * foreign content), the mode it creates, what it removes at destroy, what
 * it does with a file an earlier store or a crash left behind, and the
 * bytes of its magic.
 *
 * Every test works in a fresh directory under /tmp that it removes; what
 * a store must leave in place is checked by name and content.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/kv_pool.h"
#include "tier/disk_record.h"
#include "tier/store.h"
#include "radixkv.h"

#define OK(expr) cr_assert_eq((expr), RKV_OK, "%s: %s", #expr, rkv_last_error())
#define IS(expr, st) cr_assert_eq((expr), (st), "%s gave %d (%s), expected %s", #expr, \
                                  (int)(expr), rkv_last_error(), #st)

#define BB 4096u /* block bytes: one page of payload */

static char *make_dir(void)
{
    char *d = malloc(64);
    strcpy(d, "/tmp/rkv-file-XXXXXX");
    cr_assert_not_null(mkdtemp(d));
    return d;
}

/* Removes the names the tests make, then the directory (which must then
 * be empty: a store left nothing else behind). */
static void remove_dir(char *d)
{
    static const char *names[] = {"f", "g", "link", "target", "fifo", "other"};
    char p[256];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", d, names[i]);
        (void)unlink(p);
    }
    cr_assert_eq(rmdir(d), 0, "rmdir %s: %s", d, strerror(errno));
    free(d);
}

static void path_in(char *out, size_t n, const char *dir, const char *name)
{
    snprintf(out, n, "%s/%s", dir, name);
}

static void cfg_disk(rkv_store_config *c, const char *path)
{
    rkv_store_config_init(c, RKV_MEDIUM_DISK);
    c->capacity_blocks = 3;
    c->block_bytes = BB;
    c->path = path;
}

/* Most tests' start: a fresh directory (returned, for remove_dir), the path
 * "f" in it (into f, 256 bytes) and a disk store config for that path. */
static char *dir_with_cfg(char *f, rkv_store_config *c)
{
    char *dir = make_dir();
    path_in(f, 256, dir, "f");
    cfg_disk(c, f);
    return dir;
}

/* Opens the store of c, which must succeed and say how it took the file. */
static rkv_store *open_as(const rkv_store_config *c, int origin)
{
    rkv_store *s = NULL;
    OK(rkv_store_create(c, &s));
    rkv_store_info info;
    OK(rkv_store_get_info(s, &info));
    cr_assert_eq(info.file_origin, origin, "origin %d", info.file_origin);
    return s;
}

/* Writes n bytes of buf to a new file path with the given mode. */
static void write_file(const char *path, const void *buf, size_t n, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    cr_assert_geq(fd, 0, "create %s: %s", path, strerror(errno));
    cr_assert_eq(fchmod(fd, mode), 0); /* past the umask */
    cr_assert_eq(write(fd, buf, n), (ssize_t)n);
    close(fd);
}

static off_t file_size(const char *path)
{
    struct stat st;
    cr_assert_eq(stat(path, &st), 0, "stat %s: %s", path, strerror(errno));
    return st.st_size;
}

static int exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* ---- the magic ---------------------------------------------------------- */

/* The file and its records start with the magic the format documents. */
Test(store_file, magic_spelling)
{
    char *dir = make_dir(), f[256];
    path_in(f, sizeof f, dir, "f");
    rkv_pool_config pc;
    rkv_test_kv_pool_config(&pc, 2, 2);
    rkv_pool *pool = NULL;
    OK(rkv_pool_create(&pc, &pool));
    rkv_store_config c;
    cfg_disk(&c, f);
    c.block_bytes = rkv_pool_bytes_per_block(pool);
    rkv_store *s = NULL;
    OK(rkv_store_create(&c, &s));
    rkv_block_id b;
    uint32_t slot;
    OK(rkv_pool_alloc(pool, &b));
    OK(rkv_store_slot_alloc(s, &slot));
    OK(rkv_store_write_from_pool(s, slot, pool, b, 0x77, 1));
    unsigned char head[8], rec[8];
    int fd = open(f, O_RDONLY);
    cr_assert_geq(fd, 0);
    cr_assert_eq(pread(fd, head, 8, 0), 8);
    cr_assert_eq(pread(fd, rec, 8, RKV_REC_ALIGN + (off_t)slot * (off_t)rkv_record_bytes(c.block_bytes)), 8);
    close(fd);
    cr_assert(memcmp(head, "RKVTIERF", 8) == 0, "file magic %.8s", (const char *)head);
    cr_assert(memcmp(rec, "RKVTIER1", 8) == 0, "record magic %.8s", (const char *)rec);
    rkv_store_destroy(s);
    rkv_pool_destroy(pool);
    remove_dir(dir);
}

/* ---- paths that are not the store's to take ------------------------------ */

/* A FIFO at the path: refused at once (opening it for reading would wait
 * for a writer forever). The timeout only guards against that hang. */
Test(store_file, refuses_fifo, .timeout = 60)
{
    char *dir = make_dir(), f[256];
    path_in(f, sizeof f, dir, "fifo");
    cr_assert_eq(mkfifo(f, 0600), 0);
    rkv_store_config c;
    cfg_disk(&c, f);
    rkv_store *s = NULL;
    IS(rkv_store_create(&c, &s), RKV_ERR_INVALID_ARG);
    cr_assert_null(s);
    cr_assert(strstr(rkv_last_error(), "FIFO") != NULL, "%s", rkv_last_error());
    struct stat st;
    cr_assert_eq(lstat(f, &st), 0);
    cr_assert(S_ISFIFO(st.st_mode), "the FIFO was replaced");
    remove_dir(dir);
}

/* A symbolic link at the path is never followed: its target is not made,
 * not truncated, and the link stays. */
Test(store_file, refuses_symlink)
{
    char *dir = make_dir(), link[256], target[256];
    path_in(link, sizeof link, dir, "link");
    path_in(target, sizeof target, dir, "target");
    cr_assert_eq(symlink(target, link), 0);
    rkv_store_config c;
    cfg_disk(&c, link);
    rkv_store *s = NULL;
    IS(rkv_store_create(&c, &s), RKV_ERR_INVALID_ARG);
    cr_assert(!exists(target), "the link's target was created");
    cr_assert(exists(link));
    /* a link to an existing empty 0600 file: the same */
    write_file(target, "", 0, 0600);
    IS(rkv_store_create(&c, &s), RKV_ERR_INVALID_ARG);
    cr_assert_eq(file_size(target), 0, "the link's target was written");
    cr_assert(exists(link));
    remove_dir(dir);
}

/* A file others may read or write is refused, whatever it holds; a file
 * the store makes is 0600 whatever the umask. */
Test(store_file, mode_0600)
{
    char f[256];
    rkv_store_config c;
    char *dir = dir_with_cfg(f, &c);
    mode_t old = umask(0);
    rkv_store *s = open_as(&c, RKV_STORE_FILE_CREATED);
    umask(old);
    struct stat st;
    cr_assert_eq(stat(f, &st), 0);
    cr_assert_eq(st.st_mode & 07777, 0600, "made with mode %04o", st.st_mode & 07777);
    rkv_store_destroy(s);
    cr_assert(!exists(f), "the store's own file outlived it");
    const mode_t modes[] = {0666, 0644, 0640, 0604, 0620};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        write_file(f, "", 0, modes[i]);
        IS(rkv_store_create(&c, &s), RKV_ERR_INVALID_ARG);
        cr_assert(strstr(rkv_last_error(), "mode") != NULL, "%s", rkv_last_error());
        cr_assert_eq(stat(f, &st), 0);
        cr_assert_eq(st.st_mode & 07777, modes[i]);
    }
    /* an intact tier header does not make a world-writable file safe */
    unsigned char *h = calloc(1, RKV_REC_ALIGN);
    rkv_file_header_seal(h, 3, BB, rkv_record_bytes(BB), NULL);
    write_file(f, h, RKV_REC_ALIGN, 0666);
    IS(rkv_store_create(&c, &s), RKV_ERR_INVALID_ARG);
    cr_assert_eq(file_size(f), RKV_REC_ALIGN, "the file was touched");
    free(h);
    remove_dir(dir);
}

/* A second name on the file (a hard link) is refused: truncating it would
 * reach through the other name. */
Test(store_file, refuses_hard_link)
{
    char *dir = make_dir(), f[256], g[256];
    path_in(f, sizeof f, dir, "f");
    path_in(g, sizeof g, dir, "g");
    write_file(f, "", 0, 0600);
    cr_assert_eq(link(f, g), 0);
    rkv_store_config c;
    cfg_disk(&c, f);
    rkv_store *s = NULL;
    IS(rkv_store_create(&c, &s), RKV_ERR_INVALID_ARG);
    cr_assert(strstr(rkv_last_error(), "names") != NULL, "%s", rkv_last_error());
    remove_dir(dir);
}

/* An empty 0600 file the caller made is taken and left in place; content
 * that is not a tier file is refused and left as it was. */
Test(store_file, empty_and_foreign)
{
    char f[256];
    rkv_store_config c;
    char *dir = dir_with_cfg(f, &c);
    write_file(f, "", 0, 0600);
    rkv_store *s = open_as(&c, RKV_STORE_FILE_EMPTY);
    rkv_store_destroy(s);
    cr_assert(exists(f), "the caller's file was removed");
    write_file(f, "precious user data\n", 19, 0600);
    IS(rkv_store_create(&c, &s), RKV_ERR_INVALID_ARG);
    cr_assert(strstr(rkv_last_error(), "not a radixkv tier file") != NULL, "%s",
              rkv_last_error());
    cr_assert_eq(file_size(f), 19, "the file was touched");
    remove_dir(dir);
}

/* Destroy removes the file the store made, and no other: a file put at
 * the path after the store's was renamed away stays. */
Test(store_file, unlinks_only_its_own)
{
    char *dir = make_dir(), f[256], g[256];
    path_in(f, sizeof f, dir, "f");
    path_in(g, sizeof g, dir, "g");
    rkv_store_config c;
    cfg_disk(&c, f);
    rkv_store *s = NULL;
    OK(rkv_store_create(&c, &s));
    cr_assert_eq(rename(f, g), 0);
    write_file(f, "someone else's\n", 15, 0644);
    rkv_store_destroy(s);
    cr_assert(exists(f), "destroy removed a file the store did not make");
    cr_assert_eq(file_size(f), 15);
    remove_dir(dir);
}

/* ---- files left by an earlier store or a crash --------------------------- */

/* The file a store makes, as a crash would leave it: the header it wrote
 * and a sized file (the store is destroyed; its content is rewritten). */
static void leave_file(const char *f, void (*damage)(unsigned char *h), mode_t mode)
{
    unsigned char *h = calloc(1, RKV_REC_ALIGN);
    rkv_file_header_seal(h, 3, BB, rkv_record_bytes(BB), NULL);
    if (damage != NULL)
        damage(h);
    write_file(f, h, RKV_REC_ALIGN, mode);
    cr_assert_eq(truncate(f, RKV_REC_ALIGN + 3 * (off_t)rkv_record_bytes(BB)), 0);
    free(h);
}

static void torn(unsigned char *h) { memset(h + 20, 0xee, 100); }
static void zeroed(unsigned char *h) { memset(h, 0, RKV_REC_ALIGN); }
static void short_torn(unsigned char *h) { memset(h + 8, 0, RKV_REC_ALIGN - 8); }
static void old_magic(unsigned char *h) { memcpy(h, "RVKTIERF", 8); }
static void old_version(unsigned char *h) { h[8] = 1; }

/* A leftover of ours (intact, torn, zeroed, an older format) owned by
 * this user with mode 0600 is started afresh, said so, and removed at
 * destroy; the same with group access is refused. */
static void leftover(void (*damage)(unsigned char *h), int want_origin)
{
    char f[256];
    rkv_store_config c;
    char *dir = dir_with_cfg(f, &c);
    leave_file(f, damage, 0600);
    rkv_store *s = open_as(&c, want_origin);
    OK(rkv_store_check(s));
    /* the store wrote its own header: a fresh file, all slots free */
    unsigned char head[8];
    int fd = open(f, O_RDONLY);
    cr_assert_eq(pread(fd, head, 8, 0), 8);
    close(fd);
    cr_assert(memcmp(head, "RKVTIERF", 8) == 0);
    cr_assert_eq(rkv_store_used_blocks(s), 0);
    rkv_store_destroy(s);
    cr_assert(!exists(f), "a file taken over from a crash outlived its store");
    leave_file(f, damage, 0640);
    IS(rkv_store_create(&c, &s), RKV_ERR_INVALID_ARG);
    cr_assert(strstr(rkv_last_error(), "mode 0640") != NULL, "%s", rkv_last_error());
    cr_assert(exists(f));
    remove_dir(dir);
}

Test(store_file, leftover_intact) { leftover(NULL, RKV_STORE_FILE_REUSED); }
Test(store_file, leftover_torn) { leftover(torn, RKV_STORE_FILE_RECREATED); }
Test(store_file, leftover_zeroed) { leftover(zeroed, RKV_STORE_FILE_RECREATED); }
Test(store_file, leftover_short_torn) { leftover(short_torn, RKV_STORE_FILE_RECREATED); }
Test(store_file, leftover_old_magic) { leftover(old_magic, RKV_STORE_FILE_RECREATED); }
Test(store_file, leftover_old_version) { leftover(old_version, RKV_STORE_FILE_RECREATED); }

/* A header that never reached the disk: a file of only a few zero bytes,
 * or only our magic, is ours too. */
Test(store_file, leftover_short_files)
{
    char f[256];
    rkv_store_config c;
    char *dir = dir_with_cfg(f, &c);
    rkv_store *s = NULL;
    static const unsigned char zeros[100];
    write_file(f, zeros, sizeof zeros, 0600);
    OK(rkv_store_create(&c, &s));
    rkv_store_destroy(s);
    cr_assert(!exists(f));
    write_file(f, "RKVTIERF", 8, 0600);
    OK(rkv_store_create(&c, &s));
    rkv_store_destroy(s);
    cr_assert(!exists(f));
    /* a few non-zero bytes are someone's data */
    write_file(f, "RKV", 3, 0600);
    IS(rkv_store_create(&c, &s), RKV_ERR_INVALID_ARG);
    cr_assert_eq(file_size(f), 3);
    remove_dir(dir);
}

/* A live store's file: another store is refused (BUSY) and the file is
 * neither truncated nor removed by the refusal. */
Test(store_file, live_file_is_busy)
{
    char f[256];
    rkv_store_config c;
    char *dir = dir_with_cfg(f, &c);
    rkv_store *s = NULL, *s2 = NULL;
    OK(rkv_store_create(&c, &s));
    off_t size = file_size(f);
    IS(rkv_store_create(&c, &s2), RKV_ERR_BUSY);
    cr_assert_null(s2);
    cr_assert(exists(f), "a refused store removed the live store's file");
    cr_assert_eq(file_size(f), size);
    OK(rkv_store_check(s));
    rkv_store_destroy(s);
    cr_assert(!exists(f));
    remove_dir(dir);
}
