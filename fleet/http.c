/*
 * fleet/http.c -- rkv_http (fleet/http.h): the listening socket and a fixed
 * table of connections. A connection reads requests into its input buffer
 * and answers each complete one into its output buffer, in order: several
 * pipelined requests read in one recv are answered with one send. A POST
 * body that fits the input buffer is handed to the handler where it lies;
 * a larger one (up to RKV_HTTP_MAX_POST) is read into a buffer of exactly
 * its announced length. An HTTP/1.1 request without "Connection: close"
 * keeps the connection open for the next (idle up to RKV_HTTP_IDLE_MS);
 * any other ends it: the answer is written, then what the peer still
 * sends is drained until it closes (a close with unread input would reset
 * the connection and could destroy the answer in flight: the "lingering
 * close" of HTTP servers).
 */
#include "fleet/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <strings.h>
#include <unistd.h>

#include "common/status.h"

/* C_READ: reading and answering requests (answers may wait in out);
 * C_BODY: reading a body too large for the input buffer; C_WRITE: the
 * socket took only part of out; C_DRAIN: answered, closing. */
enum { C_READ, C_BODY, C_WRITE, C_DRAIN };

typedef struct http_conn {
    int fd;
    int state;
    int keep;  /* open after what out holds is written */
    int idle;  /* kept open between requests: nothing of the next yet */
    uint64_t deadline_ms;
    uint32_t fill; /* in[0..fill): received, not yet answered */
    /* a POST head parsed whose body (fits in) is still arriving:
     * the request is in[0..pend_head + pend_body) */
    int pending, pend_keep;
    uint32_t pend_head, pend_body;
    char *out; /* answers to send: out[sent..out_len), out_cap allocated */
    size_t out_len, sent, out_cap;
    char *body; /* C_BODY: [body_len], body_fill read so far */
    size_t body_len, body_fill;
    int body_keep;
    char in[RKV_HTTP_IN_BUF];
} http_conn;

struct rkv_http {
    int lfd;
    uint16_t port;
    uint32_t n;
    http_conn *c[RKV_HTTP_MAX_CONNS];
    char *body; /* RKV_HTTP_MAX_BODY, the render buffer */
    rkv_http_stats st;
    char post_path[64]; /* "" : no POST path */
    rkv_http_post_fn post;
    void *post_ctx;
};

rkv_status rkv_http_open(const char *addr, uint16_t port, rkv_http **out)
{
    if (!addr || !out)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_http_open: NULL argument");
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    if (inet_pton(AF_INET, addr, &a.sin_addr) != 1)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_http_open: '%s' is not an IPv4 address", addr);
    rkv_http *h = calloc(1, sizeof *h);
    char *body = malloc(RKV_HTTP_MAX_BODY);
    if (!h || !body) {
        free(h);
        free(body);
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_http_open: out of memory");
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    socklen_t len = sizeof a;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 16) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        free(h);
        free(body);
        return rkv_set_error(RKV_ERR_IO, "rkv_http_open: %s:%u: %s", addr,
                             (unsigned)port, strerror(e));
    }
    h->lfd = fd;
    h->port = ntohs(a.sin_port);
    h->body = body;
    *out = h;
    return RKV_OK;
}

static void drop(rkv_http *h, uint32_t i)
{
    http_conn *c = h->c[i];
    close(c->fd);
    free(c->out);
    free(c->body);
    free(c);
    h->c[i] = h->c[--h->n]; /* order does not matter */
    h->c[h->n] = NULL;
}

void rkv_http_close(rkv_http *h)
{
    if (!h)
        return;
    while (h->n)
        drop(h, h->n - 1);
    close(h->lfd);
    free(h->body);
    free(h);
}

uint16_t rkv_http_port(const rkv_http *h)
{
    return h ? h->port : 0;
}

rkv_status rkv_http_set_post(rkv_http *h, const char *path, rkv_http_post_fn fn,
                             void *ctx)
{
    if (!h || !path || !fn || path[0] != '/' || strlen(path) >= sizeof h->post_path)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_http_set_post: bad argument");
    snprintf(h->post_path, sizeof h->post_path, "%s", path);
    h->post = fn;
    h->post_ctx = ctx;
    return RKV_OK;
}

static const char *reason_of(int code)
{
    switch (code) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 411: return "Length Required";
    case 413: return "Payload Too Large";
    case 431: return "Request Header Fields Too Large";
    case 503: return "Service Unavailable";
    default: return code >= 500 ? "Internal Server Error" : "Bad Request";
    }
}

