/*
 * sim/trace_parse.c -- one Mooncake trace line -> one record
 * (rkv_trace_parse_line; the rules are in trace.h).
 *
 * Owns a small strict JSON scanner for one line at a time: objects, arrays,
 * strings with escapes, numbers per the JSON grammar, true/false/null
 * (unknown fields' values are scanned and skipped, so they must be valid
 * JSON too). Every failure is RKV_ERR_FORMAT with "NAME:LINE: what" and,
 * for syntax errors, the column. Invariant: the caller's record is written
 * only on success; the id buffer may have grown either way.
 */
#include "sim/trace.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"

/* ------------------------------------------------------------------------ */
/* one-line JSON scanner                                                    */
/* ------------------------------------------------------------------------ */

#define RKV_JSON_MAX_DEPTH 64

typedef struct jscan {
    const char *start;
    const char *s;
    const char *end;
    const char *name;
    uint64_t line;
} jscan;

typedef struct jnum {
    int negative;
    int integer;      /* no fraction, no exponent                         */
    int overflow;     /* integer part does not fit uint64                 */
    uint64_t u;       /* magnitude when integer && !overflow              */
    double d;         /* value as a double                                */
} jnum;

static rkv_status jfail(const jscan *p, const char *what)
{
    return rkv_set_error(RKV_ERR_FORMAT, "%s:%llu: %s", p->name,
                         (unsigned long long)p->line, what);
}

static rkv_status jsyntax(const jscan *p, const char *expected)
{
    char what[160];
    size_t col = (size_t)(p->s - p->start) + 1;
    if (p->s >= p->end)
        snprintf(what, sizeof what,
                 "malformed JSON: expected %s at column %zu, found end of line",
                 expected, col);
    else if ((unsigned char)*p->s >= 0x20 && (unsigned char)*p->s < 0x7f)
        snprintf(what, sizeof what,
                 "malformed JSON: expected %s at column %zu, found '%c'",
                 expected, col, *p->s);
    else
        snprintf(what, sizeof what,
                 "malformed JSON: expected %s at column %zu, found byte 0x%02x",
                 expected, col, (unsigned)(unsigned char)*p->s);
    return jfail(p, what);
}

static void jws(jscan *p)
{
    while (p->s < p->end &&
           (*p->s == ' ' || *p->s == '\t' || *p->s == '\r' || *p->s == '\n'))
        p->s++;
}

