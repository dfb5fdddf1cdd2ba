/*
 * fleet/nats_auth.c -- the fleet's NATS authentication and TLS options
 * (fleet/nats_auth.h): parsing from the environment and the command line,
 * reading secret files, applying to a natsOptions, redacting URLs.
 * Every string is an owned copy; secrets (password, token) are wiped with
 * explicit_bzero before they are freed, and no error message quotes one.
 */
#include "fleet/nats_auth.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/status.h"

#define SECRET_MAX 4096

static const char USAGE[] =
    "NATS authentication and TLS (each also from the environment, RKV_NATS_*;\n"
    "secrets never need the command line):\n"
    "      --user NAME              user (RKV_NATS_USER); its password from\n"
    "      --password-file FILE     (RKV_NATS_PASSWORD_FILE) or RKV_NATS_PASSWORD\n"
    "      --token-file FILE        token (RKV_NATS_TOKEN_FILE) or RKV_NATS_TOKEN\n"
    "      --creds FILE             JWT + NKey seed .creds file (RKV_NATS_CREDS)\n"
    "      --nkey PUBKEY            NKey user (RKV_NATS_NKEY) with its seed\n"
    "      --nkey-seed FILE         file (RKV_NATS_NKEY_SEED)\n"
    "      --tls                    require TLS (RKV_NATS_TLS=1; implied below)\n"
    "      --tls-ca FILE            CA certificates to verify the server\n"
    "      --tls-cert FILE          client certificate chain (with --tls-key)\n"
    "      --tls-key FILE           its private key\n"
    "      --tls-hostname NAME      name the server certificate must carry\n"
    "      --inbox-prefix PREFIX    replies come to PREFIX.> instead of _INBOX.>\n"
    "                               (RKV_NATS_INBOX_PREFIX; one per user lets\n"
    "                               the server keep replies private)\n"
    "  The server URL also comes from RKV_NATS_URL; credentials in a URL work\n"
    "  but are visible in the process list, and are never logged.\n";

const char *rkv_nats_auth_usage(void)
{
    return USAGE;
}

void rkv_nats_auth_init(rkv_nats_auth *a)
{
    if (a)
        memset(a, 0, sizeof *a);
}

static void wipe(char **p)
{
    if (*p) {
        explicit_bzero(*p, strlen(*p));
        free(*p);
        *p = NULL;
    }
}

void rkv_nats_auth_free(rkv_nats_auth *a)
{
    if (!a)
        return;
    wipe(&a->url); /* may carry credentials */
    wipe(&a->password);
    wipe(&a->token);
    char **plain[] = {&a->user, &a->creds_file, &a->nkey, &a->nkey_seed_file,
                      &a->tls_ca, &a->tls_cert, &a->tls_key, &a->tls_hostname,
                      &a->inbox_prefix};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
        free(*plain[i]);
        *plain[i] = NULL;
    }
    a->tls = 0;
}

/* *dst = copy of v (the old value wiped). */
static rkv_status set(char **dst, const char *v, const char *what)
{
    if (!v || !*v)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "NATS %s: empty", what);
    char *c = strdup(v);
    if (!c)
        return rkv_set_error(RKV_ERR_NOMEM, "NATS %s: out of memory", what);
    wipe(dst);
    *dst = c;
    return RKV_OK;
}

/* The secret in file path (first line) into *dst. read(2), not stdio: no
 * library buffer keeps a copy after the local one is wiped. */
static rkv_status read_secret(char **dst, const char *path, const char *what)
{
    if (!path || !*path)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "NATS %s file: empty name", what);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return rkv_set_error(RKV_ERR_IO, "NATS %s file %s: %s", what, path,
                             strerror(errno));
    char buf[SECRET_MAX + 2];
    size_t n = 0;
    int err = 0;
    while (n < sizeof buf - 1) {
        ssize_t k = read(fd, buf + n, sizeof buf - 1 - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            err = errno;
        if (k <= 0)
            break;
        n += (size_t)k;
    }
    close(fd);
    buf[n] = 0;
    size_t len = strcspn(buf, "\r\n");
    rkv_status st = RKV_OK;
    if (err)
        st = rkv_set_error(RKV_ERR_IO, "NATS %s file %s: %s", what, path,
                           strerror(err));
    else if (len == 0)
        st = rkv_set_error(RKV_ERR_INVALID_ARG, "NATS %s file %s: empty first line",
                           what, path);
    else if (len > SECRET_MAX)
        st = rkv_set_error(RKV_ERR_INVALID_ARG, "NATS %s file %s: over %d bytes",
                           what, path, SECRET_MAX);
    if (st == RKV_OK) {
        buf[len] = 0;
        st = set(dst, buf, what);
    }
    explicit_bzero(buf, sizeof buf);
    return st;
}

rkv_status rkv_nats_auth_set_url(rkv_nats_auth *a, const char *url)
{
    if (!a)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_nats_auth_set_url: NULL");
    return set(&a->url, url, "server URL");
}

