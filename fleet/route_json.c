/*
 * fleet/route_json.c -- rkv_route_json (fleet/route_json.h): a strict
 * one-pass parser of the route request over a bounded cursor (every read
 * checks the end first, so a truncated body is an error, never a read
 * past it), the error object's writer, and the answer's appenders.
 */
#include "fleet/route_json.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/status.h"

typedef struct cursor {
    const char *p, *start, *end;
} cursor;

static rkv_status bad(const cursor *c, const char *what)
{
    return rkv_set_error(RKV_ERR_FORMAT, "route request: %s at byte %zu", what,
                         (size_t)(c->p - c->start));
}

static void ws(cursor *c)
{
    while (c->p < c->end &&
           (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

/* Is the next byte ch? Consumes it when so. */
static int eat(cursor *c, char ch)
{
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return 1;
    }
    return 0;
}

static int digit(const cursor *c)
{
    return c->p < c->end && *c->p >= '0' && *c->p <= '9';
}

/* A JSON integer (no fraction, no exponent) of magnitude <= max into *mag,
 * its sign into *neg (only when allow_neg). */
static rkv_status integer(cursor *c, int allow_neg, uint64_t max, uint64_t *mag, int *neg)
{
    *neg = 0;
    if (eat(c, '-')) {
        if (!allow_neg)
            return bad(c, "a negative namespace");
        *neg = 1;
    }
    if (!digit(c))
        return bad(c, "expected a number");
    uint64_t v = 0;
    if (*c->p == '0') {
        c->p++;
    } else {
        while (digit(c)) {
            uint64_t d = (uint64_t)(*c->p - '0');
            if (v > (max - d) / 10)
                return bad(c, "a number out of range");
            v = v * 10 + d;
            c->p++;
        }
    }
    if (c->p < c->end && (*c->p == '.' || *c->p == 'e' || *c->p == 'E' || digit(c)))
        return bad(c, "not an integer");
    *mag = v;
    return RKV_OK;
}

/* The common token id: 1 to 9 digits, no sign, no leading zero, followed
 * by the end or a byte that does not continue a number. Consumes it into
 * *v and returns 1; otherwise consumes nothing and returns 0, and
 * integer() reads it (so errors and their byte offsets are integer()'s).
 * Nine digits cannot leave int32 range: no check per digit (integer()'s
 * overflow test divides once per digit, most of the parse's time for a
 * long prompt). With 8 bytes to read, the digits are found and converted
 * 8 at a time (digits8): no branch per digit to mispredict. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define RKV_LITTLE_ENDIAN 1
#else
#define RKV_LITTLE_ENDIAN 0 /* digits8 reads bytes in little-endian order */
#endif

static int ends_number(const cursor *c, const char *q)
{
    return q >= c->end ||
           !((*q >= '0' && *q <= '9') || *q == '.' || *q == 'e' || *q == 'E');
}

/* The leading digits of p[0..8) (1..8: how many, 0: none) into *v. */
static int digits8(const char *p, uint32_t *v)
{
    uint64_t w;
    memcpy(&w, p, 8); /* byte i of w is p[i] (little-endian) */
    const uint64_t lo7 = 0x7f7f7f7f7f7f7f7full, hi = 0x8080808080808080ull;
    /* a byte's top bit: above '9', not below '0', or >= 0x80; the sums
     * of the low 7 bits stay within their byte (at most 0x7f + 0x50) */
    uint64_t above9 = (w & lo7) + 0x4646464646464646ull;
    uint64_t from0 = (w & lo7) + 0x5050505050505050ull;
    uint64_t not_digit = (above9 | ~from0 | w) & hi;
    int k = not_digit ? __builtin_ctzll(not_digit) / 8 : 8;
    if (k == 0)
        return 0;
    /* the k digits' values (a byte below '0' past them may borrow from
     * the bytes above it: shifted out) at the top, then pairs, quads and
     * the eight summed: each step's lanes hold at most 99, 9999 */
    uint64_t d = (w - 0x3030303030303030ull) << (8 * (8 - k));
    d = (d * 10 + (d >> 8)) & 0x00ff00ff00ff00ffull;
    d = (d * 100 + (d >> 16)) & 0x0000ffff0000ffffull;
    d = (d * 10000 + (d >> 32)) & 0xffffffffull;
    *v = (uint32_t)d;
    return k;
}

static int short_id(cursor *c, int32_t *v)
{
    const char *p = c->p, *q = p;
    if (q >= c->end || *q < '1' || *q > '9')
        return 0;
    uint32_t x = 0;
    int k;
    if (RKV_LITTLE_ENDIAN && c->end - p >= 8 && (k = digits8(p, &x)) < 8) {
        q = p + k;
    } else {
        x = 0;
        do {
            x = x * 10 + (uint32_t)(*q++ - '0');
        } while (q < c->end && q - p < 9 && *q >= '0' && *q <= '9');
    }
    if (!ends_number(c, q))
        return 0;
    c->p = q;
    *v = (int32_t)x;
    return 1;
}

static rkv_status token_array(cursor *c, int32_t *tokens, uint32_t cap, uint32_t *n)
{
    *n = 0;
    if (!eat(c, '['))
        return bad(c, "token_ids is not an array");
    ws(c);
    if (eat(c, ']'))
        return RKV_OK;
    for (;;) {
        ws(c);
        int32_t v;
        if (!short_id(c, &v)) {
            uint64_t mag = 0;
            int neg = 0;
            /* int32: magnitude up to 2^31 negative, 2^31 - 1 positive */
            rkv_status st = integer(c, 1, (uint64_t)INT32_MAX + 1, &mag, &neg);
            if (st != RKV_OK)
                return st;
            if (!neg && mag > (uint64_t)INT32_MAX)
                return bad(c, "a token id out of int32 range");
            v = neg ? (int32_t)(-(int64_t)mag) : (int32_t)mag;
        }
        if (*n == cap)
            return rkv_set_error(RKV_ERR_NO_SPACE, "route request: more than %u "
                                 "token ids", cap);
        tokens[(*n)++] = v;
        ws(c);
        if (eat(c, ']'))
            return RKV_OK;
        if (!eat(c, ','))
            return bad(c, "expected ',' or ']' in token_ids");
    }
}

rkv_status rkv_route_json_parse(const char *body, size_t len, int32_t *tokens,
                                uint32_t cap, rkv_route_request *req)
{
    if (req)
        memset(req, 0, sizeof *req);
    if (!req || (!body && len) || (!tokens && cap))
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_route_json_parse: NULL argument");
    cursor c = {body, body, body + len};
    rkv_route_request r = {0, 0};
    int have_tokens = 0, have_ns = 0;
    rkv_status st = RKV_OK;
    ws(&c);
    if (!eat(&c, '{'))
        return bad(&c, "expected a JSON object");
    ws(&c);
    if (!eat(&c, '}')) {
        for (;;) {
            ws(&c);
            if (!eat(&c, '"'))
                return bad(&c, "expected a member name");
            const char *k = c.p;
            while (c.p < c.end && *c.p != '"' && *c.p != '\\' &&
                   (unsigned char)*c.p >= 0x20)
                c.p++;
            size_t klen = (size_t)(c.p - k);
            if (!eat(&c, '"'))
                return bad(&c, "a member name with an escape, a control byte, or "
                               "no end");
            ws(&c);
            if (!eat(&c, ':'))
                return bad(&c, "expected ':'");
            ws(&c);
            if (klen == 9 && memcmp(k, "token_ids", 9) == 0) {
                if (have_tokens)
                    return bad(&c, "token_ids given twice");
                have_tokens = 1;
                st = token_array(&c, tokens, cap, &r.n_tokens);
            } else if (klen == 9 && memcmp(k, "namespace", 9) == 0) {
                if (have_ns)
                    return bad(&c, "namespace given twice");
                have_ns = 1;
                int neg = 0;
                st = integer(&c, 0, UINT64_MAX, &r.ns, &neg);
            } else {
                return bad(&c, "an unknown member (token_ids, namespace)");
            }
            if (st != RKV_OK)
                return st;
            ws(&c);
            if (eat(&c, '}'))
                break;
            if (!eat(&c, ','))
                return bad(&c, "expected ',' or '}'");
        }
    }
    ws(&c);
    if (c.p != c.end)
        return bad(&c, "bytes after the object");
    if (!have_tokens)
        return bad(&c, "no token_ids");
    *req = r;
    return RKV_OK;
}

size_t rkv_route_json_error(char *buf, size_t cap, int code, const char *msg)
{
    char esc[512];
    size_t k = 0;
    for (const char *m = msg ? msg : ""; *m && k + 7 < sizeof esc; m++) {
        unsigned char ch = (unsigned char)*m;
        if (ch == '"' || ch == '\\') {
            esc[k++] = '\\';
            esc[k++] = (char)ch;
        } else if (ch < 0x20) {
            k += (size_t)snprintf(esc + k, sizeof esc - k, "\\u%04x", ch);
        } else {
            esc[k++] = ch >= 0x80 ? '?' : (char)ch;
        }
    }
    esc[k] = 0;
    int n = snprintf(buf, cap, "{\"error\": \"%s\", \"status\": %d}\n", esc, code);
    return n < 0 ? cap : (size_t)n;
}

static void put(rkv_json_out *o, const char *s, size_t n)
{
    if (o->len < o->cap)
        memcpy(o->buf + o->len, s, n < o->cap - o->len ? n : o->cap - o->len);
    o->len += n;
    if (o->len < o->cap)
        o->buf[o->len] = 0; /* a terminator while there is room, as snprintf */
}

void rkv_json_raw(rkv_json_out *o, const char *s)
{
    put(o, s, strlen(s));
}

/* v's digits into d[0..20), right-aligned; returns where they start. */
static char *digits(char d[20], uint64_t v)
{
    char *p = d + 20;
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return p;
}

/* v as "%.10g" prints it into t (room for 32 bytes); its length. */
static size_t num_to(char *t, double v)
{
    /* an integer of at most 10 digits is what %.10g prints digit for
     * digit; anything else (fractions, larger, -0, NaN, inf) goes to it */
    if (v > -1e10 && v < 1e10 && v == (double)(int64_t)v && !(v == 0 && signbit(v))) {
        int64_t i = (int64_t)v;
        size_t k = 0;
        if (i < 0)
            t[k++] = '-';
        char d[20];
        char *p = digits(d, i < 0 ? (uint64_t)0 - (uint64_t)i : (uint64_t)i);
        memcpy(t + k, p, (size_t)(d + 20 - p));
        return k + (size_t)(d + 20 - p);
    }
    int n = snprintf(t, 32, "%.10g", v);
    return n > 0 && n < 32 ? (size_t)n : 0;
}

void rkv_json_u64(rkv_json_out *o, uint64_t v)
{
    char d[20];
    char *p = digits(d, v);
    put(o, p, (size_t)(d + 20 - p));
}

void rkv_json_num(rkv_json_out *o, double v)
{
    char t[32];
    put(o, t, num_to(t, v));
}

void rkv_json_candidate(rkv_json_out *o, int first, const rkv_json_cand *c)
{
    /* formatted in one stack buffer and appended once: the answer lists
     * up to 64 of these, and one bounded append per number and piece of
     * text was the larger part of writing it */
    char t[256], d[20], *p;
    size_t k = 0;
#define LIT(s) (memcpy(t + k, s, sizeof s - 1), k += sizeof s - 1)
#define U64(v) (p = digits(d, v), memcpy(t + k, p, (size_t)(d + 20 - p)), k += (size_t)(d + 20 - p))
    if (first)
        LIT("{\"instance\": ");
    else
        LIT(", {\"instance\": ");
    U64(c->instance);
    LIT(", \"overlap_blocks\": ");
    U64(c->pages);
    LIT(", \"device\": ");
    U64(c->device);
    LIT(", \"host\": ");
    U64(c->host);
    LIT(", \"disk\": ");
    U64(c->disk);
    LIT(", \"score\": ");
    k += num_to(t + k, c->score);
    LIT("}");
#undef LIT
#undef U64
    put(o, t, k);
}
