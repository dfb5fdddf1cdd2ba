/*
 * sim/trace_parse.c -- one trace line (Mooncake or Bailian format, with
 * optional retention hints) -> one record (rkv_trace_parse_line_fmt; the
 * rules are in trace.h).
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

typedef struct json_scan {
    const char *start;
    const char *s;
    const char *end;
    const char *name;
    uint64_t line;
} json_scan;

typedef struct json_num {
    int negative;
    int integer;      /* no fraction, no exponent                         */
    int overflow;     /* integer part does not fit uint64                 */
    uint64_t u;       /* magnitude when integer && !overflow              */
    double d;         /* value as a double                                */
} json_num;

static rkv_status json_fail(const json_scan *p, const char *what)
{
    return rkv_set_error(RKV_ERR_FORMAT, "%s:%llu: %s", p->name,
                         (unsigned long long)p->line, what);
}

static rkv_status json_syntax(const json_scan *p, const char *expected)
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
    return json_fail(p, what);
}

static void json_skip_ws(json_scan *p)
{
    while (p->s < p->end &&
           (*p->s == ' ' || *p->s == '\t' || *p->s == '\r' || *p->s == '\n'))
        p->s++;
}

static int json_hex(char c)
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
static rkv_status json_string(json_scan *p, char *key, size_t cap, int *key_ok)
{
    size_t k = 0;
    int ok = 1;
    if (p->s >= p->end || *p->s != '"')
        return json_syntax(p, "'\"'");
    p->s++;
    for (;;) {
        if (p->s >= p->end)
            return json_syntax(p, "closing '\"'");
        unsigned char c = (unsigned char)*p->s;
        if (c == '"') {
            p->s++;
            break;
        }
        if (c < 0x20)
            return json_syntax(p, "a string character (control bytes must be "
                              "escaped)");
        if (c == '\\') {
            p->s++;
            if (p->s >= p->end)
                return json_syntax(p, "an escape character");
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
                    int h = p->s + i < p->end ? json_hex(p->s[i]) : -1;
                    if (h < 0) {
                        p->s += i;
                        return json_syntax(p, "a hex digit of a \\u escape");
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
                return json_syntax(p, "a valid escape (\\\" \\\\ \\/ \\b "
                                      "\\f \\n \\r \\t \\uXXXX)");
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

static int json_digit(const json_scan *p)
{
    return p->s < p->end && *p->s >= '0' && *p->s <= '9';
}

static rkv_status json_number(json_scan *p, json_num *n)
{
    const char *b = p->s;
    memset(n, 0, sizeof *n);
    n->integer = 1;
    if (p->s < p->end && *p->s == '-') {
        n->negative = 1;
        p->s++;
    }
    if (!json_digit(p))
        return json_syntax(p, "a digit");
    if (*p->s == '0') {
        p->s++;
    } else {
        while (json_digit(p)) {
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
        if (!json_digit(p))
            return json_syntax(p, "a digit after '.'");
        while (json_digit(p))
            p->s++;
    }
    if (p->s < p->end && (*p->s == 'e' || *p->s == 'E')) {
        n->integer = 0;
        p->s++;
        if (p->s < p->end && (*p->s == '+' || *p->s == '-'))
            p->s++;
        if (!json_digit(p))
            return json_syntax(p, "a digit of the exponent");
        while (json_digit(p))
            p->s++;
    }
    /* strtod needs a terminated copy; JSON numbers in a trace are short. */
    char buf[128];
    size_t len = (size_t)(p->s - b);
    if (len >= sizeof buf) {
        p->s = b;
        return json_fail(p, "number too long");
    }
    memcpy(buf, b, len);
    buf[len] = '\0';
    n->d = strtod(buf, NULL);
    return RKV_OK;
}

static rkv_status json_skip(json_scan *p, int depth);

static int json_num_start(char c)
{
    return c == '-' || (c >= '0' && c <= '9');
}

/* After '[' or '{': consumes an immediate close; says whether the
 * container was empty. */
static int json_empty(json_scan *p, char close)
{
    json_skip_ws(p);
    if (p->s < p->end && *p->s == close) {
        p->s++;
        return 1;
    }
    return 0;
}

/* After a member: ',' means another follows (*more = 1), close ends the
 * container (*more = 0); anything else is a syntax error. */
static rkv_status json_next(json_scan *p, char close, int *more)
{
    json_skip_ws(p);
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
    return json_syntax(p, close == ']' ? "',' or ']'" : "',' or '}'");
}

static rkv_status json_skip_literal(json_scan *p, const char *lit)
{
    size_t n = strlen(lit);
    if ((size_t)(p->end - p->s) < n || memcmp(p->s, lit, n) != 0)
        return json_syntax(p, "a JSON value");
    p->s += n;
    return RKV_OK;
}

/* Skips any JSON value (an unknown field's value). */
static rkv_status json_skip(json_scan *p, int depth)
{
    rkv_status st;
    if (depth > RKV_JSON_MAX_DEPTH)
        return json_fail(p, "malformed JSON: nesting deeper than 64 levels");
    json_skip_ws(p);
    if (p->s >= p->end)
        return json_syntax(p, "a JSON value");
    switch (*p->s) {
    case '"':
        return json_string(p, NULL, 0, NULL);
    case 't':
        return json_skip_literal(p, "true");
    case 'f':
        return json_skip_literal(p, "false");
    case 'n':
        return json_skip_literal(p, "null");
    case '[':
        p->s++;
        for (int more = !json_empty(p, ']'); more;) {
            if ((st = json_skip(p, depth + 1)) != RKV_OK ||
                (st = json_next(p, ']', &more)) != RKV_OK)
                return st;
        }
        return RKV_OK;
    case '{':
        p->s++;
        for (int more = !json_empty(p, '}'); more;) {
            json_skip_ws(p);
            if ((st = json_string(p, NULL, 0, NULL)) != RKV_OK)
                return st;
            json_skip_ws(p);
            if (p->s >= p->end || *p->s != ':')
                return json_syntax(p, "':'");
            p->s++;
            if ((st = json_skip(p, depth + 1)) != RKV_OK ||
                (st = json_next(p, '}', &more)) != RKV_OK)
                return st;
        }
        return RKV_OK;
    default:
        if (json_num_start(*p->s)) {
            json_num n;
            return json_number(p, &n);
        }
        return json_syntax(p, "a JSON value");
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

static int json_array_start(char c)
{
    return c == '[';
}

#define JSON_NO_INDEX ((size_t)-1)

/* Skips to the next value. If it does not start as `starts` accepts, the
 * value is skipped (so malformed JSON is blamed before its type) and the
 * error is "FIELD[INDEX]: expected EXPECTED, got TYPE" (no [INDEX] for
 * JSON_NO_INDEX). */
static rkv_status json_expect(json_scan *p, int (*starts)(char), const char *field,
                              size_t index, const char *expected)
{
    json_skip_ws(p);
    if (p->s >= p->end)
        return json_syntax(p, "a value");
    if (starts(*p->s))
        return RKV_OK;
    char what[160];
    const char *type = jtype_name(*p->s);
    if (index == JSON_NO_INDEX)
        snprintf(what, sizeof what, "%s: expected %s, got %s", field, expected,
                 type);
    else
        snprintf(what, sizeof what, "%s[%zu]: expected %s, got %s", field, index,
                 expected, type);
    rkv_status st = json_skip(p, 1);
    return st != RKV_OK ? st : json_fail(p, what);
}

/* The number at field (field[index] unless JSON_NO_INDEX); expected says what
 * the error names when no number starts there. */
static rkv_status json_number_at(json_scan *p, const char *field, size_t index,
                                 const char *expected, json_num *n)
{
    rkv_status st = json_expect(p, json_num_start, field, index, expected);
    return st != RKV_OK ? st : json_number(p, n);
}

/* A length field: a non-negative integer <= limit (RKV_TRACE_MAX_LENGTH
 * or RKV_TRACE_MAX_OUTPUT). */
static rkv_status json_length(json_scan *p, const char *field, uint32_t limit,
                              uint32_t *out)
{
    char what[160];
    json_num n;
    rkv_status st = json_number_at(p, field, JSON_NO_INDEX, "an integer", &n);
    if (st != RKV_OK)
        return st;
    if (n.negative && (n.u != 0 || !n.integer)) {
        snprintf(what, sizeof what, "negative %s (%.17g)", field, n.d);
        return json_fail(p, what);
    }
    if (!n.integer) {
        snprintf(what, sizeof what, "%s: expected an integer, got %.17g",
                 field, n.d);
        return json_fail(p, what);
    }
    if (n.overflow || n.u > limit) {
        snprintf(what, sizeof what, "%s too large (limit %u)", field, limit);
        return json_fail(p, what);
    }
    *out = (uint32_t)n.u;
    return RKV_OK;
}

static rkv_status json_timestamp(json_scan *p, double *out)
{
    char what[160];
    json_num n;
    rkv_status st = json_number_at(p, "timestamp", JSON_NO_INDEX, "a number", &n);
    if (st != RKV_OK)
        return st;
    if (!isfinite(n.d) || n.d > 1e15)
        return json_fail(p, "timestamp out of range");
    if (n.d < 0) {
        snprintf(what, sizeof what, "negative timestamp (%.17g)", n.d);
        return json_fail(p, what);
    }
    *out = n.d;
    return RKV_OK;
}

static rkv_status json_grow_ids(uint64_t **ids, size_t *cap, size_t need)
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

static rkv_status json_hash_ids(json_scan *p, uint64_t **ids, size_t *cap,
                                uint32_t *count)
{
    char what[160];
    rkv_status st;
    size_t n = 0;
    if ((st = json_expect(p, json_array_start, "hash_ids", JSON_NO_INDEX, "an array")) !=
        RKV_OK)
        return st;
    p->s++;
    for (int more = !json_empty(p, ']'); more;) {
        json_num v;
        if ((st = json_number_at(p, "hash_ids", n, "a non-negative integer", &v)) !=
            RKV_OK)
            return st;
        if (!v.integer || (v.negative && v.u != 0) || v.overflow) {
            snprintf(what, sizeof what,
                     "hash_ids[%zu]: expected a non-negative integer "
                     "below 2^64, got %.17g",
                     n, v.d);
            return json_fail(p, what);
        }
        if (n >= RKV_TRACE_MAX_LENGTH)
            return json_fail(p, "hash_ids: too many blocks");
        if ((st = json_grow_ids(ids, cap, n + 1)) != RKV_OK)
            return st;
        (*ids)[n++] = v.u;
        if ((st = json_next(p, ']', &more)) != RKV_OK)
            return st;
    }
    *count = (uint32_t)n;
    return RKV_OK;
}

/* An integer field in [lo, hi] (hi < 2^63 when lo < 0). */
static rkv_status json_integer(json_scan *p, const char *field, int64_t lo,
                               uint64_t hi, uint64_t *mag, int *neg)
{
    char what[200];
    json_num n;
    rkv_status st = json_number_at(p, field, JSON_NO_INDEX, "an integer", &n);
    if (st != RKV_OK)
        return st;
    if (!n.integer) {
        snprintf(what, sizeof what, "%s: expected an integer, got %.17g",
                 field, n.d);
        return json_fail(p, what);
    }
    int negative = n.negative && n.u != 0;
    if (n.overflow || (negative && (lo >= 0 || n.u > (uint64_t)(-(lo + 1)) + 1)) ||
        (!negative && n.u > hi)) {
        snprintf(what, sizeof what, "%s out of range (%lld..%llu)", field,
                 (long long)lo, (unsigned long long)hi);
        return json_fail(p, what);
    }
    *mag = n.u;
    *neg = negative;
    return RKV_OK;
}

/* 64-bit FNV-1a of bytes. */
static uint64_t fnv1a(const char *b, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)b[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* "session": an integer 0..2^64-2 or a string (its raw text hashed). */
static rkv_status json_session(json_scan *p, uint64_t *out)
{
    json_skip_ws(p);
    if (p->s < p->end && *p->s == '"') {
        const char *b = p->s;
        rkv_status st = json_string(p, NULL, 0, NULL);
        if (st != RKV_OK)
            return st;
        uint64_t h = fnv1a(b + 1, (size_t)(p->s - b) - 2);
        *out = h == UINT64_MAX ? UINT64_MAX - 1 : h;
        return RKV_OK;
    }
    uint64_t m;
    int neg;
    rkv_status st = json_integer(p, "session", 0, UINT64_MAX - 1, &m, &neg);
    if (st == RKV_OK)
        *out = m;
    return st;
}

static int json_string_start(char c)
{
    return c == '"';
}

enum {
    F_TS = 1, F_IN = 2, F_OUT = 4, F_IDS = 8, F_ALL = 15,
    F_CHAT = 16, F_PARENT = 32, F_TYPE = 64, F_TURN = 128,
    F_PRIO = 256, F_TTL = 512, F_SESSION = 1024, F_SESSION_END = 2048,
    F_PRIO_DUR = 4096
};

const char *rkv_trace_format_name(int format)
{
    switch (format) {
    case RKV_TRACE_FMT_AUTO: return "auto";
    case RKV_TRACE_FMT_MOONCAKE: return "mooncake";
    case RKV_TRACE_FMT_BAILIAN: return "bailian";
    default: return NULL;
    }
}

int rkv_trace_format_parse(const char *s, int *out)
{
    for (int f = RKV_TRACE_FMT_AUTO; s && f <= RKV_TRACE_FMT_BAILIAN; f++)
        if (!strcmp(s, rkv_trace_format_name(f))) {
            *out = f;
            return 1;
        }
    return 0;
}

/* Which field a key names in a format (0: none, skipped). */
static unsigned field_of(const char *key, int format)
{
    static const struct {
        const char *key;
        unsigned f;
        int bailian_only;
    } keys[] = {
        {"timestamp", F_TS, 0}, {"input_length", F_IN, 0},
        {"output_length", F_OUT, 0}, {"hash_ids", F_IDS, 0},
        {"priority", F_PRIO, 0}, {"ttl_ms", F_TTL, 0},
        {"session", F_SESSION, 0}, {"chat_id", F_CHAT, 1},
        {"parent_chat_id", F_PARENT, 1}, {"type", F_TYPE, 1},
        {"turn", F_TURN, 1}, {"session_end", F_SESSION_END, 0},
        {"priority_duration_ms", F_PRIO_DUR, 0},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!strcmp(key, keys[i].key))
            return keys[i].bailian_only && format == RKV_TRACE_FMT_MOONCAKE
                       ? 0 : keys[i].f;
    return 0;
}

/* A duration in ms, 1 .. 2^40 (past the simulated clock's end); 0 is
 * refused with `if_zero` (the field's "none" is its absence). */
static rkv_status json_duration(json_scan *p, const char *field, const char *if_zero,
                                uint64_t *out)
{
    uint64_t m;
    int neg;
    rkv_status st = json_integer(p, field, 0, (uint64_t)1 << 40, &m, &neg);
    if (st == RKV_OK && m == 0)
        return json_fail(p, if_zero);
    if (st == RKV_OK)
        *out = m;
    return st;
}

/* One field's value into rec. */
static rkv_status parse_field(json_scan *p, unsigned f, rkv_trace_record *rec,
                              uint64_t **ids, size_t *ids_cap, double *ts)
{
    uint64_t m;
    int neg;
    rkv_status st;
    switch (f) {
    case F_TS: return json_timestamp(p, ts);
    case F_IN:
        return json_length(p, "input_length", RKV_TRACE_MAX_LENGTH,
                           &rec->input_length);
    case F_OUT:
        return json_length(p, "output_length", RKV_TRACE_MAX_OUTPUT,
                           &rec->output_length);
    case F_IDS: return json_hash_ids(p, ids, ids_cap, &rec->num_hash_ids);
    case F_PRIO:
        st = json_integer(p, "priority", 0, RKV_PRIORITY_MAX, &m, &neg);
        if (st == RKV_OK)
            rec->priority = (int32_t)m;
        return st;
    case F_TTL:
        return json_duration(p, "ttl_ms", "ttl_ms is 0 (a pin needs a time; leave "
                             "the field out for none)", &rec->ttl_ms);
    case F_PRIO_DUR:
        return json_duration(p, "priority_duration_ms",
                             "priority_duration_ms is 0 (leave the field out "
                             "for a priority that stays)",
                             &rec->priority_duration_ms);
    case F_SESSION:
        st = json_session(p, &rec->session);
        if (st == RKV_OK)
            rec->has_session = 1;
        return st;
    case F_CHAT:
        st = json_integer(p, "chat_id", 0, INT64_MAX, &m, &neg);
        if (st == RKV_OK)
            rec->chat_id = (int64_t)m;
        return st;
    case F_PARENT:
        st = json_integer(p, "parent_chat_id", -1, INT64_MAX, &m, &neg);
        if (st == RKV_OK)
            rec->parent_chat_id = neg ? -1 : (int64_t)m;
        return st;
    case F_TYPE:
        st = json_expect(p, json_string_start, "type", JSON_NO_INDEX, "a string");
        return st != RKV_OK ? st : json_string(p, NULL, 0, NULL);
    case F_TURN:
        return json_integer(p, "turn", 0, INT64_MAX, &m, &neg);
    case F_SESSION_END: /* true or false */
        json_skip_ws(p);
        if (p->end - p->s >= 4 && memcmp(p->s, "true", 4) == 0) {
            p->s += 4;
            rec->session_end = 1;
            return RKV_OK;
        }
        if (p->end - p->s >= 5 && memcmp(p->s, "false", 5) == 0) {
            p->s += 5;
            return RKV_OK;
        }
        return json_fail(p, "session_end is not true or false");
    default:
        return json_skip(p, 1);
    }
}

rkv_status rkv_trace_parse_line(const char *line, size_t len,
                                const char *name, uint64_t line_no,
                                rkv_trace_record *out, uint64_t **ids,
                                size_t *ids_cap)
{
    return rkv_trace_parse_line_fmt(line, len, name, line_no,
                                    RKV_TRACE_FMT_MOONCAKE, 0, out, ids,
                                    ids_cap);
}

rkv_status rkv_trace_parse_line_fmt(const char *line, size_t len,
                                    const char *name, uint64_t line_no,
                                    int format, uint32_t block_tokens,
                                    rkv_trace_record *out, uint64_t **ids,
                                    size_t *ids_cap)
{
    json_scan p = {line, line, line + len, name ? name : "<trace>", line_no};
    rkv_trace_record rec;
    rkv_status st;
    unsigned seen = 0;
    char what[200];
    double ts = 0;

    if (!line || !out || !ids || !ids_cap)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_trace_parse_line: NULL argument");
    if (!rkv_trace_format_name(format) ||
        block_tokens > RKV_TRACE_BLOCK_TOKENS)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_trace_parse_line: format %d, block tokens "
                             "%u (1..%u, or 0)",
                             format, block_tokens, RKV_TRACE_BLOCK_TOKENS);
    memset(&rec, 0, sizeof rec);
    rec.line = line_no;
    rec.chat_id = -1;
    rec.parent_chat_id = -1;
    rec.priority = -1;
    json_skip_ws(&p);
    if (p.s >= p.end || *p.s != '{')
        return json_syntax(&p, "'{' (one JSON object per line)");
    p.s++;
    for (int more = !json_empty(&p, '}'); more;) {
        char key[32];
        int key_ok = 0;
        json_skip_ws(&p);
        if ((st = json_string(&p, key, sizeof key, &key_ok)) != RKV_OK)
            return st;
        json_skip_ws(&p);
        if (p.s >= p.end || *p.s != ':')
            return json_syntax(&p, "':'");
        p.s++;
        unsigned f = key_ok ? field_of(key, format) : 0;
        if (f & seen) {
            snprintf(what, sizeof what, "duplicate field \"%s\"", key);
            return json_fail(&p, what);
        }
        seen |= f;
        if ((st = parse_field(&p, f, &rec, ids, ids_cap, &ts)) != RKV_OK ||
            (st = json_next(&p, '}', &more)) != RKV_OK)
            return st;
    }
    json_skip_ws(&p);
    if (p.s != p.end)
        return json_syntax(&p, "end of line after the object");
    if (format == RKV_TRACE_FMT_AUTO)
        format = (seen & F_CHAT) ? RKV_TRACE_FMT_BAILIAN : RKV_TRACE_FMT_MOONCAKE;
    int bailian = format == RKV_TRACE_FMT_BAILIAN;
    if ((seen & F_ALL) != F_ALL || (bailian && !(seen & F_CHAT))) {
        const char *missing = bailian && !(seen & F_CHAT) ? "chat_id"
                              : !(seen & F_TS)            ? "timestamp"
                              : !(seen & F_IN)            ? "input_length"
                              : !(seen & F_OUT)           ? "output_length"
                                                          : "hash_ids";
        snprintf(what, sizeof what, "missing field \"%s\"%s", missing,
                 bailian ? " (Bailian format)" : "");
        return json_fail(&p, what);
    }
    if ((seen & F_PRIO_DUR) && !(seen & F_PRIO))
        return json_fail(&p, "priority_duration_ms without a priority");
    if (bailian) {
        if (ts > 1e12)
            return json_fail(&p, "timestamp out of range (Bailian timestamps are "
                             "seconds, at most 1e12)");
        ts *= 1000.0; /* seconds -> ms */
        if (rec.parent_chat_id == rec.chat_id)
            return json_fail(&p, "parent_chat_id equals chat_id");
    }
    rec.timestamp_ms = ts;
    rec.format = format;
    uint32_t B = block_tokens ? block_tokens
                 : bailian ? RKV_TRACE_BAILIAN_BLOCK_TOKENS
                           : RKV_TRACE_BLOCK_TOKENS;
    rec.block_tokens = B;
    if (rec.input_length == 0)
        return json_fail(&p, "input_length is 0 (a request needs a prompt)");
    uint64_t cap = (uint64_t)rec.num_hash_ids * B;
    if (rec.input_length > cap || rec.input_length <= cap - B) {
        snprintf(what, sizeof what,
                 "input_length %u does not fit %u hash_ids of %u tokens "
                 "(needs %llu < input_length <= %llu)",
                 rec.input_length, rec.num_hash_ids, B,
                 (unsigned long long)(cap ? cap - B : 0),
                 (unsigned long long)cap);
        return json_fail(&p, what);
    }
    rec.hash_ids = *ids;
    *out = rec;
    return RKV_OK;
}
