/* The writer thread's reply queue: see _replies.h. */
#include "_replies.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>

static int stopped_at(const ReplyQueue *q, int fd) {
    for (size_t i = 0; i < q->n_stopped; i++)
        if (q->stopped[i] == fd)
            return (int)i;
    return -1;
}

long long replies_add(ReplyQueue *q, long long after, int fd, const char *buf, size_t len,
                      void *owner, int first) {
    if (first) {
        int i = stopped_at(q, fd);
        if (i >= 0)
            q->stopped[i] = q->stopped[--q->n_stopped];
    }
    if (q->n == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 16;
        Reply **grown = realloc(q->items, cap * sizeof(Reply *));
        if (!grown)
            return -1;
        q->items = grown;
        q->cap = cap;
    }
    /* room to stop the socket of every reply queued (replies_finish adds at
     * most one stop per reply it finishes, and cannot fail) */
    size_t need = q->n_stopped + q->n + 1;
    if (need > q->cap_stopped) {
        size_t cap = need * 2;
        int *grown = realloc(q->stopped, cap * sizeof(int));
        if (!grown)
            return -1;
        q->stopped = grown;
        q->cap_stopped = cap;
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
        if (r->after <= good && stopped_at(q, r->fd) >= 0) {
            r->state = REPLY_DONE; /* behind a reply the loop finishes: the loop writes it */
            r->sent = 0;
            r->err = 0;
        } else if (r->after <= good) {
            r->state = REPLY_SENDING;
            out[k++] = r;
        } else { /* its records failed: the event loop answers with the error */
            r->state = REPLY_DONE;
            r->err = err ? err : EIO;
        }
    }
    return k;
}

static void reply_send(Reply *r) {
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

void replies_send(Reply **out, size_t n) {
    for (size_t i = 0; i < n; i++) {
        Reply *r = out[i];
        int behind = 0; /* an earlier reply on this socket did not go out whole */
        for (size_t j = 0; j < i && !behind; j++)
            behind = out[j]->fd == r->fd && out[j]->sent < out[j]->len;
        if (behind) {
            r->sent = 0;
            r->err = 0;
        } else {
            reply_send(r);
        }
    }
}

void replies_finish(ReplyQueue *q, Reply **out, size_t n) {
    for (size_t i = 0; i < n; i++) {
        Reply *r = out[i];
        r->state = REPLY_DONE;
        if (r->sent < r->len && stopped_at(q, r->fd) < 0)
            q->stopped[q->n_stopped++] = r->fd; /* room reserved by replies_add */
    }
}

int replies_cancel(ReplyQueue *q, long long token) {
    size_t i = 0;
    while (i < q->n && q->items[i]->token != token)
        i++;
    if (i == q->n || q->items[i]->state != REPLY_QUEUED)
        return 0;
    int fd = q->items[i]->fd;
    for (; i < q->n; i++) {
        if (q->items[i]->fd == fd && q->items[i]->state == REPLY_QUEUED)
            q->items[i]->state = REPLY_CANCELLED;
    }
    return 1;
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
    free(q->stopped);
    q->items = NULL;
    q->stopped = NULL;
    q->n = q->cap = q->n_stopped = q->cap_stopped = 0;
}
