/*
 * Replies the WAL's writer thread sends itself, once the records they answer
 * are durable (see _groupcommit.c, "Replies").
 *
 * A queue of responses, each waiting for the group commit's durable count to
 * reach its `after`. The caller holds the group commit's mutex for every call
 * here; the sends themselves (replies_send) run without it. No Python here: the
 * data belongs to `owner`, which the Python side keeps alive until the reply
 * is popped (state DONE or CANCELLED).
 */
#ifndef TIDELAKE_WAL_REPLIES_H
#define TIDELAKE_WAL_REPLIES_H

#include <stddef.h>
#include <sys/types.h>

enum { REPLY_QUEUED, REPLY_SENDING, REPLY_DONE, REPLY_CANCELLED };

typedef struct {
    long long token;
    long long after; /* sent once this many records are durable */
    int fd;          /* a connected socket, the caller's to keep open until popped */
    int state;
    const char *buf;
    size_t len;
    void *owner;  /* what holds buf (the Python side's reference) */
    size_t sent;  /* bytes the socket took (DONE) */
    int err;      /* errno of the failed send, or of the records' failure (DONE) */
} Reply;

typedef struct {
    Reply **items; /* in the order added: `after` never decreases */
    size_t n, cap;
    long long next_token;
    /* sockets whose last reply did not go out whole: their later replies are
     * not sent (the event loop writes them, after the rest of that one),
     * until a reply queued as the first of a new run lifts it */
    int *stopped;
    size_t n_stopped, cap_stopped;
} ReplyQueue;

/* queue a reply; its token, or -1 (out of memory). `first`: no earlier reply
 * for this fd is outstanding (the caller's run of replies starts here), which
 * lifts a stop on the fd */
long long replies_add(ReplyQueue *q, long long after, int fd, const char *buf, size_t len,
                      void *owner, int first);

/* the replies due now that `good` records are durable and `done` finished
 * (those in [good, done) failed with `err`: they become DONE, unsent): each
 * due one becomes SENDING and goes into out[0..return) (out has room for
 * q->n); the caller sends them with replies_send, without the mutex */
size_t replies_take(ReplyQueue *q, long long good, long long done, int err, Reply **out);

/* send the SENDING replies out[0..n) in order, each without blocking
 * (MSG_DONTWAIT: what a socket does not take now is left to the event loop);
 * once one did not go out whole, the later ones on its socket are not sent
 * (sent 0, err 0: the loop writes them). Sets `sent` and `err`. Called
 * without the mutex, by one thread at a time (the caller's token). */
void replies_send(Reply **out, size_t n);

/* the sent replies out[0..n) become DONE; the sockets of those that did not
 * go out whole are stopped (holding the mutex) */
void replies_finish(ReplyQueue *q, Reply **out, size_t n);

/* a QUEUED reply, and every later one on its fd (all QUEUED too: replies
 * are taken in order), become CANCELLED (1); 0 when it is sending or done,
 * or unknown */
int replies_cancel(ReplyQueue *q, long long token);

/* every reply still QUEUED becomes DONE, unsent, with `err` (closing) */
void replies_fail_queued(ReplyQueue *q, int err);

/* move the DONE and CANCELLED replies out into out[0..return) (room for
 * q->n), in order; the caller frees them (free()) after releasing owner */
size_t replies_pop(ReplyQueue *q, Reply **out);

/* free every reply (dealloc; the caller released the owners) */
void replies_clear(ReplyQueue *q);

#endif