static const char TEXT[] = "text/plain; charset=utf-8";
static const char METRICS[] = "text/plain; version=0.0.4; charset=utf-8";
static const char JSON[] = "application/json";

/* Appends data[0..len) to the connection's output; 0 when out of memory. */
static int put(http_conn *c, const char *data, size_t len)
{
    if (c->out_cap - c->out_len < len) {
        size_t cap = c->out_cap ? c->out_cap : 1024;
        while (cap - c->out_len < len)
            cap *= 2;
        char *p = realloc(c->out, cap);
        if (!p)
            return 0;
        c->out = p;
        c->out_cap = cap;
    }
    memcpy(c->out + c->out_len, data, len);
    c->out_len += len;
    return 1;
}

/* The request just parsed ends the connection: what is left of the input
 * is not read, and the connection closes once out is written. */
static void end_after(http_conn *c)
{
    c->keep = 0;
    c->fill = 0;
    c->pending = 0;
    c->state = C_WRITE;
}

/* Appends the answer: status line, headers, and body (not for HEAD). With
 * keep the connection stays open for the next request. */
static void answer_as(rkv_http *h, http_conn *c, int code, const char *reason,
                      const char *ctype, const char *extra, const char *body,
                      size_t body_len, int head, int keep)
{
    char hdr[512];
    int k = snprintf(hdr, sizeof hdr,
                     "HTTP/1.1 %d %s\r\n"
                     "Content-Type: %s\r\n"
                     "Content-Length: %zu\r\n"
                     "%s%s\r\n",
                     code, reason, ctype, body_len, extra ? extra : "",
                     keep ? "" : "Connection: close\r\n");
    size_t hl = k > 0 && (size_t)k < sizeof hdr ? (size_t)k : 0;
    size_t bl = head ? 0 : body_len;
    if (code == 200)
        h->st.answered++;
    else
        h->st.errors++;
    size_t mark = c->out_len; /* earlier pipelined answers end here */
    if (hl == 0 || !put(c, hdr, hl) || (bl && !put(c, body, bl))) {
        /* nothing sensible can be said: close without this answer (and
         * without a head whose body did not fit), after the answers to
         * the requests before it */
        c->out_len = mark;
        end_after(c);
        return;
    }
    if (!keep)
        end_after(c);
}

static void answer(rkv_http *h, http_conn *c, int code, const char *reason,
                   const char *extra, const char *body, size_t body_len, int head, int keep)
{
    answer_as(h, c, code, reason, code == 200 ? METRICS : TEXT, extra, body,
              body_len, head, keep);
}

/* An error on the POST path: a JSON object, as its answers are. The
 * connection ends (the request may not have been read to its end). */
static void json_error_as(rkv_http *h, http_conn *c, int code, const char *extra,
                          int head)
{
    char body[160];
    int k = snprintf(body, sizeof body, "{\"error\": \"%s\", \"status\": %d}\n",
                     reason_of(code), code);
    answer_as(h, c, code, reason_of(code), JSON, extra, body, k > 0 ? (size_t)k : 0,
              head, 0);
}

static void json_error(rkv_http *h, http_conn *c, int code, const char *extra)
{
    json_error_as(h, c, code, extra, 0);
}

/* A whole POST body[0..len): the handler answers it. */
static void post_answer(rkv_http *h, http_conn *c, const char *body, size_t len, int keep)
{
    int code = 500;
    size_t n = h->post(h->post_ctx, body, len, h->body, RKV_HTTP_MAX_BODY, &code);
    if (n >= RKV_HTTP_MAX_BODY || code < 200 || code > 599) {
        json_error(h, c, 500, NULL);
        return;
    }
    answer_as(h, c, code, reason_of(code), JSON, NULL, h->body, n, 0, keep);
}

/* Drops the first n bytes of the input (an answered request). */
static void consume(http_conn *c, size_t n)
{
    memmove(c->in, c->in + n, c->fill - n);
    c->fill -= (uint32_t)n;
}

/* The value of header `name` (case-insensitive) in head[0..len) (the lines
 * after the request line): 1 and [*v, *v + *vlen) trimmed when present
 * once, 0 when absent, -1 when present more than once. */
