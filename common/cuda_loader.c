/*
 * common/cuda_loader.c -- finds and loads the CUDA backend (libradixkv_cuda)
 * for a CUDA pool. This file is the only place where the core library
 * touches CUDA, and it does so without any CUDA header or library: the
 * backend is reached through the table in common/cuda_backend.h.
 *
 * Search order (why: an explicit setting wins; a backend the application
 * linked costs nothing to find; the library path is how every other shared
 * library is found; the directory of libradixkv makes an installed prefix
 * work without ld.so.cache or LD_LIBRARY_PATH):
 *   1. $RKV_CUDA_BACKEND, if set and not empty (only that file);
 *   2. a backend linked into the application (weak reference);
 *   3. dlopen("libradixkv_cuda.so.0");
 *   4. libradixkv_cuda.so.0 next to libradixkv (dladdr1's link map; the
 *      program itself when libradixkv.a is linked in), when that directory
 *      is absolute -- never a path relative to the current directory,
 *      which would load whatever lies where the program runs.
 *
 * Invariants: nothing is cached between calls (no static mutable state):
 * each CUDA pool holds its own dlopen handle, released by rkv_cuda_unload.
 * The handle is opened RTLD_NODELETE because the CUDA runtime does not
 * support being unmapped and mapped again in one process. A failing load
 * changes nothing and says, in one sentence, every file it tried and why
 * each failed.
 */
#include "common/cuda_loader.h"

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Resolved by the linker when the application links libradixkv_cuda;
 * NULL otherwise. Default visibility: a hidden undefined weak symbol would
 * be bound to NULL at link time and never to the application's backend. */
extern const rkv_cuda_backend *RKV_CUDA_BACKEND_ENTRY(void)
    __attribute__((weak, visibility("default")));

/* An address inside libradixkv, for dladdr. Constant: not mutable state. */
static const char rkv_loader_anchor = 0;

/* Checks the table the backend `what` returned; why gets the reason on
 * failure. */
static int table_ok(const rkv_cuda_backend *be, const char *what, char *why,
                    size_t why_len)
{
    if (be == NULL) {
        snprintf(why, why_len, "%s: %s returned no table", what,
                 RKV_CUDA_BACKEND_ENTRY_NAME);
        return 0;
    }
    if (be->abi != RKV_CUDA_BACKEND_ABI || be->size < sizeof(rkv_cuda_backend)) {
        snprintf(why, why_len,
                 "%s: backend ABI version %u (table of %u bytes); this libradixkv "
                 "needs ABI version %u (%zu bytes)",
                 what, be->abi, be->size, RKV_CUDA_BACKEND_ABI, sizeof(rkv_cuda_backend));
        return 0;
    }
    return 1;
}

/* dlopens path and validates its table. On failure why says why and
 * nothing stays open. */
static int open_backend(const char *path, rkv_cuda_lib *out, char *why,
                        size_t why_len)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (h == NULL) {
        const char *e = dlerror();
        snprintf(why, why_len, "%s", e != NULL ? e : "dlopen failed");
        return 0;
    }
    void *sym = dlsym(h, RKV_CUDA_BACKEND_ENTRY_NAME);
    if (sym == NULL) {
        snprintf(why, why_len, "%s: no symbol %s", path, RKV_CUDA_BACKEND_ENTRY_NAME);
        dlclose(h);
        return 0;
    }
    rkv_cuda_backend_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry); /* POSIX: object to function pointer */
    const rkv_cuda_backend *be = entry();
    if (!table_ok(be, path, why, why_len)) {
        dlclose(h);
        return 0;
    }
    out->handle = h;
    out->be = be;
    return 1;
}

/* The file libradixkv was loaded from: the shared library's path, or the
 * program's (from /proc/self/exe: dladdr would give argv[0], which a
 * program may set to anything) when libradixkv.a is linked into it.
 * NULL if unknown. */
static const char *rkv_self_path(char *buf, size_t len)
{
    Dl_info info;
    struct link_map *map = NULL;
    if (dladdr1(&rkv_loader_anchor, &info, (void **)&map, RTLD_DL_LINKMAP) == 0 ||
        map == NULL)
        return NULL;
    if (map->l_name != NULL && map->l_name[0] != '\0')
        return map->l_name;
    ssize_t n = readlink("/proc/self/exe", buf, len - 1);
    if (n <= 0)
        return NULL;
    buf[n] = '\0';
    return buf;
}

rkv_status rkv_cuda_load(const char *fn, rkv_cuda_lib *out)
{
    char why1[200], why2[200];
    const char *env = getenv(RKV_CUDA_BACKEND_ENV);
    if (env != NULL && env[0] != '\0') {
        if (open_backend(env, out, why1, sizeof why1))
            return RKV_OK;
        return rkv_set_error(RKV_ERR_NO_DEVICE,
                             "%s: cannot load the CUDA backend %s (set by %s): %s", fn,
                             env, RKV_CUDA_BACKEND_ENV, why1);
    }
    if (RKV_CUDA_BACKEND_ENTRY != NULL) {
        const rkv_cuda_backend *be = RKV_CUDA_BACKEND_ENTRY();
        if (!table_ok(be, "the CUDA backend linked into the program", why1, sizeof why1))
            return rkv_set_error(RKV_ERR_NO_DEVICE, "%s: %s", fn, why1);
        out->handle = NULL;
        out->be = be;
        return RKV_OK;
    }
    if (open_backend(RKV_CUDA_BACKEND_SONAME, out, why1, sizeof why1))
        return RKV_OK;
    /* Next to libradixkv (or the program, when it links libradixkv.a). */
    char exe[4096];
    const char *self = rkv_self_path(exe, sizeof exe);
    const char *slash = self != NULL ? strrchr(self, '/') : NULL;
    if (self != NULL && self[0] == '/' && slash != NULL) {
        char path[4096];
        int len = snprintf(path, sizeof path, "%.*s/%s", (int)(slash - self), self,
                           RKV_CUDA_BACKEND_SONAME);
        if (len > 0 && (size_t)len < sizeof path) {
            if (open_backend(path, out, why2, sizeof why2))
                return RKV_OK;
        } else {
            snprintf(why2, sizeof why2, "the path of libradixkv is too long");
        }
    } else {
        snprintf(why2, sizeof why2, "the directory of libradixkv is unknown");
    }
    return rkv_set_error(RKV_ERR_NO_DEVICE,
                         "%s: cannot load the CUDA backend %s (%s; %s); install it "
                         "next to libradixkv or set %s=/path/to/%s",
                         fn, RKV_CUDA_BACKEND_SONAME, why1, why2, RKV_CUDA_BACKEND_ENV,
                         RKV_CUDA_BACKEND_SONAME);
}

void rkv_cuda_unload(rkv_cuda_lib *lib)
{
    if (lib == NULL)
        return;
    if (lib->handle != NULL)
        dlclose(lib->handle);
    lib->handle = NULL;
    lib->be = NULL;
}