static int jhex(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Scans a string at p->s (which must be '"'). If key != NULL, decodes it
 * into key[0..cap) when it is plain ASCII that fits; otherwise *key_ok = 0
 * (such a key can never name one of our fields). */
static rkv_status jstring(jscan *p, char *key, size_t cap, int *key_ok)
{
    size_t k = 0;
    int ok = 1;
    if (p->s >= p->end || *p->s != '"')
        return jsyntax(p, "'\"'");
    p->s++;
    for (;;) {
        if (p->s >= p->end)
            return jsyntax(p, "closing '\"'");
        unsigned char c = (unsigned char)*p->s;
        if (c == '"') {
            p->s++;
            break;
        }
        if (c < 0x20)
            return jsyntax(p, "a string character (control bytes must be "
                              "escaped)");
        if (c == '\\') {
            p->s++;
            if (p->s >= p->end)
                return jsyntax(p, "an escape character");
            char e = *p->s;
            char out;
            switch (e) {
            case '"': out = '"'; break;
            case '\\': out = '\\'; break;
            case '/': out = '/'; break;
            case 'b': out = '\b'; break;
            case 'f': out = '\f'; break;
            case 'n': out = '\n'; break;
            case 'r': out = '\r'; break;
            case 't': out = '\t'; break;
            case 'u': {
                unsigned v = 0;
                for (int i = 1; i <= 4; i++) {
                    int h = p->s + i < p->end ? jhex(p->s[i]) : -1;
                    if (h < 0) {
                        p->s += i;
                        return jsyntax(p, "a hex digit of a \\u escape");
                    }
                    v = v * 16 + (unsigned)h;
                }
                p->s += 4;
                if (v >= 0x20 && v < 0x7f)
                    out = (char)v;
                else {
                    out = 0;
                    ok = 0;
                }
                break;
            }
            default:
                return jsyntax(p, "a valid escape (\\\" \\\\ \\/ \\b \\f \\n "
                                  "\\r \\t \\uXXXX)");
            }
            p->s++;
            if (key && ok) {
                if (k + 1 < cap)
                    key[k++] = out;
                else
                    ok = 0;
            }
            continue;
        }
        if (key && ok) {
            if (c < 0x80 && k + 1 < cap)
                key[k++] = (char)c;
            else
                ok = 0;
        }
        p->s++;
    }
    if (key) {
        key[k] = '\0';
        *key_ok = ok;
    }
    return RKV_OK;
}

static int jdigit(const jscan *p)
{
    return p->s < p->end && *p->s >= '0' && *p->s <= '9';
}

static rkv_status jnumber(jscan *p, jnum *n)
{
    const char *b = p->s;
    memset(n, 0, sizeof *n);
    n->integer = 1;
    if (p->s < p->end && *p->s == '-') {
        n->negative = 1;
        p->s++;
    }
    if (!jdigit(p))
        return jsyntax(p, "a digit");
    if (*p->s == '0') {
        p->s++;
    } else {
        while (jdigit(p)) {
            uint64_t d = (uint64_t)(*p->s - '0');
            if (n->u > (UINT64_MAX - d) / 10)
                n->overflow = 1;
            else
                n->u = n->u * 10 + d;
            p->s++;
        }
    }
    if (p->s < p->end && *p->s == '.') {
        n->integer = 0;
        p->s++;
        if (!jdigit(p))
            return jsyntax(p, "a digit after '.'");
        while (jdigit(p))
            p->s++;
    }
    if (p->s < p->end && (*p->s == 'e' || *p->s == 'E')) {
        n->integer = 0;
        p->s++;
        if (p->s < p->end && (*p->s == '+' || *p->s == '-'))
            p->s++;
        if (!jdigit(p))
            return jsyntax(p, "a digit of the exponent");
        while (jdigit(p))
            p->s++;
    }
    /* strtod needs a terminated copy; JSON numbers in a trace are short. */
    char buf[128];
    size_t len = (size_t)(p->s - b);
    if (len >= sizeof buf) {
        p->s = b;
        return jfail(p, "number too long");
    }
    memcpy(buf, b, len);
    buf[len] = '\0';
    n->d = strtod(buf, NULL);
    return RKV_OK;
}

static rkv_status jskip(jscan *p, int depth);

static int jnum_start(char c)
{
    return c == '-' || (c >= '0' && c <= '9');
}

/* After '[' or '{': consumes an immediate close; says whether the
 * container was empty. */
static int jempty(jscan *p, char close)
{
    jws(p);
    if (p->s < p->end && *p->s == close) {
        p->s++;
        return 1;
    }
    return 0;
}

/* After a member: ',' means another follows (*more = 1), close ends the
 * container (*more = 0); anything else is a syntax error. */
static rkv_status jnext(jscan *p, char close, int *more)
{
    jws(p);
    if (p->s < p->end && *p->s == ',') {
        p->s++;
        *more = 1;
        return RKV_OK;
    }
    if (p->s < p->end && *p->s == close) {
        p->s++;
        *more = 0;
        return RKV_OK;
    }
    return jsyntax(p, close == ']' ? "',' or ']'" : "',' or '}'");
}

static rkv_status jskip_literal(jscan *p, const char *lit)
{
    size_t n = strlen(lit);
    if ((size_t)(p->end - p->s) < n || memcmp(p->s, lit, n) != 0)
        return jsyntax(p, "a JSON value");
    p->s += n;
    return RKV_OK;
}

/* Skips any JSON value (an unknown field's value). */
static rkv_status jskip(jscan *p, int depth)
{
    rkv_status st;
    if (depth > RKV_JSON_MAX_DEPTH)
        return jfail(p, "malformed JSON: nesting deeper than 64 levels");
    jws(p);
    if (p->s >= p->end)
        return jsyntax(p, "a JSON value");
    switch (*p->s) {
    case '"':
        return jstring(p, NULL, 0, NULL);
    case 't':
        return jskip_literal(p, "true");
    case 'f':
        return jskip_literal(p, "false");
    case 'n':
        return jskip_literal(p, "null");
    case '[':
        p->s++;
        for (int more = !jempty(p, ']'); more;) {
            if ((st = jskip(p, depth + 1)) != RKV_OK ||
                (st = jnext(p, ']', &more)) != RKV_OK)
                return st;
        }
        return RKV_OK;
    case '{':
        p->s++;
        for (int more = !jempty(p, '}'); more;) {
            jws(p);
            if ((st = jstring(p, NULL, 0, NULL)) != RKV_OK)
                return st;
            jws(p);
            if (p->s >= p->end || *p->s != ':')
                return jsyntax(p, "':'");
            p->s++;
            if ((st = jskip(p, depth + 1)) != RKV_OK ||
                (st = jnext(p, '}', &more)) != RKV_OK)
                return st;
        }
        return RKV_OK;
    default:
        if (jnum_start(*p->s)) {
            jnum n;
            return jnumber(p, &n);
        }
        return jsyntax(p, "a JSON value");
    }
}

static const char *jtype_name(char c)
{
    switch (c) {
    case '"': return "a string";
    case '[': return "an array";
    case '{': return "an object";
    case 't':
    case 'f': return "a boolean";
    case 'n': return "null";
    default: return "a number";
    }
}

static int jarray_start(char c)
{
    return c == '[';
}

#define JNO_INDEX ((size_t)-1)

/* Skips to the next value. If it does not start as `starts` accepts, the
 * value is skipped (so malformed JSON is blamed before its type) and the
 * error is "FIELD[INDEX]: expected EXPECTED, got TYPE" (no [INDEX] for
 * JNO_INDEX). */
static rkv_status jexpect(jscan *p, int (*starts)(char), const char *field,
                          size_t index, const char *expected)
{
    jws(p);
    if (p->s >= p->end)
        return jsyntax(p, "a value");
    if (starts(*p->s))
        return RKV_OK;
    char what[160];
    const char *type = jtype_name(*p->s);
    if (index == JNO_INDEX)
        snprintf(what, sizeof what, "%s: expected %s, got %s", field, expected,
                 type);
    else
        snprintf(what, sizeof what, "%s[%zu]: expected %s, got %s", field, index,
                 expected, type);
    rkv_status st = jskip(p, 1);
    return st != RKV_OK ? st : jfail(p, what);
}

/* A length field: a non-negative integer <= RKV_TRACE_MAX_LENGTH. */
static rkv_status jlength(jscan *p, const char *field, uint32_t *out)
{
    char what[160];
    rkv_status st = jexpect(p, jnum_start, field, JNO_INDEX, "an integer");
    if (st != RKV_OK)
        return st;
    jnum n;
    st = jnumber(p, &n);
    if (st != RKV_OK)
        return st;
    if (n.negative && (n.u != 0 || !n.integer)) {
        snprintf(what, sizeof what, "negative %s (%.17g)", field, n.d);
        return jfail(p, what);
    }
    if (!n.integer) {
        snprintf(what, sizeof what, "%s: expected an integer, got %.17g",
                 field, n.d);
        return jfail(p, what);
    }
    if (n.overflow || n.u > RKV_TRACE_MAX_LENGTH) {
        snprintf(what, sizeof what, "%s too large (limit %u)", field,
                 RKV_TRACE_MAX_LENGTH);
        return jfail(p, what);
    }
    *out = (uint32_t)n.u;
    return RKV_OK;
}

static rkv_status jtimestamp(jscan *p, double *out)
{
    char what[160];
    rkv_status st = jexpect(p, jnum_start, "timestamp", JNO_INDEX, "a number");
    if (st != RKV_OK)
        return st;
    jnum n;
    st = jnumber(p, &n);
    if (st != RKV_OK)
        return st;
    if (!isfinite(n.d) || n.d > 1e15)
        return jfail(p, "timestamp out of range");
    if (n.d < 0) {
        snprintf(what, sizeof what, "negative timestamp (%.17g)", n.d);
        return jfail(p, what);
    }
    *out = n.d;
    return RKV_OK;
}

static rkv_status jgrow(uint64_t **ids, size_t *cap, size_t need)
{
    if (need <= *cap)
        return RKV_OK;
    size_t nc = *cap ? *cap : 64;
    while (nc < need)
        nc *= 2;
    uint64_t *n = realloc(*ids, nc * sizeof **ids);
    if (!n)
        return rkv_set_error(RKV_ERR_NOMEM, "trace reader: out of memory "
                                            "for %zu hash ids", nc);
    *ids = n;
    *cap = nc;
    return RKV_OK;
}

static rkv_status jhash_ids(jscan *p, uint64_t **ids, size_t *cap,
                            uint32_t *count)
{
    char what[160];
    rkv_status st;
    size_t n = 0;
    if ((st = jexpect(p, jarray_start, "hash_ids", JNO_INDEX, "an array")) !=
        RKV_OK)
        return st;
    p->s++;
    for (int more = !jempty(p, ']'); more;) {
        if ((st = jexpect(p, jnum_start, "hash_ids", n,
                          "a non-negative integer")) != RKV_OK)
            return st;
        jnum v;
        if ((st = jnumber(p, &v)) != RKV_OK)
            return st;
        if (!v.integer || (v.negative && v.u != 0) || v.overflow) {
            snprintf(what, sizeof what,
                     "hash_ids[%zu]: expected a non-negative integer "
                     "below 2^64, got %.17g",
                     n, v.d);
            return jfail(p, what);
        }
        if (n >= RKV_TRACE_MAX_LENGTH / RKV_TRACE_BLOCK_TOKENS + 1)
            return jfail(p, "hash_ids: too many blocks");
        if ((st = jgrow(ids, cap, n + 1)) != RKV_OK)
            return st;
        (*ids)[n++] = v.u;
        if ((st = jnext(p, ']', &more)) != RKV_OK)
            return st;
    }
    *count = (uint32_t)n;
    return RKV_OK;
}

enum { F_TS = 1, F_IN = 2, F_OUT = 4, F_IDS = 8, F_ALL = 15 };

rkv_status rkv_trace_parse_line(const char *line, size_t len,
                                const char *name, uint64_t line_no,
                                rkv_trace_record *out, uint64_t **ids,
                                size_t *ids_cap)
{
    jscan p = {line, line, line + len, name ? name : "<trace>", line_no};
    rkv_trace_record rec;
    rkv_status st;
    unsigned seen = 0;
    char what[200];

    if (!line || !out || !ids || !ids_cap)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_trace_parse_line: NULL argument");
    memset(&rec, 0, sizeof rec);
    rec.line = line_no;
    jws(&p);
    if (p.s >= p.end || *p.s != '{')
        return jsyntax(&p, "'{' (one JSON object per line)");
    p.s++;
    for (int more = !jempty(&p, '}'); more;) {
        char key[32];
        int key_ok = 0;
        jws(&p);
        if ((st = jstring(&p, key, sizeof key, &key_ok)) != RKV_OK)
            return st;
        jws(&p);
        if (p.s >= p.end || *p.s != ':')
            return jsyntax(&p, "':'");
        p.s++;
        unsigned f = 0;
        if (key_ok) {
            if (!strcmp(key, "timestamp"))
                f = F_TS;
            else if (!strcmp(key, "input_length"))
                f = F_IN;
            else if (!strcmp(key, "output_length"))
                f = F_OUT;
            else if (!strcmp(key, "hash_ids"))
                f = F_IDS;
        }
        if (f & seen) {
            snprintf(what, sizeof what, "duplicate field \"%s\"", key);
            return jfail(&p, what);
        }
        seen |= f;
        switch (f) {
        case F_TS: st = jtimestamp(&p, &rec.timestamp_ms); break;
        case F_IN: st = jlength(&p, "input_length", &rec.input_length); break;
        case F_OUT: st = jlength(&p, "output_length", &rec.output_length); break;
        case F_IDS: st = jhash_ids(&p, ids, ids_cap, &rec.num_hash_ids); break;
        default: st = jskip(&p, 1); break;
        }
        if (st != RKV_OK || (st = jnext(&p, '}', &more)) != RKV_OK)
            return st;
    }
    jws(&p);
    if (p.s != p.end)
        return jsyntax(&p, "end of line after the object");
    if (seen != F_ALL) {
        const char *missing = !(seen & F_TS)    ? "timestamp"
                              : !(seen & F_IN)  ? "input_length"
                              : !(seen & F_OUT) ? "output_length"
                                                : "hash_ids";
        snprintf(what, sizeof what, "missing field \"%s\"", missing);
        return jfail(&p, what);
    }
    if (rec.input_length == 0)
        return jfail(&p, "input_length is 0 (a request needs a prompt)");
    uint64_t cap = (uint64_t)rec.num_hash_ids * RKV_TRACE_BLOCK_TOKENS;
    if (rec.input_length > cap ||
        rec.input_length <= cap - RKV_TRACE_BLOCK_TOKENS) {
        snprintf(what, sizeof what,
                 "input_length %u does not fit %u hash_ids of %u tokens "
                 "(needs %llu < input_length <= %llu)",
                 rec.input_length, rec.num_hash_ids, RKV_TRACE_BLOCK_TOKENS,
                 (unsigned long long)(cap ? cap - RKV_TRACE_BLOCK_TOKENS : 0),
                 (unsigned long long)cap);
        return jfail(&p, what);
    }
    rec.hash_ids = *ids;
    *out = rec;
    return RKV_OK;
}