static int header(const char *head, size_t len, const char *name, const char **v,
                  size_t *vlen)
{
    size_t nl = strlen(name);
    int found = 0;
    const char *p = memchr(head, '\n', len), *end = head + len;
    while (p && p + 1 < end) {
        const char *line = p + 1;
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        if (!eol)
            break;
        if ((size_t)(eol - line) > nl && line[nl] == ':' &&
            strncasecmp(line, name, nl) == 0) {
            if (found++)
                return -1;
            const char *a = line + nl + 1, *b = eol;
            while (a < b && (*a == ' ' || *a == '\t'))
                a++;
            while (b > a && (b[-1] == '\r' || b[-1] == ' ' || b[-1] == '\t'))
                b--;
            *v = a;
            *vlen = (size_t)(b - a);
        }
        p = eol;
    }
    return found;
}

/* Does the head ask to keep the connection? HTTP/1.1 without "close" in
 * its Connection header (HTTP/1.0 connections end with their answer). */
static int keep_alive(const char *head, size_t len, int http11)
{
    const char *v = NULL;
    size_t vl = 0;
    int k = header(head, len, "Connection", &v, &vl);
    if (!http11 || k < 0)
        return 0;
    for (size_t i = 0; k == 1 && i + 5 <= vl; i++)
        if (strncasecmp(v + i, "close", 5) == 0)
            return 0;
    return 1;
}

/* POST on the POST path, its head in c->in[0..head_len): checks the
 * length, then answers the body where it lies when the input buffer holds
 * it (now or once it arrived), else reads it into a buffer of its own. */
static void start_post(rkv_http *h, http_conn *c, size_t head_len, int http11, int keep)
{
    const char *v = NULL;
    size_t vl = 0;
    if (header(c->in, head_len, "Transfer-Encoding", &v, &vl) != 0) {
        json_error(h, c, 411, NULL); /* chunked bodies are not read */
        return;
    }
    int k = header(c->in, head_len, "Content-Length", &v, &vl);
    if (k == 0) {
        json_error(h, c, 411, NULL);
        return;
    }
    uint64_t cl = 0;
    int ok = k == 1 && vl > 0 && vl <= 12;
    for (size_t i = 0; ok && i < vl; i++) {
        ok = v[i] >= '0' && v[i] <= '9';
        cl = cl * 10 + (uint64_t)(v[i] - '0');
    }
    if (!ok) {
        json_error(h, c, 400, NULL);
        return;
    }
    if (cl > RKV_HTTP_MAX_POST) {
        json_error(h, c, 413, NULL);
        return;
    }
    if (head_len + cl <= c->fill) { /* here already: the common case */
        post_answer(h, c, c->in + head_len, (size_t)cl, keep);
        if (c->state == C_READ)
            consume(c, head_len + (size_t)cl);
        return;
    }
    if (head_len + cl <= RKV_HTTP_IN_BUF) {
        c->pending = 1;
        c->pend_keep = keep;
        c->pend_head = (uint32_t)head_len;
        c->pend_body = (uint32_t)cl;
    } else {
        c->body = malloc((size_t)cl);
        if (!c->body) {
            json_error(h, c, 503, NULL);
            return;
        }
        c->body_len = (size_t)cl;
        c->body_fill = c->fill - head_len; /* < cl: the input is smaller */
        c->body_keep = keep;
        memcpy(c->body, c->in + head_len, c->body_fill);
        c->fill = 0;
        c->state = C_BODY;
    }
    v = NULL;
    if (http11 && header(c->in, head_len, "Expect", &v, &vl) == 1 && vl == 12 &&
        strncasecmp(v, "100-continue", 12) == 0) {
        /* curl waits for this (a second otherwise) before it sends a body
         * over 1 KiB */
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        if (!put(c, cont, sizeof cont - 1))
            c->deadline_ms = 0;
    }
}

static void error_answer(rkv_http *h, http_conn *c, int code, const char *reason,
                         const char *extra, int head)
{
    char body[128];
    int k = snprintf(body, sizeof body, "%d %s\n", code, reason);
    answer(h, c, code, reason, extra, body, k > 0 ? (size_t)k : 0, head, 0);
}

/* The request head is complete in c->in[0..head_len): answer it (or
 * start reading a POST body). */
