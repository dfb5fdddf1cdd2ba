/*
 * tests/fleet/test_fleet_auth.c -- fleet/nats_auth.h without a server:
 * URL redaction (passwords and tokens never reach a log line), secrets
 * from files and the environment (the command line wins, files are read
 * once, an unreadable or empty one is refused without quoting anything of
 * it), the consistency checks, and applying to a natsOptions (a CA file
 * that does not load is refused and named). The connections themselves
 * are tested against a real nats-server in test_fleet_trust.
 */
#include <criterion/criterion.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fleet/nats_auth.h"

static void redacts(const char *url, const char *want)
{
    char buf[256];
    cr_assert_str_eq(rkv_nats_redact_url(url, buf, sizeof buf), want, "%s", url);
}

Test(fleet_auth, redaction)
{
    redacts("nats://rkv:s3cret@127.0.0.1:4222", "nats://rkv:***@127.0.0.1:4222");
    redacts("nats://t0ken@h:4222", "nats://***@h:4222");
    redacts("tls://u:p@a:1,nats://b:2,nats://x:y@c:3",
            "tls://u:***@a:1,nats://b:2,nats://x:***@c:3");
    redacts("nats://127.0.0.1:4222", "nats://127.0.0.1:4222");
    redacts("u:p@host:4222", "u:***@host:4222");
    redacts("nats://u:p@ss@h:1", "nats://u:***@h:1");
    redacts("nats://h:1/x@y", "nats://h:1/x@y");
    redacts("", "");
    cr_assert(rkv_nats_url_has_secret("nats://a:b@h"));
    cr_assert(rkv_nats_url_has_secret("nats://h,nats://tok@h2"));
    cr_assert(!rkv_nats_url_has_secret("nats://h:4222,nats://h2"));
    cr_assert(!rkv_nats_url_has_secret(NULL));
    /* truncated, terminated, never the password */
    char small[12];
    rkv_nats_redact_url("nats://rkv:s3cret@host", small, sizeof small);
    cr_assert_eq(strlen(small), sizeof small - 1);
    cr_assert_null(strstr(small, "s3c"));
}

static char g_dir[64];

