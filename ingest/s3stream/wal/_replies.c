/* The writer thread's reply queue: see _replies.h. */
#include "_replies.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>

long long replies_add(ReplyQueue *q, long long after, int fd, const char *buf, size_t len,
                      void *owner) {
    if (q->n == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 16;
        Reply **grown = realloc(q->items, cap * sizeof(Reply *));
        if (!grown)
            return -1;
        q->items = grown;
        q->cap = cap;
    }
    Reply *r = calloc(1, sizeof(Reply));
    if (!r)
        return -1;
    r->token = ++q->next_token;
    r->after = after;
    r->fd = fd;
    r->state = REPLY_QUEUED;
    r->buf = buf;
    r->len = len;
    r->owner = owner;
    q->items[q->n++] = r;
    return r->token;
}

size_t replies_take(ReplyQueue *q, long long good, long long done, int err, Reply **out) {
    size_t k = 0;
    for (size_t i = 0; i < q->n; i++) {
        Reply *r = q->items[i];
        if (r->state != REPLY_QUEUED)
            continue;
        if (r->after > done)
            break; /* `after` never decreases: the rest wait too */
        if (r->after <= good) {
            r->state = REPLY_SENDING;
            out[k++] = r;
        } else { /* its records failed: the event loop answers with the error */
            r->state = REPLY_DONE;
            r->err = err ? err : EIO;
        }
    }
    return k;
}

void reply_send(Reply *r) {
    size_t off = 0;
    int err = 0;
    while (off < r->len) {
        ssize_t w = send(r->fd, r->buf + off, r->len - off, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                err = errno;
            break; /* a full socket buffer: the event loop writes the rest */
        }
        off += (size_t)w;
    }
    r->sent = off;
    r->err = err;
}

int replies_cancel(ReplyQueue *q, long long token) {
    for (size_t i = 0; i < q->n; i++) {
        Reply *r = q->items[i];
        if (r->token == token) {
            if (r->state != REPLY_QUEUED)
                return 0;
            r->state = REPLY_CANCELLED;
            return 1;
        }
    }
    return 0;
}

void replies_fail_queued(ReplyQueue *q, int err) {
    for (size_t i = 0; i < q->n; i++) {
        if (q->items[i]->state == REPLY_QUEUED) {
            q->items[i]->state = REPLY_DONE;
            q->items[i]->err = err;
        }
    }
}

size_t replies_pop(ReplyQueue *q, Reply **out) {
    size_t k = 0, kept = 0;
    for (size_t i = 0; i < q->n; i++) {
        Reply *r = q->items[i];
        if (r->state == REPLY_DONE || r->state == REPLY_CANCELLED)
            out[k++] = r;
        else
            q->items[kept++] = r;
    }
    q->n = kept;
    return k;
}

void replies_clear(ReplyQueue *q) {
    for (size_t i = 0; i < q->n; i++)
        free(q->items[i]);
    free(q->items);
    q->items = NULL;
    q->n = q->cap = 0;
}
