/*
 * tests/fleet/test_fleet_route_json.c -- the route API's JSON parser
 * (fleet/route_json.h): random valid requests (any whitespace, member
 * order, int32 extremes) parse to exactly their tokens and namespace;
 * a table of malformed ones is RKV_ERR_FORMAT; every strict prefix of a
 * valid request fails; random mutations of valid requests (bytes flipped,
 * inserted, deleted) only ever parse or fail cleanly, each parsed from an
 * exactly sized heap copy so that ASan sees any read past the body; ids
 * of every length against an oracle, the errors' byte offsets, and the
 * answer's candidate writer against the appenders.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet/route_json.h"
#include "tests/support/test_util.h"

#define MAXTOK 64

static const char *const WS[] = {"", " ", "\n", "\t", "\r\n  "};

static const char *ws(rkv_rng *g)
{
    return WS[rkv_rng_below(g, 5)];
}

/* A random valid request into buf; its tokens and namespace out. */
static size_t gen(rkv_rng *g, char *buf, size_t cap, int32_t *tok, uint32_t *n,
                  uint64_t *ns)
{
    *n = (uint32_t)rkv_rng_below(g, MAXTOK + 1);
    for (uint32_t i = 0; i < *n; i++) {
        uint64_t k = rkv_rng_below(g, 8);
        tok[i] = k == 0 ? INT32_MAX : k == 1 ? INT32_MIN : k == 2 ? 0
               : (int32_t)rkv_rng_below(g, 200000) - (k == 3 ? 100000 : 0);
    }
    int with_ns = (int)rkv_rng_below(g, 2);
    uint64_t k = rkv_rng_below(g, 3);
    *ns = !with_ns ? 0 : k == 0 ? UINT64_MAX : k == 1 ? 0 : rkv_rng_next(g) >> rkv_rng_below(g, 64);
    size_t len = 0;
#define PUT(...) len += (size_t)snprintf(buf + len, cap - len, __VA_ARGS__)
    char arr[MAXTOK * 24 + 64];
    size_t al = 0;
    al += (size_t)snprintf(arr + al, sizeof arr - al, "[%s", ws(g));
    for (uint32_t i = 0; i < *n; i++)
        al += (size_t)snprintf(arr + al, sizeof arr - al, "%s%s%d%s", i ? "," : "", ws(g),
                               (int)tok[i], ws(g));
    snprintf(arr + al, sizeof arr - al, "%s]", ws(g));
    PUT("%s{%s", ws(g), ws(g));
    int ns_first = with_ns && rkv_rng_below(g, 2);
    if (ns_first)
        PUT("\"namespace\"%s:%s%llu%s,%s", ws(g), ws(g), (unsigned long long)*ns, ws(g),
            ws(g));
    PUT("\"token_ids\"%s:%s%s%s", ws(g), ws(g), arr, ws(g));
    if (with_ns && !ns_first)
        PUT(",%s\"namespace\"%s:%s%llu%s", ws(g), ws(g), ws(g), (unsigned long long)*ns,
            ws(g));
    PUT("}%s", ws(g));
#undef PUT
    cr_assert_lt(len, cap);
    return len;
}

/* Parses from an exactly sized heap copy. */
static rkv_status parse(const char *s, size_t len, int32_t *tok, uint32_t cap,
                        rkv_route_request *req)
{
    char *copy = malloc(len ? len : 1);
    memcpy(copy, s, len);
    rkv_status st = rkv_route_json_parse(copy, len, tok, cap, req);
    free(copy);
    return st;
}