static void respond(rkv_http *h, http_conn *c, size_t head_len,
                    rkv_http_render_fn render, void *ctx)
{
    char *line = c->in;
    char *eol = memchr(line, '\n', head_len);
    size_t n = (size_t)(eol - line);
    if (n && line[n - 1] == '\r')
        n--;
    /* METHOD SP TARGET SP HTTP/1.x, visible ASCII only */
    char method[8], target[256], version[16];
    size_t sp1 = 0, sp2 = 0, spaces = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)line[i];
        if (ch == ' ') {
            spaces++;
            if (spaces == 1)
                sp1 = i;
            else if (spaces == 2)
                sp2 = i;
        } else if (ch < 0x21 || ch > 0x7e) {
            spaces = 99;
            break;
        }
    }
    if (spaces != 2 || sp1 == 0 || sp1 >= sizeof method || sp2 == sp1 + 1 ||
        sp2 - sp1 - 1 >= sizeof target || n - sp2 - 1 >= sizeof version ||
        n == sp2 + 1) {
        error_answer(h, c, 400, "Bad Request", NULL, 0);
        return;
    }
    memcpy(method, line, sp1);
    method[sp1] = 0;
    memcpy(target, line + sp1 + 1, sp2 - sp1 - 1);
    target[sp2 - sp1 - 1] = 0;
    memcpy(version, line + sp2 + 1, n - sp2 - 1);
    version[n - sp2 - 1] = 0;
    int head = strcmp(method, "HEAD") == 0;
    if (strcmp(version, "HTTP/1.0") != 0 && strcmp(version, "HTTP/1.1") != 0) {
        error_answer(h, c, 400, "Bad Request", NULL, head);
        return;
    }
    int http11 = strcmp(version, "HTTP/1.1") == 0;
    int keep = keep_alive(c->in, head_len, http11);
    char *q = strchr(target, '?');
    if (q)
        *q = 0;
    if (h->post && strcmp(target, h->post_path) == 0) {
        if (strcmp(method, "POST") != 0)
            json_error_as(h, c, 405, "Allow: POST\r\n", head);
        else
            start_post(h, c, head_len, http11, keep);
        return;
    }
    if (!head && strcmp(method, "GET") != 0) {
        error_answer(h, c, 405, "Method Not Allowed", "Allow: GET, HEAD\r\n", 0);
        return;
    }
    if (strcmp(target, "/metrics") != 0) {
        error_answer(h, c, 404, "Not Found", NULL, head);
        return;
    }
    size_t len = render(ctx, h->body, RKV_HTTP_MAX_BODY);
    if (len >= RKV_HTTP_MAX_BODY) {
        error_answer(h, c, 500, "Internal Server Error", NULL, head);
        return;
    }
    /* a GET that announces a body would leave it unread: the last one */
    const char *v;
    size_t vl;
    if (header(c->in, head_len, "Content-Length", &v, &vl) != 0 ||
        header(c->in, head_len, "Transfer-Encoding", &v, &vl) != 0)
        keep = 0;
    answer(h, c, 200, "OK", NULL, h->body, len, head, keep);
    if (c->state == C_READ)
        consume(c, head_len);
}

/* The length of the request head in in[0..fill) (through its empty line),
 * 0 while it is incomplete. */
static size_t head_complete(const http_conn *c)
{
    uint32_t lim = c->fill < RKV_HTTP_MAX_REQUEST ? c->fill : RKV_HTTP_MAX_REQUEST;
    for (uint32_t i = 1; i < lim; i++)
        if (c->in[i] == '\n' &&
            (c->in[i - 1] == '\n' ||
             (i >= 3 && c->in[i - 1] == '\r' && c->in[i - 2] == '\n')))
            return (size_t)i + 1;
    return 0;
}

/* Answers the complete requests in the input, in order, while out holds
 * under RKV_HTTP_MAX_BODY bytes (so it stays under 2 x that plus a head) (a client that
 * pipelines without reading is answered as fast as it reads). */
static void answer_input(rkv_http *h, http_conn *c, rkv_http_render_fn render, void *ctx)
{
    while (c->state == C_READ && c->fill > 0 && c->out_len < RKV_HTTP_MAX_BODY) {
        if (c->pending) {
            if (c->fill < c->pend_head + c->pend_body)
                return;
            c->pending = 0;
            post_answer(h, c, c->in + c->pend_head, c->pend_body, c->pend_keep);
            if (c->state == C_READ)
                consume(c, c->pend_head + c->pend_body);
            continue;
        }
        size_t hl = head_complete(c);
        if (!hl) {
            if (c->fill >= RKV_HTTP_MAX_REQUEST)
                error_answer(h, c, 431, "Request Header Fields Too Large", NULL, 0);
            return;
        }
        respond(h, c, hl, render, ctx);
    }
}

