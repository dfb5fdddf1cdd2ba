/*
 * fleet/http.c -- rkv_http (fleet/http.h): the listening socket, a fixed
 * table of connections, each reading its request head, then writing its
 * answer, then draining what the peer still sends until it closes (a close
 * with unread input would reset the connection and could destroy the
 * answer in flight: the "lingering close" of HTTP servers).
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
#include <unistd.h>

#include "common/status.h"

enum { C_READ, C_WRITE, C_DRAIN };

typedef struct http_conn {
    int fd;
    int state;
    uint64_t deadline_ms;
    uint32_t fill;
    char req[RKV_HTTP_MAX_REQUEST];
    char *out;
    size_t out_len, sent;
} http_conn;

struct rkv_http {
    int lfd;
    uint16_t port;
    uint32_t n;
    http_conn c[RKV_HTTP_MAX_CONNS];
    char *body; /* RKV_HTTP_MAX_BODY, the render buffer */
    rkv_http_stats st;
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
    h->c[i] = h->c[--h->n]; /* order does not matter */
    h->c[h->n].out = NULL;
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

/* Prepares the answer: status line, headers, and body (not for HEAD). */
static void answer(rkv_http *h, http_conn *c, int code, const char *reason,
                   const char *extra, const char *body, size_t body_len, int head)
{
    char hdr[512];
    int k = snprintf(hdr, sizeof hdr,
                     "HTTP/1.0 %d %s\r\n"
                     "Content-Type: %s\r\n"
                     "Content-Length: %zu\r\n"
                     "%s"
                     "Connection: close\r\n\r\n",
                     code, reason,
                     code == 200 ? "text/plain; version=0.0.4; charset=utf-8"
                                 : "text/plain; charset=utf-8",
                     body_len, extra ? extra : "");
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

static void error_answer(rkv_http *h, http_conn *c, int code, const char *reason,
                         const char *extra, int head)
{
    char body[128];
    int k = snprintf(body, sizeof body, "%d %s\n", code, reason);
    answer(h, c, code, reason, extra, body, k > 0 ? (size_t)k : 0, head);
}

/* The request head is complete in c->req[0..fill): answer it. */
static void respond(rkv_http *h, http_conn *c, rkv_http_render_fn render, void *ctx)
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
    if (!head && strcmp(method, "GET") != 0) {
        error_answer(h, c, 405, "Method Not Allowed", "Allow: GET, HEAD\r\n", 0);
        return;
    }
    char *q = strchr(target, '?');
    if (q)
        *q = 0;
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

static int head_complete(const http_conn *c)
{
    for (uint32_t i = 1; i < c->fill; i++)
        if (c->req[i] == '\n' &&
            (c->req[i - 1] == '\n' ||
             (i >= 3 && c->req[i - 1] == '\r' && c->req[i - 2] == '\n')))
            return 1;
    return 0;
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
        ssize_t r = recv(c->fd, c->req + c->fill, RKV_HTTP_MAX_REQUEST - c->fill, 0);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
                       errno != EINTR)) {
            drop(h, i); /* the peer left before its request was complete */
            return 1;
        }
        if (r > 0) {
            c->fill += (uint32_t)r;
            if (head_complete(c))
                respond(h, c, render, ctx);
            else if (c->fill == RKV_HTTP_MAX_REQUEST)
                error_answer(h, c, 431, "Request Header Fields Too Large", NULL, 0);
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
        if (c->state == C_WRITE && c->sent > c->out_len)
            return rkv_set_error(RKV_ERR_CORRUPT, "rkv_http: writer %u past its end", i);
    }
    return RKV_OK;
}