Test(route_json, random_valid_requests_parse_exactly)
{
    rkv_rng g;
    rkv_rng_init(&g, rkv_test_seed("route_json.valid"));
    char buf[8192];
    for (int it = 0; it < 3000; it++) {
        int32_t want[MAXTOK], got[MAXTOK];
        uint32_t n = 0;
        uint64_t ns = 0;
        size_t len = gen(&g, buf, sizeof buf, want, &n, &ns);
        rkv_route_request req;
        rkv_status st = parse(buf, len, got, MAXTOK, &req);
        cr_assert_eq(st, RKV_OK, "%s: %.*s", rkv_last_error(), (int)len, buf);
        cr_assert_eq(req.n_tokens, n);
        cr_assert_eq(req.ns, ns);
        cr_assert(n == 0 || memcmp(got, want, n * sizeof *got) == 0);
        /* one token of room less: NO_SPACE, never a write past it */
        if (n > 0) {
            int32_t *tight = malloc((n - 1 ? n - 1 : 1) * sizeof *tight);
            cr_assert_eq(parse(buf, len, tight, n - 1, &req), RKV_ERR_NO_SPACE);
            cr_assert_eq(req.n_tokens, 0);
            free(tight);
        }
        /* every strict prefix that cuts into the object fails */
        size_t end = len;
        while (end > 0 && buf[end - 1] != '}')
            end--;
        for (size_t cut = 0; cut < end; cut += 1 + rkv_rng_below(&g, 8))
            cr_assert_eq(parse(buf, cut, got, MAXTOK, &req), RKV_ERR_FORMAT,
                         "prefix %zu of %.*s parsed", cut, (int)len, buf);
    }
}

Test(route_json, malformed_requests_are_format_errors)
{
    static const char *const bad[] = {
        "", " ", "[]", "null", "{", "}", "{}", "{\"namespace\": 1}",
        "{\"token_ids\": [1,2]", "{\"token_ids\": [1,2}", "{\"token_ids\": [1,,2]}",
        "{\"token_ids\": [1,2,]}", "{\"token_ids\": [,]}", "{\"token_ids\": 5}",
        "{\"token_ids\": \"1,2\"}", "{\"token_ids\": [1.0]}", "{\"token_ids\": [1e3]}",
        "{\"token_ids\": [01]}", "{\"token_ids\": [-]}", "{\"token_ids\": [+1]}",
        "{\"token_ids\": [2147483648]}", "{\"token_ids\": [-2147483649]}",
        "{\"token_ids\": [99999999999999999999999]}", "{\"token_ids\": [[1]]}",
        "{\"token_ids\": [1], \"namespace\": -1}",
        "{\"token_ids\": [1], \"namespace\": 18446744073709551616}",
        "{\"token_ids\": [1], \"namespace\": 1.5}",
        "{\"token_ids\": [1], \"namespace\": \"7\"}",
        "{\"token_ids\": [1], \"namespace\": null}",
        "{\"token_ids\": [1], \"token_ids\": [1]}",
        "{\"token_ids\": [1], \"namespace\": 1, \"namespace\": 1}",
        "{\"token_ids\": [1], \"model\": \"x\"}", "{\"token\\u005fids\": [1]}",
        "{\"token_ids\" [1]}", "{token_ids: [1]}", "{'token_ids': [1]}",
        "{\"token_ids\": [1]} x", "{\"token_ids\": [1]}{}", "{\"token_ids\": [1]},",
        "{\"token_ids\": [1] \"namespace\": 2}", "{,\"token_ids\": [1]}",
        "{\"token_ids\": [1],}", "\xef\xbb\xbf{\"token_ids\": [1]}",
        "{\"tok\x01\": [1]}", "{\"token_ids\": [1\x00]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int32_t tok[8];
        rkv_route_request req = {7, 7};
        size_t len = strlen(bad[i]);
        if (strstr(bad[i], "[1") && i + 1 == sizeof bad / sizeof bad[0])
            len = 17; /* the NUL inside is part of the body */
        cr_assert_eq(parse(bad[i], len, tok, 8, &req), RKV_ERR_FORMAT, "case %zu: %s",
                     i, bad[i]);
        cr_assert_eq(req.n_tokens, 0);
        cr_assert_eq(req.ns, 0);
        cr_assert_not_null(strstr(rkv_last_error(), "route request"));
    }
    int32_t tok[4];
    rkv_route_request req;
    cr_assert_eq(rkv_route_json_parse(NULL, 3, tok, 4, &req), RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_route_json_parse("{}", 2, tok, 4, NULL), RKV_ERR_INVALID_ARG);
    cr_assert_eq(parse("{\"token_ids\":[]}", 16, NULL, 0, &req), RKV_OK);
    cr_assert_eq(req.n_tokens, 0);
}

