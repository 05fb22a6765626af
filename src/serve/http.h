/* http: `qkv serve`'s HTTP side, on libmicrohttpd. One polling thread does all the
 * socket work and never waits on a model: a complete request is checked (serve/api.h),
 * queued (serve/jobs.h) and its connection suspended until a worker has the answer.
 *
 *   GET  /                the viewer page, live (the attention viewer's one page)
 *   GET  /v1/health       {"status": "ok", "queued": N}
 *   GET  /v1/model        the config, the step, vocabulary sizes and the checkpoints
 *   POST /v1/translate    serve/api.h
 *   POST /v1/attention    serve/api.h
 * Nothing else: no request names a file. Errors are {"error": "<one line>"}: 400 bad
 * request, 403 a Host or Origin not this server's, 404, 405 (with Allow), 413 too large,
 * 414/431 a request line or head too long, 415 a body not sent as application/json, 503
 * busy (with Retry-After) or stopping; serve/gate.h answers the faults of a request's
 * head before libmicrohttpd reads it, so none of its own pages reaches a client. Every
 * answer closes its connection.
 *
 * Bounds on clients: a request must arrive whole (headers and body) within
 * HTTP_RECEIVE_SECONDS of its connection's acceptance (the time its head took at the gate
 * counts), else its socket is shut; at most HTTP_MAX_CONNECTIONS at once. */
#ifndef QKV_SERVE_HTTP_H
#define QKV_SERVE_HTTP_H

#include "serve/jobs.h"
#include "serve/models.h"

#define HTTP_RECEIVE_SECONDS 10
#define HTTP_MAX_CONNECTIONS 512
#define HTTP_CONNECTION_MEMORY ((size_t)64 << 10) /* libmicrohttpd's memory per connection (serve/gate.h) */
#define HTTP_RETRY_AFTER "1"                      /* seconds, in a 503's Retry-After */

typedef struct HttpServer HttpServer;

/* Listens on host (an IPv4 or IPv6 address, or "localhost") and port (0: any free one;
 * *bound gets the port). heads (borrowed; NULL for none) puts the head grid on the live
 * page (served_heads). allow_hosts: NULL, or names (comma-separated; "*" any) a request's
 * Host may give besides loopback names and the address bound. NULL with the error set. */
HttpServer *http_start(ServedModels *models, const json_t *heads, Jobs *jobs, const char *host, int port,
                       const char *allow_hosts, int *bound);
/* The address it listens on ("::", "127.0.0.1"), and whether that is a loopback one. */
const char *http_address(const HttpServer *s);
int http_loopback(const HttpServer *s);
/* Stops accepting connections and refuses new requests (503); the ones in flight go on. */
void http_quiesce(HttpServer *s);
/* Requests queued or being answered. */
int http_in_flight(HttpServer *s);
/* Gives up on the requests in flight that no worker has answered yet: an answer that comes
 * for one later is not sent. Returns how many: exactly those that will get no answer (the
 * caller ends the process without http_stop, which would free them under their workers;
 * the others, answered, are sent as before and leave http_in_flight's count). */
int http_abandon(HttpServer *s);
void http_stop(HttpServer *s);

#endif
