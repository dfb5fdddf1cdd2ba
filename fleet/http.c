/*
 * fleet/http.c -- rkv_http (fleet/http.h): the listening socket, a fixed
 * table of connections, each reading its request head (and, for the one
 * POST path, a body of the Content-Length it announced, into a buffer of
 * exactly that size), then writing its answer, then draining what the
 * peer still sends until it closes (a close with unread input would reset
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

enum { C_READ, C_BODY, C_WRITE, C_DRAIN };

typedef struct http_conn {
    int fd;
    int state;
    uint64_t deadline_ms;
    uint32_t fill;
    char req[RKV_HTTP_MAX_REQUEST];
    char *out;
    size_t out_len, sent;
    char *body; /* C_BODY: [body_len], body_fill read so far */
    size_t body_len, body_fill;
} http_conn;

struct rkv_http {
    int lfd;
    uint16_t port;
    uint32_t n;
    http_conn c[RKV_HTTP_MAX_CONNS];
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
    close(h->c[i].fd);
    free(h->c[i].out);
    free(h->c[i].body);
    h->c[i] = h->c[--h->n]; /* order does not matter */
    h->c[h->n].out = NULL;
    h->c[h->n].body = NULL;
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

/* Prepares the answer: status line, headers, and body (not for HEAD). */
static void answer_as(rkv_http *h, http_conn *c, int code, const char *reason,
                      const char *ctype, const char *extra, const char *body,
                      size_t body_len, int head)
{
    char hdr[512];
    int k = snprintf(hdr, sizeof hdr,
                     "HTTP/1.0 %d %s\r\n"
                     "Content-Type: %s\r\n"
                     "Content-Length: %zu\r\n"
                     "%s"
                     "Connection: close\r\n\r\n",
                     code, reason, ctype, body_len, extra ? extra : "");
    size_t hl = k > 0 && (size_t)k < sizeof hdr ? (size_t)k : 0;
    size_t bl = head ? 0 : body_len;
    c->out = malloc(hl + bl + 1);
    c->state = C_WRITE;
    c->sent = 0;
    if (!c->out || hl == 0) {
        /* nothing can be said: close without an answer */
        free(c->out);
        c->out = NULL;
        c->out_len = 0;
        h->st.errors++;
        return;
    }
    memcpy(c->out, hdr, hl);
    if (bl)
        memcpy(c->out + hl, body, bl);
    c->out_len = hl + bl;
    if (code == 200)
        h->st.answered++;
    else
        h->st.errors++;
}

static void answer(rkv_http *h, http_conn *c, int code, const char *reason,
                   const char *extra, const char *body, size_t body_len, int head)
{
    answer_as(h, c, code, reason, code == 200 ? METRICS : TEXT, extra, body,
              body_len, head);
}

/* An error on the POST path: a JSON object, as its answers are. */
static void json_error_as(rkv_http *h, http_conn *c, int code, const char *extra,
                          int head)
{
    char body[160];
    int k = snprintf(body, sizeof body, "{\"error\": \"%s\", \"status\": %d}\n",
                     reason_of(code), code);
    answer_as(h, c, code, reason_of(code), JSON, extra, body, k > 0 ? (size_t)k : 0,
              head);
}

static void json_error(rkv_http *h, http_conn *c, int code, const char *extra)
{
    json_error_as(h, c, code, extra, 0);
}

/* The POST body is complete: the handler answers it. */
static void post_answer(rkv_http *h, http_conn *c)
{
    int code = 500;
    size_t len = h->post(h->post_ctx, c->body, c->body_len, h->body,
                         RKV_HTTP_MAX_BODY, &code);
    free(c->body);
    c->body = NULL;
    c->body_len = c->body_fill = 0;
    if (len >= RKV_HTTP_MAX_BODY || code < 200 || code > 599) {
        json_error(h, c, 500, NULL);
        return;
    }
    answer_as(h, c, code, reason_of(code), JSON, NULL, h->body, len, 0);
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

/* POST on the POST path, its head in c->req[0..head_len): checks the
 * length, then reads the body (what already came with the head first). */
static void start_post(rkv_http *h, http_conn *c, size_t head_len, int http11)
{
    const char *v = NULL;
    size_t vl = 0;
    if (header(c->req, head_len, "Transfer-Encoding", &v, &vl) != 0) {
        json_error(h, c, 411, NULL); /* chunked bodies are not read */
        return;
    }
    int k = header(c->req, head_len, "Content-Length", &v, &vl);
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
    c->body = malloc(cl ? (size_t)cl : 1);
    if (!c->body) {
        json_error(h, c, 503, NULL);
        return;
    }
    c->body_len = (size_t)cl;
    size_t extra = c->fill - head_len;
    c->body_fill = extra < cl ? extra : (size_t)cl;
    memcpy(c->body, c->req + head_len, c->body_fill);
    if (c->body_fill == c->body_len) {
        post_answer(h, c);
        return;
    }
    c->state = C_BODY;
    v = NULL;
    if (http11 && header(c->req, head_len, "Expect", &v, &vl) == 1 && vl == 12 &&
        strncasecmp(v, "100-continue", 12) == 0) {
        /* curl waits for this (a second otherwise) before it sends a body
         * over 1 KiB; the socket's buffer is empty, so it goes whole, and
         * a connection that cannot take it is closed at its deadline */
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        if (send(c->fd, cont, sizeof cont - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof cont - 1))
            c->deadline_ms = 0;
    }
}

static void error_answer(rkv_http *h, http_conn *c, int code, const char *reason,
                         const char *extra, int head)
{
    char body[128];
    int k = snprintf(body, sizeof body, "%d %s\n", code, reason);
    answer(h, c, code, reason, extra, body, k > 0 ? (size_t)k : 0, head);
}

/* The request head is complete in c->req[0..head_len): answer it (or
 * start reading a POST body). */
static void respond(rkv_http *h, http_conn *c, size_t head_len,
                    rkv_http_render_fn render, void *ctx)
{
    char *line = c->req;
    char *eol = memchr(line, '\n', c->fill);
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
    char *q = strchr(target, '?');
    if (q)
        *q = 0;
    if (h->post && strcmp(target, h->post_path) == 0) {
        if (strcmp(method, "POST") != 0)
            json_error_as(h, c, 405, "Allow: POST\r\n", head);
        else
            start_post(h, c, head_len, strcmp(version, "HTTP/1.1") == 0);
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
    answer(h, c, 200, "OK", NULL, h->body, len, head);
}

/* The length of the request head (through its empty line), 0 while it
 * is incomplete. */
static size_t head_complete(const http_conn *c)
{
    for (uint32_t i = 1; i < c->fill; i++)
        if (c->req[i] == '\n' &&
            (c->req[i - 1] == '\n' ||
             (i >= 3 && c->req[i - 1] == '\r' && c->req[i - 2] == '\n')))
            return (size_t)i + 1;
    return 0;
}

/* Reads what connection i has for dst[0..room): the bytes read (0: none
 * yet), or -1 when the peer left or failed before its request was
 * complete (the connection is then dropped). */
static ssize_t receive(rkv_http *h, uint32_t i, void *dst, size_t room)
{
    ssize_t r = recv(h->c[i].fd, dst, room, 0);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        drop(h, i);
        return -1;
    }
    return r > 0 ? r : 0;
}

/* One step of connection i; returns 1 when it was closed. */
static int service(rkv_http *h, uint32_t i, uint64_t now_ms,
                   rkv_http_render_fn render, void *ctx)
{
    http_conn *c = &h->c[i];
    if (now_ms >= c->deadline_ms) {
        if (c->state != C_DRAIN)
            h->st.timeouts++;
        drop(h, i);
        return 1;
    }
    if (c->state == C_READ) {
        ssize_t r = receive(h, i, c->req + c->fill, RKV_HTTP_MAX_REQUEST - c->fill);
        if (r < 0)
            return 1;
        if (r > 0) {
            c->fill += (uint32_t)r;
            size_t hl = head_complete(c);
            if (hl)
                respond(h, c, hl, render, ctx);
            else if (c->fill == RKV_HTTP_MAX_REQUEST)
                error_answer(h, c, 431, "Request Header Fields Too Large", NULL, 0);
        }
    }
    if (c->state == C_BODY) {
        ssize_t r = receive(h, i, c->body + c->body_fill, c->body_len - c->body_fill);
        if (r < 0)
            return 1;
        if (r > 0) {
            c->body_fill += (size_t)r;
            if (c->body_fill == c->body_len)
                post_answer(h, c);
        }
    }
    if (c->state == C_WRITE) {
        while (c->sent < c->out_len) {
            ssize_t w = send(c->fd, c->out + c->sent, c->out_len - c->sent,
                             MSG_NOSIGNAL);
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                return 0;
            if (w <= 0) {
                drop(h, i);
                return 1;
            }
            c->sent += (size_t)w;
        }
        shutdown(c->fd, SHUT_WR);
        c->state = C_DRAIN;
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
        p[1 + i].fd = h->c[i].fd;
        p[1 + i].events = h->c[i].state == C_WRITE ? POLLOUT : POLLIN;
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
        if (i < n_before && (p[1 + i].revents || now_ms >= h->c[i].deadline_ms))
            service(h, i, now_ms, render, ctx);
    if (p[0].revents & POLLIN) {
        /* bounded: a flood of connections cannot keep this loop busy */
        for (uint32_t k = 0; k < 2 * RKV_HTTP_MAX_CONNS; k++) {
            int fd = accept4(h->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0)
                break;
            h->st.accepted++;
            if (h->n == RKV_HTTP_MAX_CONNS) {
                close(fd);
                h->st.rejected++;
                continue;
            }
            http_conn *c = &h->c[h->n++];
            memset(c, 0, offsetof(http_conn, req));
            c->fd = fd;
            c->state = C_READ;
            c->deadline_ms = now_ms + RKV_HTTP_DEADLINE_MS;
            c->out = NULL;
            c->out_len = c->sent = 0;
            c->body = NULL;
            c->body_len = c->body_fill = 0;
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
        const http_conn *c = &h->c[i];
        if (c->fd < 0)
            return rkv_set_error(RKV_ERR_CORRUPT, "rkv_http: connection %u has no fd", i);
        if (c->state == C_READ && (c->fill >= RKV_HTTP_MAX_REQUEST || c->out))
            return rkv_set_error(RKV_ERR_CORRUPT, "rkv_http: reader %u overfull", i);
        if (c->state == C_BODY && (!c->body || c->body_fill >= c->body_len ||
                                   c->body_len > RKV_HTTP_MAX_POST || c->out))
            return rkv_set_error(RKV_ERR_CORRUPT, "rkv_http: body reader %u", i);
        if (c->state != C_BODY && c->body)
            return rkv_set_error(RKV_ERR_CORRUPT, "rkv_http: connection %u keeps a body", i);
        if (c->state == C_WRITE && c->sent > c->out_len)
            return rkv_set_error(RKV_ERR_CORRUPT, "rkv_http: writer %u past its end", i);
    }
    return RKV_OK;
}