Test(route_json, random_mutations_parse_or_fail_cleanly)
{
    rkv_rng g;
    rkv_rng_init(&g, rkv_test_seed("route_json.mutations"));
    char buf[8192];
    uint64_t ok = 0, failed = 0;
    for (int it = 0; it < 20000; it++) {
        int32_t want[MAXTOK], got[MAXTOK];
        uint32_t n = 0;
        uint64_t ns = 0;
        size_t len = gen(&g, buf, sizeof buf - 16, want, &n, &ns);
        int edits = 1 + (int)rkv_rng_below(&g, 3);
        for (int e = 0; e < edits && len > 0; e++) {
            size_t at = (size_t)rkv_rng_below(&g, len);
            static const char pool[] = "{}[],:\"-0123456789. eE\\\x01\xff";
            char ch = rkv_rng_below(&g, 2) ? pool[rkv_rng_below(&g, sizeof pool - 1)]
                                           : (char)rkv_rng_below(&g, 256);
            switch (rkv_rng_below(&g, 3)) {
            case 0: buf[at] = ch; break;
            case 1:
                memmove(buf + at + 1, buf + at, len - at);
                buf[at] = ch;
                len++;
                break;
            default:
                memmove(buf + at, buf + at + 1, len - at - 1);
                len--;
                break;
            }
        }
        rkv_route_request req;
        rkv_status st = parse(buf, len, got, MAXTOK, &req);
        cr_assert(st == RKV_OK || st == RKV_ERR_FORMAT || st == RKV_ERR_NO_SPACE,
                  "status %d", (int)st);
        if (st == RKV_OK) {
            cr_assert_leq(req.n_tokens, MAXTOK + 2);
            ok++;
        } else {
            cr_assert_eq(req.n_tokens, 0);
            failed++;
        }
    }
    cr_assert_gt(ok, 0, "no mutation kept a valid request");
    cr_assert_gt(failed, 10000);
}

Test(route_json, error_objects_are_valid_json)
{
    char buf[256];
    size_t n = rkv_route_json_error(buf, sizeof buf, 400, "bad \"x\"\\\n\x01\xc3\xa9");
    cr_assert_lt(n, sizeof buf);
    cr_assert_str_eq(buf, "{\"error\": \"bad \\\"x\\\"\\\\\\u000a\\u0001??\", "
                          "\"status\": 400}\n");
    cr_assert_geq(rkv_route_json_error(buf, 8, 503, "long message"), 8);
}

/* The answer's appenders print what printf would ("%" PRIu64, "%.10g"),
 * byte for byte, and never write past cap while still counting. */
Test(route_json, appenders_match_printf)
{
    static const double nums[] = {0.0, -0.0, 1.0, -1.0, 7.0, 448.0, -448.0, 0.5, -2.75,
                                  1.0 / 3.0, 9999999999.0, -9999999999.0, 1e10, -1e10,
                                  12345678901.0, 1e300, -1e-300, 4096.25, 1e9 + 0.5,
                                  (double)(1ull << 53), 0.1, NAN, INFINITY, -INFINITY};
    static const uint64_t ints[] = {0, 1, 9, 10, 99, 100, 65535, 4294967295u,
                                    4294967296u, 10000000000000000000u, UINT64_MAX};
    char got[64], want[64];
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        rkv_json_out o = {got, sizeof got, 0};
        rkv_json_num(&o, nums[i]);
        int n = snprintf(want, sizeof want, "%.10g", nums[i]);
        cr_assert_eq(o.len, (size_t)n, "%s", want);
        cr_assert(memcmp(got, want, (size_t)n) == 0, "%.*s vs %s", n, got, want);
    }
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        rkv_json_out o = {got, sizeof got, 0};
        rkv_json_u64(&o, ints[i]);
        int n = snprintf(want, sizeof want, "%llu", (unsigned long long)ints[i]);
        cr_assert_eq(o.len, (size_t)n);
        cr_assert(memcmp(got, want, (size_t)n) == 0, "%.*s vs %s", n, got, want);
    }
    /* a random sweep of integral and fractional scores */
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < 100000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        double v = (double)(int64_t)(x % 40000000000ull) - 2e10;
        if (i % 3 == 1)
            v /= 16.0;
        if (i % 3 == 2)
            v = (double)(x % 100000) * 0.25 - 12000.0;
        rkv_json_out o = {got, sizeof got, 0};
        rkv_json_num(&o, v);
        int n = snprintf(want, sizeof want, "%.10g", v);
        cr_assert_eq(o.len, (size_t)n, "%s", want);
        cr_assert(memcmp(got, want, (size_t)n) == 0, "%.*s vs %s", n, got, want);
    }
    /* past cap: nothing written beyond it, the whole length counted */
    char small[8];
    memset(small, '#', sizeof small);
    rkv_json_out o = {small, 5, 0};
    rkv_json_raw(&o, "{\"instance\": ");
    rkv_json_u64(&o, 123456);
    cr_assert_eq(o.len, 19);
    cr_assert(memcmp(small, "{\"ins###", 8) == 0);
}