static const char *file_with(const char *name, const char *text)
{
    static char path[128];
    if (!g_dir[0]) {
        snprintf(g_dir, sizeof g_dir, "/tmp/rkv-auth-XXXXXX");
        cr_assert_not_null(mkdtemp(g_dir));
    }
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

/* .fini of the tests that write files: the directory goes */
static void remove_dir(void)
{
    if (g_dir[0]) {
        char cmd[96];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", g_dir);
        g_dir[0] = 0;
    }
}

static void clear_env(void)
{
    const char *v[] = {"RKV_NATS_URL", "RKV_NATS_USER", "RKV_NATS_PASSWORD",
                       "RKV_NATS_PASSWORD_FILE", "RKV_NATS_TOKEN", "RKV_NATS_TOKEN_FILE",
                       "RKV_NATS_CREDS", "RKV_NATS_NKEY", "RKV_NATS_NKEY_SEED",
                       "RKV_NATS_TLS", "RKV_NATS_TLS_CA", "RKV_NATS_TLS_CERT",
                       "RKV_NATS_TLS_KEY", "RKV_NATS_TLS_HOSTNAME"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        unsetenv(v[i]);
}

Test(fleet_auth, secrets_from_files_and_environment, .fini = remove_dir)
{
    clear_env();
    rkv_nats_auth a;
    rkv_nats_auth_init(&a);
    cr_assert_eq(rkv_nats_auth_from_env(&a), RKV_OK);
    cr_assert_null(a.user);
    cr_assert_null(a.url);
    setenv("RKV_NATS_URL", "nats://h:1", 1);
    setenv("RKV_NATS_USER", "inst1", 1);
    setenv("RKV_NATS_PASSWORD", "from-env", 1);
    setenv("RKV_NATS_TOKEN_FILE", file_with("tok", "tok-from-file\r\nsecond line\n"), 1);
    setenv("RKV_NATS_TLS", "1", 1);
    cr_assert_eq(rkv_nats_auth_from_env(&a), RKV_OK, "%s", rkv_last_error());
    cr_assert_str_eq(a.url, "nats://h:1");
    cr_assert_str_eq(a.user, "inst1");
    cr_assert_str_eq(a.password, "from-env");
    cr_assert_str_eq(a.token, "tok-from-file");
    cr_assert(a.tls);
    rkv_nats_auth_free(&a);
    /* the command line (the environment only fills what it left) wins */
    cr_assert_eq(rkv_nats_auth_option(&a, RKV_NATS_OPT_PASSWORD_FILE,
                                      file_with("pw", "pw-from-file\n")), RKV_OK);
    cr_assert_eq(rkv_nats_auth_option(&a, RKV_NATS_OPT_USER, "inst2"), RKV_OK);
    cr_assert_eq(rkv_nats_auth_from_env(&a), RKV_OK, "%s", rkv_last_error());
    cr_assert_str_eq(a.password, "pw-from-file");
    cr_assert_str_eq(a.user, "inst2");
    cr_assert_str_eq(a.token, "tok-from-file");
    cr_assert_eq(rkv_nats_auth_check(&a), RKV_OK);
    /* unreadable, empty: refused; the message quotes no secret */
    cr_assert_eq(rkv_nats_auth_option(&a, RKV_NATS_OPT_PASSWORD_FILE,
                                      "/nonexistent/pw"), RKV_ERR_IO);
    cr_assert_not_null(strstr(rkv_last_error(), "/nonexistent/pw"));
    cr_assert_eq(rkv_nats_auth_option(&a, RKV_NATS_OPT_TOKEN_FILE,
                                      file_with("empty", "\nsecret-on-line-2\n")),
                 RKV_ERR_INVALID_ARG);
    cr_assert_null(strstr(rkv_last_error(), "secret-on-line-2"));
    cr_assert_str_eq(a.password, "pw-from-file", "a refusal changes nothing");
    cr_assert_str_eq(a.token, "tok-from-file");
    setenv("RKV_NATS_TLS", "yes", 1);
    cr_assert_eq(rkv_nats_auth_from_env(&a), RKV_ERR_INVALID_ARG);
    rkv_nats_auth_free(&a);
    cr_assert_null(a.password);
    clear_env();
}

Test(fleet_auth, consistency_checks, .fini = remove_dir)
{
    clear_env();
    rkv_nats_auth a;
    rkv_nats_auth_init(&a);
    cr_assert_eq(rkv_nats_auth_check(&a), RKV_OK);
    cr_assert_eq(rkv_nats_auth_option(&a, RKV_NATS_OPT_USER, "u"), RKV_OK);
    cr_assert_eq(rkv_nats_auth_check(&a), RKV_ERR_INVALID_ARG, "user, no password");
    cr_assert_eq(rkv_nats_auth_option(&a, RKV_NATS_OPT_PASSWORD_FILE,
                                      file_with("pw2", "x")), RKV_OK);
    cr_assert_eq(rkv_nats_auth_check(&a), RKV_OK);
    cr_assert_eq(rkv_nats_auth_option(&a, RKV_NATS_OPT_TLS_CERT, "c.pem"), RKV_OK);
    cr_assert_eq(rkv_nats_auth_check(&a), RKV_ERR_INVALID_ARG, "cert, no key");
    cr_assert_eq(rkv_nats_auth_option(&a, RKV_NATS_OPT_TLS_KEY, "k.pem"), RKV_OK);
    cr_assert_eq(rkv_nats_auth_check(&a), RKV_OK);
    cr_assert_eq(rkv_nats_auth_option(&a, RKV_NATS_OPT_NKEY, "UABC"), RKV_OK);
    cr_assert_eq(rkv_nats_auth_check(&a), RKV_ERR_INVALID_ARG, "nkey, no seed");
    cr_assert_eq(rkv_nats_auth_option(&a, RKV_NATS_OPT_NKEY_SEED, "seed"), RKV_OK);
    cr_assert_eq(rkv_nats_auth_check(&a), RKV_OK);
    cr_assert_eq(rkv_nats_auth_option(&a, RKV_NATS_OPT_CREDS, "x.creds"), RKV_OK);
    cr_assert_eq(rkv_nats_auth_check(&a), RKV_ERR_INVALID_ARG, "creds and nkey");
    cr_assert_eq(rkv_nats_auth_option(&a, RKV_NATS_OPT_USER, ""), RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_nats_auth_option(&a, 12345, "x"), RKV_ERR_INVALID_ARG);
    rkv_nats_auth_free(&a);
}

Test(fleet_auth, apply_to_options, .fini = remove_dir)
{
    clear_env();
    rkv_nats_auth a;
    rkv_nats_auth_init(&a);
    natsOptions *o = NULL;
    cr_assert_eq(natsOptions_Create(&o), NATS_OK);
    cr_assert_eq(rkv_nats_auth_apply(&a, NULL, o), RKV_ERR_INVALID_ARG, "no URL");
    cr_assert_eq(rkv_nats_auth_apply(&a, "nats://127.0.0.1:1", o), RKV_OK);
    cr_assert_eq(rkv_nats_auth_option(&a, RKV_NATS_OPT_USER, "u"), RKV_OK);
    cr_assert_eq(rkv_nats_auth_option(&a, RKV_NATS_OPT_PASSWORD_FILE,
                                      file_with("pw3", "p")), RKV_OK);
    cr_assert_eq(rkv_nats_auth_option(&a, RKV_NATS_OPT_TOKEN_FILE,
                                      file_with("tok3", "t")), RKV_OK);
    cr_assert_eq(rkv_nats_auth_apply(&a, "nats://127.0.0.1:1", o), RKV_OK, "%s",
                 rkv_last_error());
    /* a CA file that does not load is refused, and named */
    cr_assert_eq(rkv_nats_auth_option(&a, RKV_NATS_OPT_TLS_CA,
                                      file_with("ca.pem", "not a certificate\n")),
                 RKV_OK);
    cr_assert_eq(rkv_nats_auth_apply(&a, "nats://127.0.0.1:1", o), RKV_ERR_IO);
    cr_assert_not_null(strstr(rkv_last_error(), "ca.pem"), "%s", rkv_last_error());
    natsOptions_Destroy(o);
    rkv_nats_auth_free(&a);
    /* the shared options parse with getopt_long as a program uses them */
    static const struct option opts[] = {RKV_NATS_AUTH_LONGOPTS, {0, 0, 0, 0}};
    char *argv[] = {"prog", "--user", "me", "--tls", "--tls-hostname", "srv", NULL};
    optind = 1;
    int c, n = 0;
    rkv_nats_auth_init(&a);
    while ((c = getopt_long(6, argv, "", opts, NULL)) != -1) {
        cr_assert(c >= RKV_NATS_OPT_USER && c < RKV_NATS_OPT_END);
        cr_assert_eq(rkv_nats_auth_option(&a, c, optarg), RKV_OK);
        n++;
    }
    cr_assert_eq(n, 3);
    cr_assert_str_eq(a.user, "me");
    cr_assert(a.tls);
    cr_assert_str_eq(a.tls_hostname, "srv");
    cr_assert_not_null(strstr(rkv_nats_auth_usage(), "--password-file"));
    rkv_nats_auth_free(&a);
}