rkv_status rkv_nats_auth_option(rkv_nats_auth *a, int code, const char *arg)
{
    if (!a)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_nats_auth_option: NULL");
    switch (code) {
    case RKV_NATS_OPT_USER: return set(&a->user, arg, "user");
    case RKV_NATS_OPT_PASSWORD_FILE: return read_secret(&a->password, arg, "password");
    case RKV_NATS_OPT_TOKEN_FILE: return read_secret(&a->token, arg, "token");
    case RKV_NATS_OPT_CREDS: return set(&a->creds_file, arg, "creds file");
    case RKV_NATS_OPT_NKEY: return set(&a->nkey, arg, "NKey");
    case RKV_NATS_OPT_NKEY_SEED: return set(&a->nkey_seed_file, arg, "NKey seed file");
    case RKV_NATS_OPT_TLS: a->tls = 1; return RKV_OK;
    case RKV_NATS_OPT_TLS_CA: return set(&a->tls_ca, arg, "TLS CA file");
    case RKV_NATS_OPT_TLS_CERT: return set(&a->tls_cert, arg, "TLS certificate file");
    case RKV_NATS_OPT_TLS_KEY: return set(&a->tls_key, arg, "TLS key file");
    case RKV_NATS_OPT_TLS_HOSTNAME: return set(&a->tls_hostname, arg, "TLS hostname");
    case RKV_NATS_OPT_INBOX_PREFIX: return set(&a->inbox_prefix, arg, "inbox prefix");
    default:
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_nats_auth_option: code %d",
                             code);
    }
}

rkv_status rkv_nats_auth_from_env(rkv_nats_auth *a)
{
    if (!a)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_nats_auth_from_env: NULL");
    /* the variable's value is the field's value, or (file) names a file
     * whose first line is */
    static const struct {
        const char *env;
        size_t field;
        int file;
    } map[] = {
        {"RKV_NATS_URL", offsetof(rkv_nats_auth, url), 0},
        {"RKV_NATS_USER", offsetof(rkv_nats_auth, user), 0},
        {"RKV_NATS_PASSWORD", offsetof(rkv_nats_auth, password), 0},
        {"RKV_NATS_PASSWORD_FILE", offsetof(rkv_nats_auth, password), 1},
        {"RKV_NATS_TOKEN", offsetof(rkv_nats_auth, token), 0},
        {"RKV_NATS_TOKEN_FILE", offsetof(rkv_nats_auth, token), 1},
        {"RKV_NATS_CREDS", offsetof(rkv_nats_auth, creds_file), 0},
        {"RKV_NATS_NKEY", offsetof(rkv_nats_auth, nkey), 0},
        {"RKV_NATS_NKEY_SEED", offsetof(rkv_nats_auth, nkey_seed_file), 0},
        {"RKV_NATS_TLS_CA", offsetof(rkv_nats_auth, tls_ca), 0},
        {"RKV_NATS_TLS_CERT", offsetof(rkv_nats_auth, tls_cert), 0},
        {"RKV_NATS_TLS_KEY", offsetof(rkv_nats_auth, tls_key), 0},
        {"RKV_NATS_TLS_HOSTNAME", offsetof(rkv_nats_auth, tls_hostname), 0},
        {"RKV_NATS_INBOX_PREFIX", offsetof(rkv_nats_auth, inbox_prefix), 0}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        const char *v = getenv(map[i].env);
        char **dst = (char **)((char *)a + map[i].field);
        if (!v || !*v || *dst)
            continue; /* unset, or set by an option (or an earlier variable) */
        rkv_status st = map[i].file ? read_secret(dst, v, map[i].env)
                                    : set(dst, v, map[i].env);
        if (st != RKV_OK)
            return st;
    }
    const char *tls = getenv("RKV_NATS_TLS");
    if (tls && strcmp(tls, "1") == 0)
        a->tls = 1;
    else if (tls && *tls && strcmp(tls, "0") != 0)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "RKV_NATS_TLS: 0 or 1");
    return RKV_OK;
}

rkv_status rkv_nats_auth_check(const rkv_nats_auth *a)
{
    static const char fn[] = "NATS authentication";
    if (!a)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL", fn);
    if (!a->user != !a->password)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: a user needs a password "
                             "(--password-file or RKV_NATS_PASSWORD) and a "
                             "password a user (--user)", fn);
    if (!a->nkey != !a->nkey_seed_file)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: --nkey and --nkey-seed "
                             "go together", fn);
    if (a->nkey && a->creds_file)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: --creds and --nkey "
                             "exclude each other", fn);
    if (!a->tls_cert != !a->tls_key)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: --tls-cert and --tls-key "
                             "go together", fn);
    return RKV_OK;
}

rkv_status rkv_nats_auth_finish(rkv_nats_auth *a, const char *url_opt)
{
    rkv_status st = url_opt ? rkv_nats_auth_set_url(a, url_opt) : RKV_OK;
    if (st == RKV_OK)
        st = rkv_nats_auth_from_env(a);
    if (st == RKV_OK)
        st = rkv_nats_auth_check(a);
    return st;
}

static rkv_status refused(const char *what, const char *file, natsStatus s)
{
    return rkv_set_error(RKV_ERR_IO, "NATS %s%s%s: %s", what, file ? " " : "",
                         file ? file : "", natsStatus_GetText(s));
}