/* Token ids of every length from 1 to 12 digits, signed or not, with a
 * leading zero or not, each followed by every byte that may end or
 * continue a number: parsed exactly when they are JSON integers in int32
 * range, else RKV_ERR_FORMAT, as an oracle (strtoll on the digits) says.
 * The parser reads ids of up to 9 digits on a path of their own: this
 * covers both sides of its edges. */
Test(route_json, token_ids_of_every_length_match_an_oracle)
{
    rkv_rng g;
    rkv_rng_init(&g, rkv_test_seed("route_json.lengths"));
    /* short tails and tails of 8 bytes and more (the ids read 8 bytes at
     * a time need them) */
    static const char *const after[] = {"]}", ",7]}", " ]}", ".5]}", "e3]}", "E3]}", "",
                                        ",7,8,9,10,11]}", ".5,1,2,3,4]}", "e3,1,2,3,4]}",
                                        " , 1 ,2,3,4]}", "]}        ", "\x80]}     ",
                                        "/]}       ", ":]}       ", "-1,2,3]}   ",
                                        "\xb1]}       "};
    for (int it = 0; it < 4000; it++) {
        int len = 1 + (int)rkv_rng_below(&g, 12);
        int neg = (int)rkv_rng_below(&g, 3) == 0;
        char num[16];
        for (int i = 0; i < len; i++)
            num[i] = (char)('0' + rkv_rng_below(&g, 10));
        if (rkv_rng_below(&g, 4) != 0 && len > 1 && num[0] == '0')
            num[0] = (char)('1' + rkv_rng_below(&g, 9));
        if (rkv_rng_below(&g, 8) == 0) /* the int32 edges */
            len = snprintf(num, sizeof num, "%s", neg ? "2147483648" : "2147483647");
        if (rkv_rng_below(&g, 8) == 0)
            len = snprintf(num, sizeof num, "%s", neg ? "2147483649" : "2147483648");
        num[len] = 0;
        const char *tail = after[rkv_rng_below(&g, sizeof after / sizeof after[0])];
        char body[64];
        int bl = snprintf(body, sizeof body, "{\"token_ids\": [%s%s%s", neg ? "-" : "", num,
                          tail);
        long long v = strtoll(num, NULL, 10) * (neg ? -1 : 1);
        int ok = (len == 1 || num[0] != '0') && v >= INT32_MIN && v <= INT32_MAX &&
                 (tail[0] == ']' || tail[0] == ',' || tail[0] == ' ');
        int32_t tok[16];
        rkv_route_request req;
        rkv_status st = parse(body, (size_t)bl, tok, 16, &req);
        if (ok) {
            cr_assert_eq(st, RKV_OK, "%s: %s", body, rkv_last_error());
            cr_assert_geq(req.n_tokens, 1);
            cr_assert_eq(tok[0], (int32_t)v, "%s", body);
            uint32_t commas = 0;
            for (const char *t = tail; *t; t++)
                commas += *t == ',';
            cr_assert_eq(req.n_tokens, 1 + commas);
        } else {
            cr_assert_eq(st, RKV_ERR_FORMAT, "%s parsed", body);
            cr_assert_eq(req.n_tokens, 0);
        }
    }
}

