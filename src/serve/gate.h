/* gate: the first reader of every connection `qkv serve` accepts, before libmicrohttpd
 * sees it.
 *
 * libmicrohttpd answers some faults of a request by itself, with HTML pages of its own (a
 * request line or headers past its memory, a Content-Length that is not a number or
 * that no body could have) or with no answer at all (a first line that is not HTTP); and
 * a client that sends a body over the limit without waiting for "100 Continue" has its
 * connection reset under it, so it reads a broken pipe, not the 413. The gate reads each
 * request's head where it lies, without taking it from the socket (MSG_PEEK), answers
 * those faults itself as the API answers every error ({"error": "<one line>"}), then
 * closes gently: it reads and drops what the client still sends, up to a bound, before
 * closing, so that the answer is not lost to a reset (nginx's lingering close). A
 * well-formed head is handed on with its socket untouched. Every answer of the server
 * closes its connection, so every request passes the gate.
 *
 * One thread accepts and holds the connections whose head has not arrived; one whose
 * head does not arrive within receive_seconds of its connection is closed. */
#ifndef QKV_SERVE_GATE_H
#define QKV_SERVE_GATE_H

#include <stddef.h>
#include <sys/socket.h>

#define GATE_LINE_MAX 8192   /* bytes of a request line: past it, 414 */
#define GATE_HEAD_MAX 16384  /* bytes of a request's head: past it, 431 */
#define GATE_HEADERS_MAX 100 /* header lines of a request: past it, 431 */
/* libmicrohttpd keeps an entry for every header line, query argument and cookie of a
 * request in the connection's fixed memory (HTTP_CONNECTION_MEMORY, 64 KiB), beside the
 * head itself; a head within the bounds above with a thousand '&' in its target or ';' in
 * a Cookie ran it out, and the client got the library's HTML 431, or no answer at all. So
 * these are counted here too. Measured with libmicrohttpd 0.9.75: a 16 KiB head of 100
 * header lines fits with 200 query arguments and 200 cookies and not with 250 of each,
 * so 100 of each leaves twice the room. Counting is the bound that holds whatever the
 * library's entries cost; a larger pool would only move the count it breaks at, for
 * every one of the 512 connections. */
#define GATE_ARGUMENTS_MAX 100            /* query arguments of a request's target ('&' or ';' apart): past it, 414 */
#define GATE_COOKIES_MAX 100              /* cookies of a request, its Cookie headers together: past it, 431 */
#define GATE_DRAIN_MAX ((size_t)64 << 20) /* bytes read and dropped after a refusal */
#define GATE_DRAIN_SECONDS 10             /* and for at most so long */

/* What the head says: decided, and if so whether it goes on. */
typedef struct {
    int status;              /* 0: well-formed, hand it on; else the HTTP status to answer */
    char error[192];         /* with status: the one line */
    unsigned long long body; /* the Content-Length it declares (0: none) */
    int expect_continue;     /* it asks for "100 Continue" before sending its body */
} GateVerdict;

/* Reads head[0..n), what has arrived of a connection so far. 0: nothing decided yet (more
 * must arrive); 1: decided, *v filled. A head is refused when its request line is not
 * METHOD TARGET HTTP/1.x (400; another version 505), longer than GATE_LINE_MAX or of more
 * than GATE_ARGUMENTS_MAX query arguments (414), the head longer than GATE_HEAD_MAX, of more
 * than GATE_HEADERS_MAX lines or GATE_COOKIES_MAX cookies (431), a header
 * line is not NAME: VALUE, Content-Length is not a number (digits alone) or said twice
 * apart (400), a Transfer-Encoding comes (411: a body comes whole), an HTTP/1.1 request
 * names no Host (400), or the body it declares is over body_max (413). */
int gate_check_head(const char *head, size_t n, unsigned long long body_max, GateVerdict *v);

/* The answer to a refused head: a whole HTTP/1.1 response (status, the JSON error, and
 * "Connection: close"), malloc'd; its length in *len. */
char *gate_answer(const GateVerdict *v, size_t *len);

typedef struct Gate Gate;
/* Takes a connection whose head is well-formed, accepted at now_seconds() accepted (its
 * bound on receiving the request counts from then, not from the hand-on): 0 when it did
 * (the fd is its own from then on, and gate_handed_closed is called once it closes), -1
 * when it could not (the fd is closed). */
typedef int (*GateHandOn)(void *ctx, int fd, const struct sockaddr *addr, socklen_t addr_len, double accepted);

/* Accepts on listen_fd (listening, the gate's from now on) until gate_close. At most
 * max_connections are open at once, those waiting for their head here and those handed on
 * together: past it, new ones wait in the kernel's backlog until one closes (so the server
 * behind is never handed more than it takes). NULL with the error set. */
Gate *gate_start(int listen_fd, unsigned long long body_max, int receive_seconds, int max_connections,
                 GateHandOn hand_on, void *ctx);
/* A connection handed on has closed (any thread). */
void gate_handed_closed(Gate *g);
/* Stops accepting: the listening socket is closed; heads already arriving go on. */
void gate_quiesce(Gate *g);
/* Stops the thread and closes every connection it still holds; g stays valid (for
 * gate_handed_closed) until gate_free. */
void gate_close(Gate *g);
void gate_free(Gate *g);

#endif
