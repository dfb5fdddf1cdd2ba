/*
 * fleet/http.h -- a minimal HTTP/1.1 responder for the router's metrics
 * (Prometheus text format on GET /metrics) and one JSON POST path (the
 * route API, rkv_http_set_post), on plain non-blocking sockets
 * and poll(2), driven from the daemon's own loop: no thread, and one call
 * never waits longer than the timeout the caller gives (0: not at all).
 *
 * What it accepts: "GET" or "HEAD" of "/metrics" (a query string is
 * ignored) with HTTP/1.0 or 1.1; the request head (request line and
 * headers, up to the empty line) must fit RKV_HTTP_MAX_REQUEST bytes (else
 * 431) and arrive within RKV_HTTP_DEADLINE_MS of the connection or of the
 * request's first byte (else it is closed). Other paths: 404; other
 * methods: 405; a request line that does not parse: 400. A body is read
 * only on the POST path: it needs a Content-Length (none, or a
 * Transfer-Encoding: 411; twice or not a number: 400) of at most
 * RKV_HTTP_MAX_POST bytes (else 413), read within the same deadline as the
 * head ("Expect: 100-continue" is answered); other methods there: 405
 * (Allow: POST). Errors on the POST path are JSON ({"error": ..., "status":
 * N}). Every answer carries Content-Length.
 *
 * Persistent connections: an HTTP/1.1 request without "Connection: close"
 * (and without an error of the responder's own: 4xx on the request itself,
 * which may leave its body unread) keeps the connection open for the next
 * request, up to RKV_HTTP_IDLE_MS idle; pipelined requests are answered in
 * order, those read in one recv with one send. Any other answer carries
 * "Connection: close", and the connection is closed once it is written (a
 * slow reader gets the same deadline). At most RKV_HTTP_MAX_CONNS
 * connections are open; a new one with the table full closes the idle kept
 * one nearest its deadline, or, with none idle, is accepted and closed at
 * once (counted), so a flood cannot starve the daemon.
 *
 * Program-side code (the router daemon's), with the library's manners:
 * no prints, no clock (the caller passes now_ms: deadlines are judged at
 * the time given to the call), no static state, errors through rkv_status
 * + rkv_last_error.
 *
 * Invariants (rkv_http_check): open connections <= RKV_HTTP_MAX_CONNS;
 * each holds at most RKV_HTTP_IN_BUF bytes of input, a body only while it
 * reads one too large for that (body_fill < body_len <= RKV_HTTP_MAX_POST),
 * and at most 4 x RKV_HTTP_MAX_BODY of output; an idle one holds nothing.
 * Memory is bounded: per connection 16 KiB of input, 256 KiB of output and
 * one body of RKV_HTTP_MAX_POST bytes (with 16 connections ~21 MiB).
 */
#ifndef RKV_FLEET_HTTP_H
#define RKV_FLEET_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "radixkv.h"

#define RKV_HTTP_MAX_REQUEST 4096u
#define RKV_HTTP_MAX_CONNS 16u
#define RKV_HTTP_DEADLINE_MS 2000u
/* a kept-alive connection with no request under way closes after this */
#define RKV_HTTP_IDLE_MS 5000u
/* a connection's input: requests (head + body) up to this are answered
 * where they lie, without a copy */
#define RKV_HTTP_IN_BUF (16u * 1024u)
#define RKV_HTTP_MAX_BODY (64u * 1024u)
/* a POST body: 1 MiB holds ~150k token ids of 6 digits */
#define RKV_HTTP_MAX_POST (1024u * 1024u)

typedef struct rkv_http rkv_http;

/* Writes the metrics text into buf[0..cap) and returns its length (as
 * snprintf: a length >= cap means it did not fit: answered with 500). */
typedef size_t (*rkv_http_render_fn)(void *ctx, char *buf, size_t cap);

/* Answers a POST body[0..len): writes the JSON answer into buf[0..cap),
 * returns its length (>= cap: did not fit, answered 500) and sets *code
 * to the HTTP status (200..599). */
typedef size_t (*rkv_http_post_fn)(void *ctx, const char *body, size_t len,
                                   char *buf, size_t cap, int *code);

/* Listens on addr (dotted IPv4; "127.0.0.1" keeps it on loopback) and port
 * (0: the kernel picks one; rkv_http_port says which). RKV_ERR_INVALID_ARG
 * for a bad address, RKV_ERR_IO when the socket cannot be bound. */
rkv_status rkv_http_open(const char *addr, uint16_t port, rkv_http **out);
void rkv_http_close(rkv_http *h); /* NULL is fine; closes every connection */
uint16_t rkv_http_port(const rkv_http *h);
/* Serves POST on path (e.g. "/v1/route", < 64 bytes) with fn. */
rkv_status rkv_http_set_post(rkv_http *h, const char *path, rkv_http_post_fn fn,
                             void *ctx);

/* Accepts, reads, answers and closes what is ready; waits at most
 * timeout_ms (0: not at all) for something to become ready (deadlines are
 * judged at now_ms: a caller that waits long should keep timeout_ms
 * short). render is called once per GET /metrics. RKV_ERR_IO only when
 * poll itself fails. */
rkv_status rkv_http_poll(rkv_http *h, uint64_t now_ms, int timeout_ms,
                         rkv_http_render_fn render, void *ctx);

typedef struct rkv_http_stats {
    uint64_t accepted;
    uint64_t answered;     /* 200s                                       */
    uint64_t errors;       /* 4xx / 5xx answers                          */
    uint64_t timeouts;     /* closed at the deadline                     */
    uint64_t rejected;     /* closed at once: RKV_HTTP_MAX_CONNS open    */
    uint64_t idle_closed;  /* kept-alive connections closed idle (their
                              idle time up, or room for a new one)       */
    uint32_t open;         /* connections open now                       */
} rkv_http_stats;
rkv_status rkv_http_get_stats(const rkv_http *h, rkv_http_stats *out);
rkv_status rkv_http_check(const rkv_http *h);

#endif