/* The errors name the same byte as before the short ids' path: the bad
 * number's offending byte. */
Test(route_json, number_errors_name_their_byte)
{
    static const struct {
        const char *body, *err;
    } cases[] = {
        {"{\"token_ids\": [12345678901]}", "route request: a number out of range at byte 25"},
        {"{\"token_ids\": [2147483648]}",
         "route request: a token id out of int32 range at byte 25"},
        {"{\"token_ids\": [-2147483649]}", "route request: a number out of range at byte 25"},
        {"{\"token_ids\": [123456789.5]}", "route request: not an integer at byte 24"},
        {"{\"token_ids\": [12e3]}", "route request: not an integer at byte 17"},
        {"{\"token_ids\": [7, 012]}", "route request: not an integer at byte 19"},
        {"{\"token_ids\": [7, 123456789", "route request: expected ',' or ']' in token_ids "
                                         "at byte 27"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int32_t tok[4];
        rkv_route_request req;
        cr_assert_eq(parse(cases[i].body, strlen(cases[i].body), tok, 4, &req),
                     RKV_ERR_FORMAT, "%s", cases[i].body);
        cr_assert_str_eq(rkv_last_error(), cases[i].err, "%s", cases[i].body);
    }
}

/* A candidate of the answer is what the appenders write piece by piece. */
Test(route_json, candidate_matches_the_appenders)
{
    rkv_rng g;
    rkv_rng_init(&g, rkv_test_seed("route_json.candidate"));
    for (int it = 0; it < 20000; it++) {
        rkv_json_cand c = {rkv_rng_next(&g) >> rkv_rng_below(&g, 64),
                           rkv_rng_next(&g) >> rkv_rng_below(&g, 64),
                           rkv_rng_next(&g) >> rkv_rng_below(&g, 64),
                           rkv_rng_next(&g) >> rkv_rng_below(&g, 64),
                           rkv_rng_next(&g) >> rkv_rng_below(&g, 64),
                           (double)(int64_t)(rkv_rng_next(&g) % 4000000000000ull) /
                               (double)(1 + rkv_rng_below(&g, 3) * 7)};
        if (it % 97 == 0)
            c.score = it % 2 ? -0.0 : 1e300;
        int first = (int)rkv_rng_below(&g, 2);
        char want[512], got[512];
        rkv_json_out w = {want, sizeof want, 0};
        rkv_json_raw(&w, first ? "{\"instance\": " : ", {\"instance\": ");
        rkv_json_u64(&w, c.instance);
        static const char *const names[] = {"overlap_blocks", "device", "host", "disk"};
        const uint64_t vals[] = {c.pages, c.device, c.host, c.disk};
        for (int k = 0; k < 4; k++) {
            rkv_json_raw(&w, ", \"");
            rkv_json_raw(&w, names[k]);
            rkv_json_raw(&w, "\": ");
            rkv_json_u64(&w, vals[k]);
        }
        rkv_json_raw(&w, ", \"score\": ");
        rkv_json_num(&w, c.score);
        rkv_json_raw(&w, "}");
        /* appended after some text, into room that may cut it anywhere */
        size_t cap = 3 + (size_t)rkv_rng_below(&g, 260);
        memset(got, '#', sizeof got);
        rkv_json_out o = {got, cap, 0};
        rkv_json_raw(&o, "xy");
        rkv_json_candidate(&o, first, &c);
        cr_assert_eq(o.len, 2 + w.len);
        size_t kept = o.len < cap ? o.len : cap;
        cr_assert(memcmp(got + 2, want, kept - 2) == 0, "%s", want);
        cr_assert_eq(got[cap], '#', "written past cap");
        if (o.len < cap)
            cr_assert_eq(got[o.len], 0);
    }
}
