/*
 * tests/fleet/test_fleet_http.c -- the metrics HTTP responder (fleet/http.h)
 * over real loopback sockets: well-formed requests get the rendered text
 * with a correct Content-Length; every malformed, oversized, slow, early
 * closed or surplus connection gets its documented answer or is closed,
 * and rkv_http_check holds after every poll. The responder's clock is the
 * test's (now_ms is passed in), so deadlines are tested without waiting.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fleet/http.h"

typedef struct render_ctx {
    const char *text;
    size_t size; /* 0: strlen(text); else a body of this many 'x' */
    int calls;
} render_ctx;

static size_t render(void *vctx, char *buf, size_t cap)
{
    render_ctx *r = vctx;
    r->calls++;
    if (r->size) {
        if (r->size < cap)
            memset(buf, 'x', r->size);
        return r->size;
    }
    return (size_t)snprintf(buf, cap, "%s", r->text);
}

static uint64_t g_now = 1000;

static void step(rkv_http *h, render_ctx *r)
{
    cr_assert_eq(rkv_http_poll(h, g_now, 5, render, r), RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(rkv_http_check(h), RKV_OK, "%s", rkv_last_error());
}

static int client(rkv_http *h)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(fd, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons(rkv_http_port(h));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0, "%s", strerror(errno));
    cr_assert_eq(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
    return fd;
}

/* The length of the first whole answer (head + Content-Length) in
 * out[0..n), 0 while it is incomplete (a "100 Continue" ahead of it
 * counts as part of it). */
static size_t answer_len(const char *out, size_t n)
{
    size_t at = 0;
    if (n >= 25 && memcmp(out, "HTTP/1.1 100 Continue\r\n\r\n", 25) == 0)
        at = 25;
    const char *end = memmem(out + at, n - at, "\r\n\r\n", 4);
    if (!end)
        return 0;
    const char *cl = memmem(out + at, (size_t)(end - out) - at, "Content-Length: ", 16);
    if (!cl)
        return 0;
    size_t want = (size_t)(end + 4 - out) + strtoull(cl + 16, NULL, 10);
    return want <= n ? want : 0;
}

/* Reads what the server sends until it closes or one whole answer came
 * (stepping the server); returns the byte count. */
static size_t read_all(rkv_http *h, render_ctx *r, int fd, char *out, size_t cap)
{
    size_t n = 0;
    for (int spins = 0; spins < 2000; spins++) {
        step(h, r);
        ssize_t k = recv(fd, out + n, cap - 1 - n, 0);
        if (k == 0)
            break;
        if (k > 0) {
            n += (size_t)k;
            cr_assert_lt(n, cap - 1, "answer too long");
            out[n] = 0;
            if (answer_len(out, n) == n)
                break;
            continue;
        }
        cr_assert(errno == EAGAIN || errno == EWOULDBLOCK, "%s", strerror(errno));
    }
    out[n] = 0;
    return n;
}

static size_t exchange(rkv_http *h, render_ctx *r, const char *req, size_t len,
                       char *out, size_t cap)
{
    int fd = client(h);
    cr_assert_eq(send(fd, req, len, 0), (ssize_t)len);
    size_t n = read_all(h, r, fd, out, cap);
    close(fd);
    return n;
}

/* Steps the server until every connection closed (the peers did). */
static void settle(rkv_http *h, render_ctx *r)
{
    rkv_http_stats st;
    for (int i = 0; i < 200; i++) {
        cr_assert_eq(rkv_http_get_stats(h, &st), RKV_OK);
        if (st.open == 0)
            return;
        step(h, r);
    }
    cr_assert_fail("%u connections still open", st.open);
}

static int status_of(const char *resp)
{
    int code = 0;
    cr_assert_eq(sscanf(resp, "HTTP/1.1 %d ", &code), 1, "no status line: %.60s", resp);
    return code;
}

/* The body after the head; checks Content-Length against it. */
static const char *body_of(const char *resp, size_t n)
{
    const char *end = strstr(resp, "\r\n\r\n");
    cr_assert_not_null(end);
    const char *cl = strstr(resp, "Content-Length: ");
    cr_assert(cl && cl < end);
    size_t want = strtoull(cl + 16, NULL, 10);
    cr_assert_eq((size_t)(resp + n - (end + 4)), want, "Content-Length %zu, body %zu",
                 want, (size_t)(resp + n - (end + 4)));
    return end + 4;
}

/* A request and the status it must get. */
typedef struct {
    const char *req;
    int code;
} req_case;

static rkv_http *open_any(void)
{
    rkv_http *h = NULL;
    cr_assert_eq(rkv_http_open("127.0.0.1", 0, &h), RKV_OK, "%s", rkv_last_error());
    cr_assert_gt(rkv_http_port(h), 0);
    return h;
}

#define REQ(s) s, sizeof(s) - 1

Test(fleet_http, get_metrics_returns_the_text)
{
    rkv_http *h = open_any();
    render_ctx r = {.text = "radixkv_router_instances 3\n"};
    char out[8192];
    size_t n = exchange(h, &r, REQ("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), out,
                        sizeof out);
    cr_assert_eq(status_of(out), 200);
    cr_assert_not_null(strstr(out, "Content-Type: text/plain; version=0.0.4"));
    cr_assert_str_eq(body_of(out, n), r.text);
    /* bare LF line ends, a query string, HTTP/1.0 */
    n = exchange(h, &r, REQ("GET /metrics?x=1 HTTP/1.0\n\n"), out, sizeof out);
    cr_assert_eq(status_of(out), 200);
    cr_assert_str_eq(body_of(out, n), r.text);
    /* HEAD: the head with the body's length, no body */
    n = exchange(h, &r, REQ("HEAD /metrics HTTP/1.0\r\n\r\n"), out, sizeof out);
    cr_assert_eq(status_of(out), 200);
    cr_assert_not_null(strstr(out, "Content-Length: 27\r\n"));
    cr_assert_eq(strstr(out, "\r\n\r\n") + 4, out + n);
    cr_assert_eq(r.calls, 3);
    rkv_http_stats st;
    settle(h, &r);
    cr_assert_eq(rkv_http_get_stats(h, &st), RKV_OK);
    cr_assert_eq(st.answered, 3);
    cr_assert_eq(st.errors, 0);
    cr_assert_eq(st.open, 0);
    rkv_http_close(h);
}

Test(fleet_http, request_split_byte_by_byte)
{
    rkv_http *h = open_any();
    render_ctx r = {.text = "a 1\n"};
    static const char req[] = "GET /metrics HTTP/1.1\r\nUser-Agent: t\r\n\r\n";
    int fd = client(h);
    for (size_t i = 0; i < sizeof req - 1; i++) {
        cr_assert_eq(send(fd, req + i, 1, 0), 1);
        step(h, &r);
    }
    char out[4096];
    size_t n = read_all(h, &r, fd, out, sizeof out);
    close(fd);
    cr_assert_eq(status_of(out), 200);
    cr_assert_str_eq(body_of(out, n), "a 1\n");
    rkv_http_close(h);
}

Test(fleet_http, bad_requests_get_their_status)
{
    rkv_http *h = open_any();
    render_ctx r = {.text = "a 1\n"};
    static const req_case cases[] = {
        {"GET / HTTP/1.1\r\n\r\n", 404},
        {"GET /metricsX HTTP/1.1\r\n\r\n", 404},
        {"POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc", 405},
        {"DELETE /metrics HTTP/1.0\r\n\r\n", 405},
        {"GET /metrics\r\n\r\n", 400},
        {"GET  /metrics HTTP/1.1\r\n\r\n", 400},
        {"GET /metrics HTTP/2.0\r\n\r\n", 400},
        {"GET /met\x01rics HTTP/1.1\r\n\r\n", 400},
        {"\r\n\r\n", 400},
        {"GARBAGE\n\n", 400},
        {"TOOLONGMETHOD /metrics HTTP/1.1\r\n\r\n", 400},
    };
    char out[4096];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = exchange(h, &r, cases[i].req, strlen(cases[i].req), out, sizeof out);
        cr_assert_eq(status_of(out), cases[i].code, "case %zu: %.40s", i, out);
        body_of(out, n);
    }
    cr_assert_not_null(strstr(out, "400"));
    cr_assert_eq(r.calls, 0, "rendered for a bad request");
    rkv_http_stats st;
    cr_assert_eq(rkv_http_get_stats(h, &st), RKV_OK);
    cr_assert_eq(st.errors, sizeof cases / sizeof cases[0]);
    cr_assert_eq(st.answered, 0);
    rkv_http_close(h);
}

Test(fleet_http, oversized_head_is_431)
{
    rkv_http *h = open_any();
    render_ctx r = {.text = "a 1\n"};
    char req[RKV_HTTP_MAX_REQUEST + 100];
    memcpy(req, "GET /metrics HTTP/1.1\r\nX: ", 26);
    memset(req + 26, 'y', sizeof req - 26);
    int fd = client(h);
    size_t sent = 0;
    /* the server stops reading at its bound: send what it takes */
    for (int spins = 0; spins < 200 && sent < sizeof req; spins++) {
        ssize_t k = send(fd, req + sent, sizeof req - sent, MSG_NOSIGNAL);
        if (k > 0)
            sent += (size_t)k;
        step(h, &r);
    }
    char out[4096];
    size_t n = read_all(h, &r, fd, out, sizeof out);
    close(fd);
    cr_assert_gt(n, 0);
    cr_assert_eq(status_of(out), 431);
    cr_assert_eq(r.calls, 0);
    rkv_http_close(h);
}

Test(fleet_http, render_too_large_is_500)
{
    rkv_http *h = open_any();
    render_ctx r = {.size = RKV_HTTP_MAX_BODY};
    char out[4096];
    exchange(h, &r, REQ("GET /metrics HTTP/1.0\r\n\r\n"), out, sizeof out);
    cr_assert_eq(status_of(out), 500);
    /* just under the bound fits, and arrives whole */
    r.size = RKV_HTTP_MAX_BODY - 1;
    char *big = malloc(2 * RKV_HTTP_MAX_BODY);
    cr_assert_not_null(big);
    size_t n = exchange(h, &r, REQ("GET /metrics HTTP/1.0\r\n\r\n"), big,
                        2 * RKV_HTTP_MAX_BODY);
    cr_assert_eq(status_of(big), 200);
    cr_assert_eq(strlen(body_of(big, n)), RKV_HTTP_MAX_BODY - 1);
    free(big);
    rkv_http_close(h);
}

/* With two connections open (the caller checked), gone closes: the server
 * notices within 20 steps (why: the failure message if not), and the other,
 * which never finishes its request, times out at the deadline. */
static void close_then_expire(rkv_http *h, render_ctx *r, int gone, const char *why)
{
    rkv_http_stats st;
    close(gone);
    int i = 0;
    do {
        step(h, r);
        cr_assert_eq(rkv_http_get_stats(h, &st), RKV_OK);
    } while (st.open == 2 && ++i < 20);
    cr_assert_eq(st.open, 1, "%s", why);
    g_now += RKV_HTTP_DEADLINE_MS;
    step(h, r);
    cr_assert_eq(rkv_http_get_stats(h, &st), RKV_OK);
    cr_assert_eq(st.open, 0);
    cr_assert_eq(st.timeouts, 1);
}

Test(fleet_http, slow_and_vanishing_clients_are_closed)
{
    rkv_http *h = open_any();
    render_ctx r = {.text = "a 1\n"};
    /* half a request, then silence: closed at the deadline */
    int slow = client(h);
    cr_assert_eq(send(slow, "GET /met", 8, 0), 8);
    /* a client that leaves mid-request */
    int gone = client(h);
    cr_assert_eq(send(gone, "GET /", 5, 0), 5);
    for (int i = 0; i < 20; i++)
        step(h, &r);
    rkv_http_stats st;
    cr_assert_eq(rkv_http_get_stats(h, &st), RKV_OK);
    cr_assert_eq(st.open, 2);
    close_then_expire(h, &r, gone, "a closed peer is still open");
    char c;
    ssize_t k;
    do {
        k = recv(slow, &c, 1, 0);
    } while (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && (step(h, &r), 1));
    cr_assert_leq(k, 0, "the slow client got an answer");
    close(slow);
    cr_assert_eq(r.calls, 0);
    rkv_http_close(h);
}

Test(fleet_http, connection_flood_is_bounded)
{
    rkv_http *h = open_any();
    render_ctx r = {.text = "a 1\n"};
    enum { N = RKV_HTTP_MAX_CONNS + 6 };
    int fd[N];
    for (int i = 0; i < N; i++) {
        fd[i] = client(h); /* a blocking connect: the backlog must drain */
        step(h, &r);
    }
    rkv_http_stats st;
    for (int i = 0; i < 50; i++) {
        step(h, &r);
        cr_assert_eq(rkv_http_get_stats(h, &st), RKV_OK);
        if (st.accepted == N)
            break;
    }
    cr_assert_eq(st.accepted, N);
    cr_assert_eq(st.open, RKV_HTTP_MAX_CONNS);
    cr_assert_eq(st.rejected, N - RKV_HTTP_MAX_CONNS);
    for (int i = 0; i < N; i++)
        close(fd[i]);
    settle(h, &r);
    /* freed slots serve again */
    char out[4096];
    size_t n = exchange(h, &r, REQ("GET /metrics HTTP/1.0\r\n\r\n"), out, sizeof out);
    cr_assert_eq(status_of(out), 200);
    cr_assert_str_eq(body_of(out, n), "a 1\n");
    rkv_http_close(h);
}

Test(fleet_http, open_errors)
{
    rkv_http *h = NULL, *h2 = NULL;
    cr_assert_eq(rkv_http_open("localhost", 0, &h), RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_http_open("1.2.3", 0, &h), RKV_ERR_INVALID_ARG);
    cr_assert_null(h);
    h = open_any();
    cr_assert_eq(rkv_http_open("127.0.0.1", rkv_http_port(h), &h2), RKV_ERR_IO);
    cr_assert_null(h2);
    cr_assert_not_null(strstr(rkv_last_error(), "127.0.0.1"));
    rkv_http_close(h);
    rkv_http_close(NULL);
}

/* ---- the POST path (rkv_http_set_post) ------------------------------------- */

typedef struct post_ctx {
    int calls;
    size_t last_len;
    uint64_t sum; /* of the body's bytes, to check it arrived whole */
    int code;     /* what the handler answers (0: 200) */
    int too_long; /* answer a length >= cap */
} post_ctx;

static size_t on_post(void *vctx, const char *body, size_t len, char *buf, size_t cap,
                      int *code)
{
    post_ctx *p = vctx;
    p->calls++;
    p->last_len = len;
    p->sum = 0;
    for (size_t i = 0; i < len; i++)
        p->sum += (unsigned char)body[i];
    *code = p->code ? p->code : 200;
    if (p->too_long)
        return cap;
    return (size_t)snprintf(buf, cap, "{\"len\": %zu}", len);
}

static rkv_http *open_post(post_ctx *p)
{
    rkv_http *h = open_any();
    cr_assert_eq(rkv_http_set_post(h, "/v1/route", on_post, p), RKV_OK);
    return h;
}

/* Sends all of buf (non-blocking, stepping the server while the socket is
 * full), then reads the answer. */
static size_t send_all_read(rkv_http *h, render_ctx *r, int fd, const char *buf,
                            size_t len, char *out, size_t cap)
{
    size_t off = 0;
    for (int spins = 0; off < len && spins < 100000; spins++) {
        ssize_t k = send(fd, buf + off, len - off, MSG_NOSIGNAL);
        if (k > 0)
            off += (size_t)k;
        else
            step(h, r);
    }
    cr_assert_eq(off, len, "the server stopped reading");
    return read_all(h, r, fd, out, cap);
}

Test(fleet_http, post_body_reaches_the_handler)
{
    post_ctx p = {0};
    rkv_http *h = open_post(&p);
    render_ctx r = {.text = "a 1\n"};
    char out[8192];
    /* head and body in one packet */
    size_t n = exchange(h, &r, REQ("POST /v1/route HTTP/1.1\r\ncontent-length: 5\r\n"
                                   "\r\nhello"), out, sizeof out);
    cr_assert_eq(status_of(out), 200);
    cr_assert_not_null(strstr(out, "Content-Type: application/json\r\n"));
    cr_assert_str_eq(body_of(out, n), "{\"len\": 5}");
    cr_assert_eq(p.calls, 1);
    cr_assert_eq(p.sum, 'h' + 'e' + 'l' + 'l' + 'o');
    /* byte by byte, with an empty body of length 0 as well */
    static const char req[] = "POST /v1/route HTTP/1.0\r\nContent-Length:  3 \r\n\r\nabc";
    int fd = client(h);
    for (size_t i = 0; i < sizeof req - 1; i++) {
        cr_assert_eq(send(fd, req + i, 1, 0), 1);
        step(h, &r);
    }
    n = read_all(h, &r, fd, out, sizeof out);
    close(fd);
    cr_assert_eq(status_of(out), 200);
    cr_assert_eq(p.calls, 2);
    cr_assert_eq(p.sum, 'a' + 'b' + 'c');
    n = exchange(h, &r, REQ("POST /v1/route HTTP/1.0\r\nContent-Length: 0\r\n\r\n"), out,
                 sizeof out);
    cr_assert_str_eq(body_of(out, n), "{\"len\": 0}");
    /* the largest body, announced with Expect: 100-continue */
    size_t big = RKV_HTTP_MAX_POST;
    char *msg = malloc(big + 256);
    int hl = snprintf(msg, 256, "POST /v1/route HTTP/1.1\r\nContent-Length: %zu\r\n"
                      "Expect: 100-continue\r\n\r\n", big);
    uint64_t sum = 0;
    for (size_t i = 0; i < big; i++) {
        msg[hl + i] = (char)('a' + i % 26);
        sum += (unsigned char)msg[hl + i];
    }
    fd = client(h);
    cr_assert_eq(send(fd, msg, (size_t)hl, 0), hl);
    char cont[64];
    ssize_t k = -1;
    for (int spins = 0; spins < 2000 && k < 0; spins++) {
        step(h, &r);
        k = recv(fd, cont, 25, 0);
    }
    cr_assert_eq(k, 25);
    cr_assert(memcmp(cont, "HTTP/1.1 100 Continue\r\n\r\n", 25) == 0);
    n = send_all_read(h, &r, fd, msg + hl, big, out, sizeof out);
    close(fd);
    cr_assert_eq(status_of(out), 200);
    cr_assert_eq(p.last_len, big);
    cr_assert_eq(p.sum, sum);
    free(msg);
    /* the handler's status and JSON pass through */
    p.code = 400;
    n = exchange(h, &r, REQ("POST /v1/route HTTP/1.0\r\nContent-Length: 1\r\n\r\nx"), out,
                 sizeof out);
    cr_assert_eq(status_of(out), 400);
    cr_assert_not_null(strstr(out, "application/json"));
    p.code = 0;
    p.too_long = 1;
    n = exchange(h, &r, REQ("POST /v1/route HTTP/1.0\r\nContent-Length: 1\r\n\r\nx"), out,
                 sizeof out);
    cr_assert_eq(status_of(out), 500);
    cr_assert_not_null(strstr(body_of(out, n), "\"status\": 500"));
    settle(h, &r);
    cr_assert_eq(r.calls, 0);
    rkv_http_close(h);
}

Test(fleet_http, post_without_a_usable_length_is_refused)
{
    post_ctx p = {0};
    rkv_http *h = open_post(&p);
    render_ctx r = {.text = "a 1\n"};
    static const req_case cases[] = {
        {"POST /v1/route HTTP/1.1\r\n\r\n{}", 411},
        {"POST /v1/route HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
         411},
        {"POST /v1/route HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked"
         "\r\n\r\n{}", 411},
        {"POST /v1/route HTTP/1.1\r\nContent-Length: x2\r\n\r\n{}", 400},
        {"POST /v1/route HTTP/1.1\r\nContent-Length: -2\r\n\r\n{}", 400},
        {"POST /v1/route HTTP/1.1\r\nContent-Length:\r\n\r\n{}", 400},
        {"POST /v1/route HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}",
         400},
        {"POST /v1/route HTTP/1.1\r\nContent-Length: 99999999999999\r\n\r\n{}", 400},
        {"POST /v1/route HTTP/1.1\r\nContent-Length: 1048577\r\n\r\n{}", 413},
        {"GET /v1/route HTTP/1.1\r\n\r\n", 405},
        {"HEAD /v1/route HTTP/1.1\r\n\r\n", 405},
        {"GET /v1/routes HTTP/1.1\r\n\r\n", 404},
        {"POST /metrics HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}", 405},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[4096];
        size_t n = exchange(h, &r, cases[i].req, strlen(cases[i].req), out, sizeof out);
        cr_assert_gt(n, 0, "case %zu: no answer", i);
        cr_assert_eq(status_of(out), cases[i].code, "case %zu: %.80s", i, out);
        if (strncmp(cases[i].req, "HEAD", 4) == 0) {
            cr_assert_eq(strstr(out, "\r\n\r\n") + 4, out + n, "HEAD: no body");
            cr_assert_not_null(strstr(out, "Allow: POST\r\n"));
            continue;
        }
        const char *b = body_of(out, n);
        if (strstr(cases[i].req, "/v1/route ")) {
            cr_assert_not_null(strstr(out, "application/json"), "case %zu", i);
            char want[32];
            snprintf(want, sizeof want, "\"status\": %d}", cases[i].code);
            cr_assert_not_null(strstr(b, want), "case %zu: %s", i, b);
        }
        if (cases[i].code == 405 && strstr(cases[i].req, "/v1/route "))
            cr_assert_not_null(strstr(out, "Allow: POST\r\n"), "case %zu", i);
    }
    cr_assert_eq(p.calls, 0, "no handler call for a refused request");
    settle(h, &r);
    rkv_http_close(h);
}

/* A body that stops short is closed at the deadline, one whose sender
 * leaves is closed at once; neither reaches the handler, and neither keeps
 * the others waiting. */
Test(fleet_http, slow_or_abandoned_bodies_are_closed)
{
    post_ctx p = {0};
    rkv_http *h = open_post(&p);
    render_ctx r = {.text = "a 1\n"};
    int slow = client(h);
    static const char part[] = "POST /v1/route HTTP/1.1\r\nContent-Length: 100\r\n\r\nabc";
    cr_assert_eq(send(slow, part, sizeof part - 1, 0), (ssize_t)(sizeof part - 1));
    int gone = client(h);
    cr_assert_eq(send(gone, part, sizeof part - 1, 0), (ssize_t)(sizeof part - 1));
    for (int i = 0; i < 20; i++)
        step(h, &r);
    rkv_http_stats st;
    cr_assert_eq(rkv_http_get_stats(h, &st), RKV_OK);
    cr_assert_eq(st.open, 2);
    /* meanwhile another client is answered */
    char out[4096];
    size_t n = exchange(h, &r, REQ("GET /metrics HTTP/1.0\r\n\r\n"), out, sizeof out);
    cr_assert_str_eq(body_of(out, n), "a 1\n");
    close_then_expire(h, &r, gone, "a peer that left mid-body is still open");
    close(slow);
    cr_assert_eq(p.calls, 0);
    rkv_http_close(h);
}

#define SEND(fd, lit) \
    cr_assert_eq(send(fd, lit, sizeof(lit) - 1, 0), (ssize_t)(sizeof(lit) - 1))

/* Reads until out[0..n) holds `answers` whole answers (stepping the
 * server); returns n. */
static size_t read_answers(rkv_http *h, render_ctx *r, int fd, char *out, size_t cap,
                           int answers)
{
    size_t n = 0;
    for (int spins = 0; spins < 2000; spins++) {
        size_t at = 0;
        int got = 0;
        for (size_t k; got < answers && (k = answer_len(out + at, n - at)) > 0; got++)
            at += k;
        if (got == answers && at == n)
            return n;
        step(h, r);
        ssize_t k = recv(fd, out + n, cap - 1 - n, 0);
        cr_assert_neq(k, 0, "closed after %zu bytes: %.200s", n, out);
        if (k > 0)
            n += (size_t)k;
        out[n] = 0;
    }
    cr_assert_fail("no %d answers: %.200s", answers, out);
    return 0;
}

/* HTTP/1.1 keeps the connection: requests one after another on it are
 * answered without "Connection: close", and it stays open between them. */
Test(fleet_http, keep_alive_serves_many_requests_on_one_connection)
{
    post_ctx p = {0};
    rkv_http *h = open_post(&p);
    render_ctx r = {.text = "a 1\n"};
    int fd = client(h);
    char out[8192];
    for (int i = 0; i < 5; i++) {
        if (i % 2)
            SEND(fd, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        else
            SEND(fd, "POST /v1/route HTTP/1.1\r\nContent-Length: 2\r\n"
                                      "\r\nab");
        size_t n = read_answers(h, &r, fd, out, sizeof out, 1);
        cr_assert_eq(status_of(out), 200);
        cr_assert_null(strstr(out, "Connection: close"), "%s", out);
        cr_assert_str_eq(body_of(out, n), i % 2 ? "a 1\n" : "{\"len\": 2}");
    }
    rkv_http_stats st;
    cr_assert_eq(rkv_http_get_stats(h, &st), RKV_OK);
    cr_assert_eq(st.accepted, 1);
    cr_assert_eq(st.answered, 5);
    cr_assert_eq(st.open, 1);
    cr_assert_eq(p.calls, 3);
    /* "Connection: close" ends it after its answer */
    SEND(fd, "GET /metrics HTTP/1.1\r\nConnection: Close\r\n\r\n");
    size_t n = read_all(h, &r, fd, out, sizeof out);
    cr_assert_not_null(strstr(out, "Connection: close\r\n"));
    cr_assert_str_eq(body_of(out, n), "a 1\n");
    char c;
    ssize_t k;
    do {
        step(h, &r);
        k = recv(fd, &c, 1, 0);
    } while (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
    cr_assert_eq(k, 0, "the server did not close");
    close(fd);
    settle(h, &r);
    rkv_http_close(h);
}

/* Requests sent back to back in one packet (pipelined) are answered in
 * order, the POST bodies where they lie. */
Test(fleet_http, pipelined_requests_are_answered_in_order)
{
    post_ctx p = {0};
    rkv_http *h = open_post(&p);
    render_ctx r = {.text = "a 1\n"};
    static const char reqs[] = "POST /v1/route HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"
                               "GET /metrics HTTP/1.1\r\n\r\n"
                               "POST /v1/route HTTP/1.1\r\nContent-Length: 1\r\n\r\nz"
                               "POST /v1/route HTTP/1.1\r\nContent-Length: 4\r\n\r\nwxyz";
    int fd = client(h);
    cr_assert_eq(send(fd, reqs, sizeof reqs - 1, 0), (ssize_t)(sizeof reqs - 1));
    char out[8192];
    size_t n = read_answers(h, &r, fd, out, sizeof out, 4);
    const char *want[] = {"{\"len\": 3}", "a 1\n", "{\"len\": 1}", "{\"len\": 4}"};
    size_t at = 0;
    for (int i = 0; i < 4; i++) {
        size_t k = answer_len(out + at, n - at);
        char one[1024];
        memcpy(one, out + at, k);
        one[k] = 0;
        cr_assert_eq(status_of(one), 200);
        cr_assert_str_eq(body_of(one, k), want[i], "answer %d", i);
        at += k;
    }
    cr_assert_eq(p.calls, 3);
    cr_assert_eq(p.sum, 'w' + 'x' + 'y' + 'z');
    /* a request split across sends after them still works */
    SEND(fd, "POST /v1/route HTTP/1.1\r\nContent-Le");
    step(h, &r);
    SEND(fd, "ngth: 2\r\n\r\nq");
    step(h, &r);
    SEND(fd, "r");
    n = read_answers(h, &r, fd, out, sizeof out, 1);
    cr_assert_str_eq(body_of(out, n), "{\"len\": 2}");
    cr_assert_eq(p.sum, 'q' + 'r');
    close(fd);
    settle(h, &r);
    rkv_http_close(h);
}

/* An idle kept-alive connection closes after RKV_HTTP_IDLE_MS (counted
 * apart from timeouts); a request that starts on it and stalls is closed
 * at RKV_HTTP_DEADLINE_MS from its first byte. */
Test(fleet_http, kept_alive_connections_time_out)
{
    rkv_http *h = open_any();
    render_ctx r = {.text = "a 1\n"};
    char out[4096];
    int idle = client(h), stall = client(h);
    for (int k = 0; k < 2; k++) {
        int fd = k ? stall : idle;
        SEND(fd, "GET /metrics HTTP/1.1\r\n\r\n");
        read_answers(h, &r, fd, out, sizeof out, 1);
    }
    g_now += RKV_HTTP_IDLE_MS - 1;
    SEND(stall, "GET /me"); /* its deadline: now + 2 s */
    step(h, &r);
    step(h, &r);
    rkv_http_stats st;
    cr_assert_eq(rkv_http_get_stats(h, &st), RKV_OK);
    cr_assert_eq(st.open, 2);
    g_now += 1;
    step(h, &r);
    cr_assert_eq(rkv_http_get_stats(h, &st), RKV_OK);
    cr_assert_eq(st.open, 1);
    cr_assert_eq(st.idle_closed, 1);
    cr_assert_eq(st.timeouts, 0);
    g_now += RKV_HTTP_DEADLINE_MS;
    step(h, &r);
    cr_assert_eq(rkv_http_get_stats(h, &st), RKV_OK);
    cr_assert_eq(st.open, 0);
    cr_assert_eq(st.timeouts, 1);
    close(idle);
    close(stall);
    rkv_http_close(h);
}

/* With the table full of idle kept-alive connections a new client is
 * served: the idle one nearest its deadline makes room. HTTP/1.0 is not
 * kept. */
Test(fleet_http, idle_connections_make_room_for_new_ones)
{
    rkv_http *h = open_any();
    render_ctx r = {.text = "a 1\n"};
    char out[4096];
    int fd[RKV_HTTP_MAX_CONNS];
    for (uint32_t i = 0; i < RKV_HTTP_MAX_CONNS; i++) {
        fd[i] = client(h);
        SEND(fd[i], "GET /metrics HTTP/1.1\r\n\r\n");
        read_answers(h, &r, fd[i], out, sizeof out, 1);
        g_now++;
    }
    rkv_http_stats st;
    cr_assert_eq(rkv_http_get_stats(h, &st), RKV_OK);
    cr_assert_eq(st.open, RKV_HTTP_MAX_CONNS);
    size_t n = exchange(h, &r, REQ("GET /metrics HTTP/1.0\r\n\r\n"), out, sizeof out);
    cr_assert_eq(status_of(out), 200);
    cr_assert_not_null(strstr(out, "Connection: close\r\n"));
    cr_assert_str_eq(body_of(out, n), "a 1\n");
    cr_assert_eq(rkv_http_get_stats(h, &st), RKV_OK);
    cr_assert_eq(st.idle_closed, 1);
    cr_assert_eq(st.rejected, 0);
    /* the oldest went: its peer sees the close */
    char c;
    ssize_t k;
    do {
        step(h, &r);
        k = recv(fd[0], &c, 1, 0);
    } while (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
    cr_assert_eq(k, 0);
    for (uint32_t i = 0; i < RKV_HTTP_MAX_CONNS; i++)
        close(fd[i]);
    settle(h, &r);
    rkv_http_close(h);
}

/* Random requests: pieces of real ones (request lines, headers with good
 * and bad lengths, bodies, pipelined, "\n" for "\r\n") with flipped bytes
 * and cut short, sent in random pieces from several clients at once that
 * close, half-close or read at random while the clock moves. Whatever
 * comes: rkv_http_check holds after every poll, whatever the server
 * answers starts with a status line, every connection ends once its peer
 * leaves, and a plain request is served at the end. */
static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void step_now(rkv_http *h, render_ctx *r)
{
    cr_assert_eq(rkv_http_poll(h, g_now, 0, render, r), RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(rkv_http_check(h), RKV_OK, "%s", rkv_last_error());
}

static size_t random_request(uint64_t *s, char *m, size_t cap)
{
    static const char *const lines[] = {
        "GET /metrics HTTP/1.1", "HEAD /metrics HTTP/1.0", "POST /v1/route HTTP/1.1",
        "POST /v1/route HTTP/1.0", "POST /elsewhere HTTP/1.1", "GET / HTTP/2",
        "POST /v1/route HTTP/1.1", "GET /metrics", "PUT /metrics HTTP/1.1", "",
        "GET /metrics HTTP/1.1 extra"};
    static const char *const headers[] = {
        "Content-Length: 0", "Content-Length: 5", "Content-Length: 17",
        "Content-Length: 99999999999999999999", "Content-Length: -1",
        "Content-Length: 5x", "content-length:3", "Content-Length: 1048577",
        "Connection: close", "Connection: keep-alive", "Expect: 100-continue",
        "Transfer-Encoding: chunked", "Host: x", ": no name", "X-Long: aaaaaaaaaaaaaaaa"};
    size_t k = 0;
    uint32_t nreq = 1 + (uint32_t)(rnd(s) % 3);
    for (uint32_t q = 0; q < nreq; q++) {
        const char *eol = rnd(s) % 8 ? "\r\n" : "\n";
        k += (size_t)snprintf(m + k, cap - k, "%s%s",
                              lines[rnd(s) % (sizeof lines / sizeof *lines)], eol);
        for (uint32_t i = (uint32_t)(rnd(s) % 4); i > 0 && k < cap / 2; i--)
            k += (size_t)snprintf(m + k, cap - k, "%s%s",
                                  headers[rnd(s) % (sizeof headers / sizeof *headers)], eol);
        uint32_t body = (uint32_t)(rnd(s) % 24);
        if (rnd(s) % 2) /* often a length that fits the body */
            k += (size_t)snprintf(m + k, cap - k, "Content-Length: %u%s", body, eol);
        k += (size_t)snprintf(m + k, cap - k, "%s", eol);
        for (; body > 0 && k < cap - 1; body--)
            m[k++] = (char)('a' + rnd(s) % 26);
    }
    for (uint32_t i = rnd(s) % 3 ? 0 : (uint32_t)(1 + rnd(s) % 3); i > 0 && k > 0; i--)
        m[rnd(s) % k] = (char)rnd(s); /* flips, NULs included */
    if (rnd(s) % 4 == 0 && k > 0)
        k = (size_t)(rnd(s) % k); /* cut short */
    return k;
}

Test(fleet_http, random_requests_never_break_the_server)
{
    post_ctx p = {0};
    rkv_http *h = open_post(&p);
    render_ctx r = {.text = "a 1\n"};
    enum { CLIENTS = 4, ROUNDS = 300 };
    int fd[CLIENTS];
    for (int c = 0; c < CLIENTS; c++)
        fd[c] = -1;
    uint64_t s = 0x9E3779B97F4A7C15ull;
    char m[2048], in[8192];
    for (int round = 0; round < ROUNDS; round++) {
        int c = (int)(rnd(&s) % CLIENTS);
        if (fd[c] < 0)
            fd[c] = client(h);
        size_t len = random_request(&s, m, sizeof m);
        int gone = 0;
        for (size_t off = 0; off < len;) {
            size_t piece = 1 + (size_t)(rnd(&s) % (len - off));
            ssize_t k = send(fd[c], m + off, piece, MSG_NOSIGNAL);
            if (k <= 0) {
                gone = 1; /* the server closed it (an error answer) */
                break;
            }
            off += (size_t)k;
            step_now(h, &r);
        }
        for (int i = 0; i < 3; i++)
            step_now(h, &r);
        ssize_t k = recv(fd[c], in, sizeof in - 1, 0);
        if (k == 0 || gone) {
            close(fd[c]);
            fd[c] = -1;
        }
        if (k > 0) {
            in[k] = 0;
            int code = 0;
            cr_assert(sscanf(in, "HTTP/1.%*1[01] %d ", &code) == 1 && code >= 100 &&
                          code <= 599,
                      "round %d: no status line: %.60s", round, in);
        }
        switch (fd[c] < 0 ? 3 : rnd(&s) % 4) {
        case 0:
            close(fd[c]);
            fd[c] = -1;
            break;
        case 1:
            shutdown(fd[c], SHUT_WR);
            break;
        default:
            break;
        }
        /* now and then past the 2 s a request may take */
        g_now += rnd(&s) % 10 == 0 ? 2100 : rnd(&s) % 300;
    }
    for (int c = 0; c < CLIENTS; c++)
        if (fd[c] >= 0)
            close(fd[c]);
    g_now += 10000; /* past every deadline */
    settle(h, &r);
    /* the rounds reached every kind of ending, not only the first check */
    rkv_http_stats st;
    cr_assert_eq(rkv_http_get_stats(h, &st), RKV_OK);
    cr_assert_gt(st.answered, 10, "%llu", (unsigned long long)st.answered);
    cr_assert_gt(st.errors, 10, "%llu", (unsigned long long)st.errors);
    cr_assert_gt(st.timeouts, 0);
    cr_assert_gt(p.calls, 3, "%d", p.calls);
    char out[4096];
    size_t n = exchange(h, &r, REQ("GET /metrics HTTP/1.0\r\n\r\n"), out, sizeof out);
    cr_assert_eq(status_of(out), 200);
    cr_assert_str_eq(body_of(out, n), "a 1\n");
    settle(h, &r);
    rkv_http_close(h);
}