/* Reads what connection c has into dst[0..room): the bytes read (0: none
 * yet), or -1 when the peer left or failed (the connection is then to be
 * dropped). */
static ssize_t receive(http_conn *c, void *dst, size_t room)
{
    ssize_t r = recv(c->fd, dst, room, 0);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
        return -1;
    return r > 0 ? r : 0;
}

/* Sends what out holds; 1 when all of it went, 0 when the socket is full,
 * -1 when the connection failed. */
static int flush_out(http_conn *c)
{
    while (c->sent < c->out_len) {
        ssize_t w = send(c->fd, c->out + c->sent, c->out_len - c->sent, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (w <= 0)
            return -1;
        c->sent += (size_t)w;
    }
    c->out_len = c->sent = 0;
    return 1;
}

/* One step of connection i; returns 1 when it was closed. */
static int service(rkv_http *h, uint32_t i, uint64_t now_ms,
                   rkv_http_render_fn render, void *ctx)
{
    http_conn *c = h->c[i];
    if (now_ms >= c->deadline_ms) {
        if (c->idle)
            h->st.idle_closed++;
        else if (c->state != C_DRAIN)
            h->st.timeouts++;
        drop(h, i);
        return 1;
    }
    if (c->state == C_READ && c->fill < RKV_HTTP_IN_BUF) {
        ssize_t r = receive(c, c->in + c->fill, RKV_HTTP_IN_BUF - c->fill);
        if (r < 0) {
            drop(h, i);
            return 1;
        }
        if (r > 0) {
            if (c->idle) { /* the next request starts: its deadline */
                c->idle = 0;
                c->deadline_ms = now_ms + RKV_HTTP_DEADLINE_MS;
            }
            c->fill += (uint32_t)r;
        }
    } else if (c->state == C_BODY) {
        ssize_t r = receive(c, c->body + c->body_fill, c->body_len - c->body_fill);
        if (r < 0) {
            drop(h, i);
            return 1;
        }
        c->body_fill += (size_t)r;
        if (c->body_fill == c->body_len) {
            c->state = C_READ;
            post_answer(h, c, c->body, c->body_len, c->body_keep);
            free(c->body);
            c->body = NULL;
            c->body_len = c->body_fill = 0;
        }
    }
    /* answer what is complete, send, and go on while the socket takes it */
    for (;;) {
        answer_input(h, c, render, ctx);
        if (c->sent == c->out_len && c->state != C_WRITE)
            break; /* reading on */
        int f = flush_out(c);
        if (f < 0) {
            drop(h, i);
            return 1;
        }
        if (f == 0) {
            if (c->state == C_READ) /* pause reading until it drains */
                c->state = C_WRITE;
            return 0;
        }
        if (c->state == C_BODY)
            return 0; /* a 100 Continue went */
        if (!c->keep && c->state == C_WRITE) {
            shutdown(c->fd, SHUT_WR);
            c->state = C_DRAIN;
            break;
        }
        /* kept alive: next request */
        c->state = C_READ;
        if (c->fill == 0 && !c->pending) {
            c->idle = 1;
            c->deadline_ms = now_ms + RKV_HTTP_IDLE_MS;
            return 0;
        }
        c->deadline_ms = now_ms + RKV_HTTP_DEADLINE_MS;
        if (head_complete(c) == 0 && !c->pending)
            return 0;
    }
    if (c->state == C_DRAIN) {
        char junk[1024];
        for (int k = 0; k < 16; k++) {
            ssize_t r = recv(c->fd, junk, sizeof junk, 0);
            if (r > 0)
                continue;
            if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
                return 0;
            drop(h, i); /* the peer closed (or failed): done */
            return 1;
        }
    }
    return 0;
}

/* A new connection with the table full: the idle kept-alive connection
 * closest to its deadline makes room (a client holding connections open
 * cannot lock others out); -1 when none is idle. */
static int make_room(rkv_http *h)
{
    int best = -1;
    for (uint32_t i = 0; i < h->n; i++)
        if (h->c[i]->idle &&
            (best < 0 || h->c[i]->deadline_ms < h->c[best]->deadline_ms))
            best = (int)i;
    if (best >= 0) {
        drop(h, (uint32_t)best);
        h->st.idle_closed++;
    }
    return best;
}

rkv_status rkv_http_poll(rkv_http *h, uint64_t now_ms, int timeout_ms,
                         rkv_http_render_fn render, void *ctx)
{
    if (!h || !render)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_http_poll: NULL argument");
    struct pollfd p[1 + RKV_HTTP_MAX_CONNS];
    p[0].fd = h->lfd;
    p[0].events = POLLIN;
    p[0].revents = 0;
    for (uint32_t i = 0; i < h->n; i++) {
        p[1 + i].fd = h->c[i]->fd;
        p[1 + i].events = h->c[i]->state == C_WRITE ? POLLOUT : POLLIN;
        p[1 + i].revents = 0;
    }
    int r = poll(p, 1 + h->n, timeout_ms < 0 ? 0 : timeout_ms);
    if (r < 0 && errno != EINTR)
        return rkv_set_error(RKV_ERR_IO, "rkv_http_poll: poll: %s", strerror(errno));
    if (r <= 0)
        r = 0;
    /* every connection gets its step (even without an event: deadlines) */
    uint32_t n_before = h->n;
    for (uint32_t i = h->n; i-- > 0;)
        if (i < n_before && (p[1 + i].revents || now_ms >= h->c[i]->deadline_ms))
            service(h, i, now_ms, render, ctx);
    if (p[0].revents & POLLIN) {
        /* bounded: a flood of connections cannot keep this loop busy */
        for (uint32_t k = 0; k < 2 * RKV_HTTP_MAX_CONNS; k++) {
            int fd = accept4(h->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0)
                break;
            h->st.accepted++;
            http_conn *c = NULL;
            if (h->n < RKV_HTTP_MAX_CONNS || make_room(h) >= 0)
                c = malloc(sizeof *c);
            if (!c) {
                close(fd);
                h->st.rejected++;
                continue;
            }
            memset(c, 0, offsetof(http_conn, in));
            c->fd = fd;
            c->state = C_READ;
            c->keep = 1;
            c->deadline_ms = now_ms + RKV_HTTP_DEADLINE_MS;
            h->c[h->n++] = c;
            /* the request is often there already */
            service(h, h->n - 1, now_ms, render, ctx);
        }
    }
    h->st.open = h->n;
    return RKV_OK;
}

rkv_status rkv_http_get_stats(const rkv_http *h, rkv_http_stats *out)
{
    if (!h || !out)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_http_get_stats: NULL argument");
    *out = h->st;
    out->open = h->n;
    return RKV_OK;
}

rkv_status rkv_http_check(const rkv_http *h)
{
    if (!h)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_http_check: NULL");
    if (h->n > RKV_HTTP_MAX_CONNS)
        return rkv_set_error(RKV_ERR_CORRUPT, "rkv_http: %u connections open", h->n);
    for (uint32_t i = 0; i < h->n; i++) {
        const http_conn *c = h->c[i];
        if (!c || c->fd < 0)
            return rkv_set_error(RKV_ERR_CORRUPT, "rkv_http: connection %u has no fd", i);
        if (c->fill > RKV_HTTP_IN_BUF)
            return rkv_set_error(RKV_ERR_CORRUPT, "rkv_http: reader %u overfull", i);
        if (c->pending && (size_t)c->pend_head + c->pend_body > RKV_HTTP_IN_BUF)
            return rkv_set_error(RKV_ERR_CORRUPT, "rkv_http: pending body %u", i);
        if (c->state == C_BODY && (!c->body || c->body_fill >= c->body_len ||
                                   c->body_len > RKV_HTTP_MAX_POST || c->fill))
            return rkv_set_error(RKV_ERR_CORRUPT, "rkv_http: body reader %u", i);
        if (c->state != C_BODY && c->body)
            return rkv_set_error(RKV_ERR_CORRUPT, "rkv_http: connection %u keeps a body", i);
        if (c->sent > c->out_len || c->out_len > c->out_cap ||
            c->out_cap > 4 * RKV_HTTP_MAX_BODY)
            return rkv_set_error(RKV_ERR_CORRUPT, "rkv_http: writer %u past its end", i);
        if (c->idle && (c->state != C_READ || c->fill || c->out_len))
            return rkv_set_error(RKV_ERR_CORRUPT, "rkv_http: idle connection %u busy", i);
    }
    return RKV_OK;
}