rkv_status rkv_nats_auth_apply(const rkv_nats_auth *a, const char *def,
                               natsOptions *o)
{
    if (!a || !o || (!a->url && !def))
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_nats_auth_apply: NULL");
    rkv_status st = rkv_nats_auth_check(a);
    if (st != RKV_OK)
        return st;
    natsStatus s = natsOptions_SetURL(o, a->url ? a->url : def);
    if (s != NATS_OK)
        return refused("server URL", NULL, s);
    if (a->user && (s = natsOptions_SetUserInfo(o, a->user, a->password)) != NATS_OK)
        return refused("user", NULL, s);
    if (a->token && (s = natsOptions_SetToken(o, a->token)) != NATS_OK)
        return refused("token", NULL, s);
    if (a->creds_file &&
        (s = natsOptions_SetUserCredentialsFromFiles(o, a->creds_file, NULL)) != NATS_OK)
        return refused("creds file", a->creds_file, s);
    if (a->nkey &&
        (s = natsOptions_SetNKeyFromSeed(o, a->nkey, a->nkey_seed_file)) != NATS_OK)
        return refused("NKey seed file", a->nkey_seed_file, s);
    if (a->inbox_prefix &&
        (s = natsOptions_SetCustomInboxPrefix(o, a->inbox_prefix)) != NATS_OK)
        return refused("inbox prefix", a->inbox_prefix, s);
    if (a->tls || a->tls_ca || a->tls_cert) {
        if ((s = natsOptions_SetSecure(o, true)) != NATS_OK)
            return refused("TLS", NULL, s);
        if (a->tls_ca &&
            (s = natsOptions_LoadCATrustedCertificates(o, a->tls_ca)) != NATS_OK)
            return refused("TLS CA file", a->tls_ca, s);
        if (a->tls_cert &&
            (s = natsOptions_LoadCertificatesChain(o, a->tls_cert, a->tls_key)) !=
                NATS_OK)
            return refused("TLS certificate / key", a->tls_cert, s);
        if (a->tls_hostname &&
            (s = natsOptions_SetExpectedHostname(o, a->tls_hostname)) != NATS_OK)
            return refused("TLS hostname", NULL, s);
    }
    return RKV_OK;
}

const char *rkv_nats_auth_inbox(const rkv_nats_auth *a)
{
    return a && a->inbox_prefix ? a->inbox_prefix : "_INBOX";
}

/* The userinfo of the URL starting at u (up to end): [*ui, *at) or 0. */
static int userinfo(const char *u, const char *end, const char **ui, const char **at)
{
    const char *sch = NULL;
    for (const char *p = u; p + 2 < end; p++)
        if (p[0] == ':' && p[1] == '/' && p[2] == '/') {
            sch = p + 3;
            break;
        }
    const char *start = sch ? sch : u;
    /* the authority ends at the first '/', '?' or '#'; its last '@' ends
     * the userinfo (a password may hold an '@' nats.c would not accept
     * unescaped anyway) */
    const char *auth_end = start;
    while (auth_end < end && *auth_end != '/' && *auth_end != '?' && *auth_end != '#')
        auth_end++;
    const char *last = NULL;
    for (const char *p = start; p < auth_end; p++)
        if (*p == '@')
            last = p;
    if (!last)
        return 0;
    *ui = start;
    *at = last;
    return 1;
}

int rkv_nats_url_has_secret(const char *url)
{
    if (!url)
        return 0;
    for (const char *u = url;;) {
        const char *end = strchr(u, ',');
        if (!end)
            end = u + strlen(u);
        const char *ui, *at;
        if (userinfo(u, end, &ui, &at))
            return 1;
        if (!*end)
            return 0;
        u = end + 1;
    }
}

char *rkv_nats_redact_url(const char *url, char *buf, size_t cap)
{
    if (!buf || cap == 0)
        return buf;
    buf[0] = 0;
    if (!url)
        return buf;
    size_t k = 0;
#define PUT(p, n)                                                               \
    do {                                                                        \
        size_t n_ = (n);                                                        \
        if (n_ > cap - 1 - k)                                                   \
            n_ = cap - 1 - k;                                                   \
        memcpy(buf + k, (p), n_);                                               \
        k += n_;                                                                \
    } while (0)
    for (const char *u = url;;) {
        const char *end = strchr(u, ',');
        if (!end)
            end = u + strlen(u);
        const char *ui, *at;
        if (userinfo(u, end, &ui, &at)) {
            PUT(u, (size_t)(ui - u));
            const char *colon = memchr(ui, ':', (size_t)(at - ui));
            if (colon) {
                PUT(ui, (size_t)(colon - ui));
                PUT(":***", 4);
            } else {
                PUT("***", 3);
            }
            PUT(at, (size_t)(end - at));
        } else {
            PUT(u, (size_t)(end - u));
        }
        if (!*end)
            break;
        PUT(",", 1);
        u = end + 1;
    }
#undef PUT
    buf[k] = 0;
    return buf;
}
