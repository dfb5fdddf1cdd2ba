/*
 * fleet/nats_auth.h -- how every fleet program (radixkv-router and
 * `radixkv router`, radixkv-fleet-instance, and a server that embeds
 * fleet/publisher.h) authenticates to NATS and protects the connection:
 * the server URL, user/password, token, NKey seed, a .creds file (JWT +
 * seed), TLS with a CA, a client certificate and key. One parser for the
 * command line and the environment, one function that applies the result
 * to a natsOptions, one that makes a URL safe to log.
 *
 * Secrets never need the command line (where any local user reads them in
 * the process list): a password or token comes from a file
 * (--password-file, --token-file) or the environment (RKV_NATS_PASSWORD,
 * RKV_NATS_TOKEN); NKey seeds and creds are files by nature. A URL with
 * credentials in it still works (nats.c reads them) but is never logged
 * as given: rkv_nats_redact_url. The command line wins over the
 * environment: a program parses its options, then lets the environment
 * fill what they left unset.
 *
 * Environment: RKV_NATS_URL, RKV_NATS_USER, RKV_NATS_PASSWORD,
 * RKV_NATS_PASSWORD_FILE, RKV_NATS_TOKEN, RKV_NATS_TOKEN_FILE,
 * RKV_NATS_CREDS, RKV_NATS_NKEY, RKV_NATS_NKEY_SEED, RKV_NATS_TLS (1),
 * RKV_NATS_TLS_CA, RKV_NATS_TLS_CERT, RKV_NATS_TLS_KEY,
 * RKV_NATS_TLS_HOSTNAME, RKV_NATS_INBOX_PREFIX.
 *
 * Library code: no prints, no clock; errors are rkv_status with
 * rkv_last_error() (which never contains a secret). The struct owns
 * copies of everything; secrets are wiped when freed.
 */
#ifndef RKV_FLEET_NATS_AUTH_H
#define RKV_FLEET_NATS_AUTH_H

#include <nats/nats.h>
#include <stddef.h>

#include "radixkv.h"

typedef struct rkv_nats_auth {
    char *url;            /* NULL: the program's default                 */
    char *user, *password;
    char *token;
    char *creds_file;     /* JWT + NKey seed (operator mode)              */
    char *nkey, *nkey_seed_file; /* public key + seed file (nkey users)   */
    int tls;              /* require TLS (implied by a CA or certificate) */
    char *tls_ca, *tls_cert, *tls_key, *tls_hostname;
    char *inbox_prefix;   /* reply subjects under it, not _INBOX: with one
                             prefix per user the server's permissions keep
                             every user's replies its own                */
} rkv_nats_auth;

/* getopt_long codes of the shared options (above any program's own). */
enum {
    RKV_NATS_OPT_USER = 0x4e00,
    RKV_NATS_OPT_PASSWORD_FILE,
    RKV_NATS_OPT_TOKEN_FILE,
    RKV_NATS_OPT_CREDS,
    RKV_NATS_OPT_NKEY,
    RKV_NATS_OPT_NKEY_SEED,
    RKV_NATS_OPT_TLS,
    RKV_NATS_OPT_TLS_CA,
    RKV_NATS_OPT_TLS_CERT,
    RKV_NATS_OPT_TLS_KEY,
    RKV_NATS_OPT_TLS_HOSTNAME,
    RKV_NATS_OPT_INBOX_PREFIX,
    RKV_NATS_OPT_END
};

/* The shared options, to put in a program's struct option array. */
#define RKV_NATS_AUTH_LONGOPTS                                                   \
    {"user", required_argument, 0, RKV_NATS_OPT_USER},                          \
    {"password-file", required_argument, 0, RKV_NATS_OPT_PASSWORD_FILE},        \
    {"token-file", required_argument, 0, RKV_NATS_OPT_TOKEN_FILE},              \
    {"creds", required_argument, 0, RKV_NATS_OPT_CREDS},                        \
    {"nkey", required_argument, 0, RKV_NATS_OPT_NKEY},                          \
    {"nkey-seed", required_argument, 0, RKV_NATS_OPT_NKEY_SEED},                \
    {"tls", no_argument, 0, RKV_NATS_OPT_TLS},                                  \
    {"tls-ca", required_argument, 0, RKV_NATS_OPT_TLS_CA},                      \
    {"tls-cert", required_argument, 0, RKV_NATS_OPT_TLS_CERT},                  \
    {"tls-key", required_argument, 0, RKV_NATS_OPT_TLS_KEY},                    \
    {"tls-hostname", required_argument, 0, RKV_NATS_OPT_TLS_HOSTNAME},          \
    {"inbox-prefix", required_argument, 0, RKV_NATS_OPT_INBOX_PREFIX}

/* Usage lines for the shared options (each ends in a newline). */
const char *rkv_nats_auth_usage(void);

void rkv_nats_auth_init(rkv_nats_auth *a);
void rkv_nats_auth_free(rkv_nats_auth *a); /* wipes secrets; init again */

/* Fills from the environment (above) what is still unset: call it after
 * the options. RKV_ERR_IO when a named file cannot be read, RKV_ERR_INVALID_ARG for an
 * empty one; RKV_ERR_NOMEM. */
rkv_status rkv_nats_auth_from_env(rkv_nats_auth *a);
/* One shared option (code RKV_NATS_OPT_*, arg its argument or NULL). A
 * --password-file / --token-file is read now (the first line, at most
 * 4096 bytes, trailing CR/LF dropped). */
rkv_status rkv_nats_auth_option(rkv_nats_auth *a, int code, const char *arg);
/* The server URL(s): sets a->url (copied). */
rkv_status rkv_nats_auth_set_url(rkv_nats_auth *a, const char *url);

/* What a program does after its options: url_opt (its --server, or
 * NULL) as the URL, the environment for the rest, then the check. */
rkv_status rkv_nats_auth_finish(rkv_nats_auth *a, const char *url_opt);

/* Consistency (a user without a password, a certificate without its key,
 * an NKey without its seed, creds and an NKey together):
 * RKV_ERR_INVALID_ARG. */
rkv_status rkv_nats_auth_check(const rkv_nats_auth *a);
/* Applies the URL (def when a->url is NULL), the credentials and TLS to
 * o (after rkv_nats_auth_check). RKV_ERR_IO when nats.c refuses one (a
 * certificate that does not load: the message names the file). */
rkv_status rkv_nats_auth_apply(const rkv_nats_auth *a, const char *def,
                               natsOptions *o);

/* The inbox prefix replies come to: a->inbox_prefix, or "_INBOX". */
const char *rkv_nats_auth_inbox(const rkv_nats_auth *a);

/* url (one or a comma-separated list) with the password of every
 * user:password@ replaced by *** and a token@ (userinfo without a colon)
 * by ***@, into buf[0..cap) (truncated, always terminated); returns buf. */
char *rkv_nats_redact_url(const char *url, char *buf, size_t cap);
/* 1 when url carries credentials (userinfo before an @). */
int rkv_nats_url_has_secret(const char *url);

#endif
