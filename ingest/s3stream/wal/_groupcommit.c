/*
 * The file WAL's group commit, on a writer thread that never takes the GIL.
 *
 * Why C: the Python writer thread needs the GIL twice per group commit, to
 * take the queue after it wakes and to hand the outcome back to the event
 * loop. Whenever the loop thread is running Python (another request), the
 * writer waits for it: measured on the paced 20 MB/s produce run, the queue
 * wait's p99 was 0.7-1.2 ms and the hand-back's 0.4 ms (4-6 ms under full
 * load), against 0.17-0.19 ms for the writev + fdatasync itself. This thread
 * only touches memory the loop handed it under a mutex, and tells the loop
 * through an eventfd that the loop watches with add_reader.
 *
 * Protocol (all methods run on the loop thread, holding the GIL):
 *   w = GroupCommit(fd, dir_fd, prefill=0, limit=0, depth=1)
 *                                 takes the active segment's fd and the WAL
 *                                 directory's fd (both stay the caller's to
 *                                 close at the end; see `fd` below); with
 *                                 prefill > 0, see "Prefill" below; with
 *                                 depth > 1, see "Depth" below
 *   w.eventfd                     readable when appends finished
 *   seq = w.submit(header, payload[, new_fd])
 *                                 queue one record (the writer does not see it
 *                                 before kick()); with new_fd >= 0 the
 *                                 record starts a new segment: what is queued
 *                                 before it is written and fdatasync'd, the
 *                                 directory fsync'd, the old fd closed, and
 *                                 writing goes on in new_fd. The buffers are
 *                                 held (not copied) until the record is
 *                                 finished.
 *   w.kick()                      wake an idle writer for what is queued: the
 *                                 WAL kicks once per loop iteration, so that
 *                                 every append of the iteration (all
 *                                 partitions of a request, all requests of one
 *                                 read) shares one fdatasync; a busy writer
 *                                 takes what was queued during its sync as soon
 *                                 as the sync is done
 *   (done, good, errno, seconds) = w.completed()
 *                                 records [0, good) are durable, [good, done)
 *                                 failed with errno; `seconds` holds the
 *                                 duration of each group commit since the last
 *                                 call. Releases the finished records' buffers.
 *   token = w.reply_after(sock_fd, data, first=True)
 *                                 send `data` (bytes) on the connected socket
 *                                 sock_fd once every record submitted so far
 *                                 is durable (see "Replies"); None when they
 *                                 already are, or the WAL failed or closes.
 *                                 A socket's replies go out in the order
 *                                 queued; once one did not go out whole, the
 *                                 later ones are not sent (the caller writes
 *                                 them) until one queued with first=True (none
 *                                 of the caller's earlier ones outstanding)
 *   w.cancel_reply(token)         True if the reply was still waiting: it and
 *                                 every later one on its socket are never
 *                                 sent; False once it is being sent
 *   [(token, sent, errno)] = w.replies()
 *                                 the replies finished since the last call:
 *                                 `sent` bytes went out (all, some: the rest
 *                                 is the caller's to write, or none: errno
 *                                 says why, the records' failure or the
 *                                 socket's); cancelled ones are dropped
 *   w.close()                     finish what is queued, stop the thread
 *   w.fd                          the segment fd being written (the caller
 *                                 closes it after close())
 *   w.syncs                       group commits (fdatasync calls) so far
 *
 * Once a write fails, every later record fails too (the WAL is fenced).
 *
 * Depth: with one writer thread, a record queued while a group commit's
 * fdatasync runs waits for the rest of that sync and then for its own. With
 * `depth` threads, the next thread writes the next group (in file order: a
 * write token passes from writev to writev) and starts its fdatasync while
 * the earlier ones still run; measured on this project's VM disk, two syncs
 * in flight finish 1.5-1.6x as many 25 KiB group commits a second as one. A
 * group is still reported durable only after every group before it (a
 * crash recovers the log up to its first hole), so a record waits for the
 * longer of the earlier sync and its own, not for their sum. Rolling to a
 * new segment waits for every sync of the old fd before closing it.
 *
 * Prefill: an fdatasync that grows its file must also commit the new size,
 * a journal commit on ext4: measured on this project's VM disk, 25 KiB
 * writes synced into a file they extend take p50 0.28 / p99 0.9-1.0 ms,
 * into bytes written before p50 0.19 / p99 0.44-0.70 ms. A recycled segment
 * is such bytes; a new one is not. So, when it is idle (nothing kicked), the
 * writer writes zeros ahead of its file offset in the active segment, one
 * PREFILL_STEP at a time, each fdatasync'd at once (so the size is committed
 * then, not by a record's sync), until the file reaches `prefill` bytes past
 * the offset or `limit` (the segment size). It checks for records between
 * steps. Only this thread writes the file, so zeros never land on a record;
 * the records go on at the fd's offset (writev), which pwrite does not move.
 * The zeros read as the end of the log (a record's CRC covers its position),
 * and the caller cuts them at close. A failing step only stops prefilling.
 *
 * Replies: the Produce response of records being synced is known before
 * they are durable. Handed here, the writer thread that makes them durable
 * sends it itself, right after its fdatasync, instead of signalling the
 * event loop and waiting for it to wake, run the completion chain in Python
 * and write the response (measured with perf trace on the paced request:
 * 100-130 us from the eventfd write to the loop's send). The sends come
 * before the eventfd's write: written first, the loop's wake-up took the
 * writer's core before it sent. So a client may hold a reply before the
 * loop has read the completion that made its records durable: while replies
 * are outstanding, the loop reads completions (completed(), replies())
 * before it serves another request, so that a read of the records finds
 * them. `good` moves before any reply due on it is sent. The caller must not
 * write to that socket while a reply is queued or sending.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "_replies.h"

#ifndef IOV_MAX
#define IOV_MAX 1024
#endif
#define MAX_DURATIONS 4096
#define PREFILL_STEP (256 * 1024)
#define MAX_DEPTH 4

typedef struct {
    Py_buffer header;
    Py_buffer payload;
    int new_fd;
} Entry;

typedef struct {
    const void *base[2];
    size_t len[2];
    int new_fd;
} Item; /* the writer's own copy of an entry, taken under the mutex */

typedef struct {
    PyObject_HEAD
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* idle writers wait here for a batch to take */
    pthread_cond_t no_sync; /* a writer rolling the segment waits here (syncing == 0) */
    pthread_t threads[MAX_DEPTH];
    int n_threads; /* started */
    int depth;     /* writer threads: group commits that may be in flight at once */
    int inited;
    int running;
    int closing;
    int fd;
    int dir_fd;
    int efd;
    /* entries[i] is record number first + i; [released, submitted) are held;
     * the writer takes up to `kicked` */
    Entry *entries;
    Py_ssize_t cap;
    long long first;
    long long released;
    long long submitted;
    long long kicked; /* what the writer may take: up to the last kick, or
                       * everything queued when its last sync ended */
    long long taken;  /* handed to the writer */
    long long done;  /* finished by the writer */
    long long good;  /* durable */
    int error;       /* errno of the first failure, 0 if none */
    int writing;     /* a thread holds the write token (writev, roll, prefill zeros) */
    int syncing;     /* threads in an fdatasync of the segment fd */
    /* batches finished out of order, waiting for an earlier one (< depth) */
    long long fin_start[MAX_DEPTH], fin_end[MAX_DEPTH];
    int fin_err[MAX_DEPTH];
    int n_finished;
    int outstanding; /* batches taken and not yet counted in `done` (<= depth) */
    unsigned long long syncs;
    long long prefill; /* bytes to keep written ahead of the offset; 0: off */
    long long limit;   /* never prefill past this size (the segment size) */
    char *zeros;       /* PREFILL_STEP zero bytes */
    double durations[MAX_DURATIONS];
    int n_durations;
    ReplyQueue replies; /* under the mutex */
    int replying;       /* a writer thread is sending replies (one at a time) */
} GroupCommit;

#define CHECK_INITED(self)                                                       \
    if (!(self)->inited) {                                                       \
        PyErr_SetString(PyExc_RuntimeError, "GroupCommit is not initialised");  \
        return NULL;                                                             \
    }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* writev every byte of iov[0..n) (handles short writes); 0 or an errno */
static int write_all(int fd, struct iovec *iov, int n) {
    int i = 0;
    while (i < n) {
        int chunk = n - i > IOV_MAX ? IOV_MAX : n - i;
        ssize_t w = writev(fd, iov + i, chunk);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        while (i < n && (size_t)w >= iov[i].iov_len) {
            w -= (ssize_t)iov[i].iov_len;
            i++;
        }
        if (i < n && w > 0) {
            iov[i].iov_base = (char *)iov[i].iov_base + w;
            iov[i].iov_len -= (size_t)w;
        }
    }
    return 0;
}

static int sync_fd(int fd) {
    while (fdatasync(fd) != 0) {
        if (errno != EINTR)
            return errno;
    }
    return 0;
}

/* wait (holding the mutex) until no thread is in an fdatasync of the
 * segment fd: a thread that rolls the segment closes the old fd only then,
 * so that no fdatasync can reach a reused fd number */
static void wait_no_sync(GroupCommit *self) {
    while (self->syncing)
        pthread_cond_wait(&self->no_sync, &self->mu);
}

/* Wake-ups (holding the mutex). A broadcast to every writer on each change
 * woke the idle ones several times per group commit only to sleep again:
 * strace of one Produce in flight counted 16 futex calls a request, 12 of
 * them the writer threads' (the idle writer of a depth-2 writer woken about
 * six times per record). Now each change wakes only who can act on it. */

/* the write token is free or a batch finished: one idle writer, if there is
 * a batch it may take (the one that just finished goes on by itself) */
static void wake_writer(GroupCommit *self) {
    if (self->taken != self->kicked && !self->writing && self->outstanding < self->depth)
        pthread_cond_signal(&self->cv);
}

/* an fdatasync ended: a writer waiting to close the old segment's fd */
static void sync_ended(GroupCommit *self) {
    self->syncing--;
    if (!self->syncing)
        pthread_cond_broadcast(&self->no_sync);
}

/* write one batch (the caller holds the write token, not the mutex): the
 * records go on at the fd's offset; a record with a new fd first makes what
 * is before it durable in the old segment (see submit). Returns 0 or an
 * errno; *fd_out is the fd the batch's last records went to. */
static int write_batch(GroupCommit *self, Item *items, Py_ssize_t n, struct iovec *iov,
                       int *fd_out) {
    int k = 0, err;
    int fd = self->fd; /* only the token holder changes it */
    for (Py_ssize_t i = 0; i < n; i++) {
        if (items[i].new_fd >= 0) {
            if (k && (err = write_all(fd, iov, k)) != 0)
                return err;
            k = 0;
            if ((err = sync_fd(fd)) != 0)
                return err;
            /* the new segment's name must be durable before its records are */
            while (fsync(self->dir_fd) != 0) {
                if (errno != EINTR)
                    return errno;
            }
            pthread_mutex_lock(&self->mu);
            wait_no_sync(self);
            close(fd);
            fd = self->fd = items[i].new_fd;
            pthread_mutex_unlock(&self->mu);
        }
        for (int j = 0; j < 2; j++) {
            if (items[i].len[j]) {
                iov[k].iov_base = (void *)items[i].base[j];
                iov[k].iov_len = items[i].len[j];
                k++;
            }
        }
    }
    *fd_out = fd;
    if (k && (err = write_all(fd, iov, k)) != 0)
        return err;
    return 0;
}

/* the zeros of one prefill step on fd (see "Prefill"; the caller holds the
 * write token): 1 if it wrote them (the caller syncs), 0 if the file is
 * ahead enough, -1 if it failed (prefilling stops) */
static int prefill_write(GroupCommit *self, int fd) {
    off_t cur = lseek(fd, 0, SEEK_CUR);
    struct stat st;
    if (cur < 0 || fstat(fd, &st) != 0)
        return -1;
    long long target = (long long)cur + self->prefill;
    if (target > self->limit)
        target = self->limit;
    if ((long long)st.st_size + PREFILL_STEP > target)
        return 0;
    size_t left = PREFILL_STEP;
    off_t at = st.st_size;
    while (left) {
        ssize_t w = pwrite(fd, self->zeros + (PREFILL_STEP - left), left, at);
        if (w <= 0) { /* 0: the file takes no more bytes, as good as a failure */
            if (w < 0 && errno == EINTR)
                continue;
            return -1;
        }
        left -= (size_t)w;
        at += w;
    }
    return 1;
}

/* record a finished batch [start, end) (holding the mutex): `done` and
 * `good` only move over a contiguous run of finished batches, so a batch
 * synced before an earlier one is reported after it, and one after a failed
 * batch is reported failed */
static void finish_batch(GroupCommit *self, long long start, long long end, int err,
                         double took) {
    if (err) {
        if (!self->error)
            self->error = err;
    } else {
        self->syncs++;
        if (self->n_durations < MAX_DURATIONS)
            self->durations[self->n_durations++] = took;
    }
    int slot = self->n_finished++;
    self->fin_start[slot] = start;
    self->fin_end[slot] = end;
    self->fin_err[slot] = err;
    for (int moved = 1; moved;) {
        moved = 0;
        for (int i = 0; i < self->n_finished; i++) {
            if (self->fin_start[i] != self->done)
                continue;
            if (!self->fin_err[i] && self->good == self->done)
                self->good = self->fin_end[i];
            self->done = self->fin_end[i];
            self->outstanding--;
            self->n_finished--;
            self->fin_start[i] = self->fin_start[self->n_finished];
            self->fin_end[i] = self->fin_end[self->n_finished];
            self->fin_err[i] = self->fin_err[self->n_finished];
            moved = 1;
            break;
        }
    }
}

static void signal_loop(GroupCommit *self) {
    uint64_t one = 1;
    ssize_t ignored = write(self->efd, &one, sizeof one);
    (void)ignored;
}

/* one of `depth` writer threads. A thread takes what is kicked only while it
 * holds the write token (`writing`), so records reach the file in order;
 * it gives the token up before its fdatasync, so that the next thread can
 * write and sync the next batch while this sync runs. */
static void *writer_main(void *arg) {
    GroupCommit *self = (GroupCommit *)arg;
    Item *items = NULL;
    struct iovec *iov = NULL;
    Py_ssize_t room = 0;
    Reply **due = NULL;
    size_t due_room = 0;
    pthread_mutex_lock(&self->mu);
    for (;;) {
        if (self->closing)
            self->kicked = self->submitted; /* write everything before stopping */
        if (self->taken == self->kicked && self->closing)
            break;
        if (self->taken == self->kicked || self->writing ||
            self->outstanding >= self->depth) {
            pthread_cond_wait(&self->cv, &self->mu);
            continue;
        }
        long long start = self->taken, end = self->kicked;
        Py_ssize_t n = (Py_ssize_t)(end - start);
        int err = self->error;
        if (n > room) {
            Py_ssize_t want = n * 2;
            Item *ni = realloc(items, (size_t)want * sizeof(Item));
            struct iovec *nv = ni ? realloc(iov, (size_t)want * 2 * sizeof(struct iovec)) : NULL;
            if (ni)
                items = ni;
            if (nv)
                iov = nv;
            if (!ni || !nv)
                err = err ? err : ENOMEM;
            else
                room = want;
        }
        if (!err) {
            for (Py_ssize_t i = 0; i < n; i++) {
                Entry *e = &self->entries[start - self->first + i];
                items[i].base[0] = e->header.buf;
                items[i].len[0] = (size_t)e->header.len;
                items[i].base[1] = e->payload.buf;
                items[i].len[1] = (size_t)e->payload.len;
                items[i].new_fd = e->new_fd;
            }
        }
        self->taken = end;
        self->writing = 1;
        self->outstanding++;
        pthread_mutex_unlock(&self->mu);

        double started = now_s();
        int fd = -1;
        if (!err)
            err = write_batch(self, items, n, iov, &fd);

        pthread_mutex_lock(&self->mu);
        self->writing = 0;
        if (!err)
            self->syncing++;
        wake_writer(self); /* the token is free */
        pthread_mutex_unlock(&self->mu);
        if (!err) {
            err = sync_fd(fd);
            pthread_mutex_lock(&self->mu);
            sync_ended(self);
        } else {
            pthread_mutex_lock(&self->mu);
        }
        double took = now_s() - started;
        finish_batch(self, start, end, err, took);
        /* busy, the writers go on with whatever came meanwhile; only idle ones
         * wait for the next kick */
        self->kicked = self->submitted;
        /* the replies now due, before waking the loop (whose wake-up may
         * preempt this thread); one thread at a time sends, so that a
         * socket's replies go out in their order, and it goes on with what
         * became due meanwhile (another thread's batch) before it stops */
        if (self->replies.n && !self->replying) {
            self->replying = 1;
            for (;;) {
                if (self->replies.n > due_room) {
                    Reply **grown = realloc(due, self->replies.n * 2 * sizeof(Reply *));
                    if (!grown)
                        break; /* they wait for the next batch */
                    due = grown;
                    due_room = self->replies.n * 2;
                }
                size_t n_due =
                    replies_take(&self->replies, self->good, self->done, self->error, due);
                if (!n_due)
                    break;
                pthread_mutex_unlock(&self->mu);
                replies_send(due, n_due);
                pthread_mutex_lock(&self->mu);
                replies_finish(&self->replies, due, n_due);
            }
            self->replying = 0;
        }
        pthread_mutex_unlock(&self->mu);
        signal_loop(self);
        pthread_mutex_lock(&self->mu);
        /* idle (no sync in flight either: a record's sync must not find a new
         * size to commit): write ahead in the active segment, a step at a time */
        while (self->prefill > 0 && self->taken == self->kicked && !self->writing &&
               !self->syncing && !self->closing && !self->error) {
            int pfd = self->fd;
            self->writing = 1;
            pthread_mutex_unlock(&self->mu);
            int stepped = prefill_write(self, pfd);
            pthread_mutex_lock(&self->mu);
            self->writing = 0;
            if (stepped > 0)
                self->syncing++;
            wake_writer(self); /* records queued during the zeros' write */
            if (stepped > 0) {
                pthread_mutex_unlock(&self->mu);
                if (sync_fd(pfd) != 0)
                    stepped = -1;
                pthread_mutex_lock(&self->mu);
                sync_ended(self);
            }
            if (stepped < 0)
                self->prefill = 0;
            if (stepped <= 0)
                break;
        }
    }
    pthread_cond_broadcast(&self->cv);
    pthread_cond_broadcast(&self->no_sync);
    pthread_mutex_unlock(&self->mu);
    free(items);
    free(iov);
    free(due);
    signal_loop(self);
    return NULL;
}

static int GroupCommit_init(GroupCommit *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"fd", "dir_fd", "prefill", "limit", "depth", NULL};
    int fd, dir_fd, depth = 1;
    long long prefill = 0, limit = 0;
    if (self->inited) {
        PyErr_SetString(PyExc_RuntimeError, "GroupCommit is already initialised");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "ii|LLi", kwlist, &fd, &dir_fd, &prefill,
                                     &limit, &depth))
        return -1;
    if (depth < 1 || depth > MAX_DEPTH) {
        PyErr_Format(PyExc_ValueError, "depth must be 1 to %d", MAX_DEPTH);
        return -1;
    }
    if (prefill < 0 || limit < 0) {
        PyErr_SetString(PyExc_ValueError, "prefill and limit must not be negative");
        return -1;
    }
    if (prefill > 0) {
        self->zeros = calloc(1, PREFILL_STEP);
        if (self->zeros == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    self->prefill = prefill;
    self->limit = limit;
    self->fd = fd;
    self->dir_fd = dir_fd;
    self->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (self->efd < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    pthread_mutex_init(&self->mu, NULL);
    pthread_cond_init(&self->cv, NULL);
    pthread_cond_init(&self->no_sync, NULL);
    self->depth = depth;
    self->inited = 1;
    self->running = 1;
    for (int i = 0; i < depth; i++) {
        int rc = pthread_create(&self->threads[i], NULL, writer_main, self);
        if (rc != 0) {
            if (self->n_threads > 0)
                break; /* go on with the threads started */
            self->running = 0;
            errno = rc;
            PyErr_SetFromErrno(PyExc_OSError);
            return -1;
        }
        self->n_threads++;
        /* named (here, so the name is there when init returns), so that top
         * -H, perf and the tests can tell these threads apart */
        pthread_setname_np(self->threads[i], "wal-sync");
    }
    return 0;
}

static void release_upto(GroupCommit *self, long long upto) {
    /* The loop thread, holding the GIL and not the mutex: the writer no longer
     * reads these entries, and only this thread moves the array (submit). A
     * release may run a finalizer that submits again, so each entry is copied
     * out and counted released before its buffers are let go. */
    while (self->released < upto) {
        Entry e = self->entries[self->released - self->first];
        self->released++;
        PyBuffer_Release(&e.header);
        PyBuffer_Release(&e.payload);
    }
}

static void stop_thread(GroupCommit *self) {
    if (!self->running)
        return;
    pthread_mutex_lock(&self->mu);
    self->closing = 1;
    pthread_cond_broadcast(&self->cv);
    pthread_cond_broadcast(&self->no_sync);
    pthread_mutex_unlock(&self->mu);
    Py_BEGIN_ALLOW_THREADS
    for (int i = 0; i < self->n_threads; i++)
        pthread_join(self->threads[i], NULL);
    Py_END_ALLOW_THREADS
    self->running = 0;
    pthread_mutex_lock(&self->mu);
    replies_fail_queued(&self->replies, ESHUTDOWN); /* records that never became durable */
    pthread_mutex_unlock(&self->mu);
}

static void GroupCommit_dealloc(GroupCommit *self) {
    stop_thread(self);
    for (size_t i = 0; i < self->replies.n; i++)
        Py_XDECREF((PyObject *)self->replies.items[i]->owner);
    replies_clear(&self->replies);
    if (self->entries) {
        release_upto(self, self->submitted);
        PyMem_Free(self->entries);
    }
    free(self->zeros);
    if (self->inited) {
        close(self->efd);
        pthread_mutex_destroy(&self->mu);
        pthread_cond_destroy(&self->cv);
        pthread_cond_destroy(&self->no_sync);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *GroupCommit_submit(GroupCommit *self, PyObject *args) {
    PyObject *header, *payload;
    int new_fd = -1;
    CHECK_INITED(self);
    if (!PyArg_ParseTuple(args, "OO|i", &header, &payload, &new_fd))
        return NULL;
    if (!self->running || self->closing) {
        PyErr_SetString(PyExc_RuntimeError, "the WAL writer is not running");
        return NULL;
    }
    Entry e;
    if (PyObject_GetBuffer(header, &e.header, PyBUF_SIMPLE) < 0)
        return NULL;
    if (PyObject_GetBuffer(payload, &e.payload, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&e.header);
        return NULL;
    }
    e.new_fd = new_fd;
    pthread_mutex_lock(&self->mu);
    Py_ssize_t used = (Py_ssize_t)(self->submitted - self->first);
    Py_ssize_t dead = (Py_ssize_t)(self->released - self->first);
    if (used == self->cap && dead > 0 && dead >= used / 2) {
        /* drop released entries from the front (the writer copies what it
         * needs under this mutex, so moving entries is safe) */
        memmove(self->entries, self->entries + dead, (size_t)(used - dead) * sizeof(Entry));
        self->first += dead;
        used -= dead;
    }
    if (used == self->cap) {
        Py_ssize_t cap = self->cap ? self->cap * 2 : 256;
        Entry *grown = PyMem_Realloc(self->entries, (size_t)cap * sizeof(Entry));
        if (!grown) {
            pthread_mutex_unlock(&self->mu);
            PyBuffer_Release(&e.header);
            PyBuffer_Release(&e.payload);
            return PyErr_NoMemory();
        }
        self->entries = grown;
        self->cap = cap;
    }
    self->entries[used] = e;
    long long seq = self->submitted++;
    pthread_mutex_unlock(&self->mu);
    return PyLong_FromLongLong(seq);
}

static PyObject *GroupCommit_kick(GroupCommit *self, PyObject *Py_UNUSED(ignored)) {
    CHECK_INITED(self);
    pthread_mutex_lock(&self->mu);
    if (self->kicked != self->submitted) {
        /* an idle writer waits for this; busy ones take it after their sync */
        self->kicked = self->submitted;
        pthread_cond_signal(&self->cv);
    }
    pthread_mutex_unlock(&self->mu);
    Py_RETURN_NONE;
}

static PyObject *GroupCommit_completed(GroupCommit *self, PyObject *Py_UNUSED(ignored)) {
    CHECK_INITED(self);
    uint64_t count;
    ssize_t ignored = read(self->efd, &count, sizeof count); /* EAGAIN: nothing new */
    (void)ignored;
    pthread_mutex_lock(&self->mu);
    long long done = self->done, good = self->good;
    int error = self->error;
    int n = self->n_durations;
    double durations[MAX_DURATIONS];
    memcpy(durations, self->durations, (size_t)n * sizeof(double));
    self->n_durations = 0;
    pthread_mutex_unlock(&self->mu);
    release_upto(self, done);
    PyObject *seconds = PyList_New(n);
    if (!seconds)
        return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *f = PyFloat_FromDouble(durations[i]);
        if (!f) {
            Py_DECREF(seconds);
            return NULL;
        }
        PyList_SET_ITEM(seconds, i, f);
    }
    return Py_BuildValue("LLiN", done, good, error, seconds);
}

static PyObject *GroupCommit_reply_after(GroupCommit *self, PyObject *args) {
    int sock_fd, first = 1;
    PyObject *data;
    CHECK_INITED(self);
    if (!PyArg_ParseTuple(args, "iS|p", &sock_fd, &data, &first))
        return NULL;
    Py_INCREF(data);
    pthread_mutex_lock(&self->mu);
    long long token = -2;
    if (self->running && !self->closing && !self->error && self->good < self->submitted)
        token = replies_add(&self->replies, self->submitted, sock_fd, PyBytes_AS_STRING(data),
                            (size_t)PyBytes_GET_SIZE(data), data, first);
    pthread_mutex_unlock(&self->mu);
    if (token >= 0)
        return PyLong_FromLongLong(token);
    Py_DECREF(data);
    if (token == -1)
        return PyErr_NoMemory();
    Py_RETURN_NONE;
}

static PyObject *GroupCommit_cancel_reply(GroupCommit *self, PyObject *arg) {
    CHECK_INITED(self);
    long long token = PyLong_AsLongLong(arg);
    if (token == -1 && PyErr_Occurred())
        return NULL;
    pthread_mutex_lock(&self->mu);
    int cancelled = replies_cancel(&self->replies, token);
    pthread_mutex_unlock(&self->mu);
    return PyBool_FromLong(cancelled);
}

static PyObject *GroupCommit_replies(GroupCommit *self, PyObject *Py_UNUSED(ignored)) {
    CHECK_INITED(self);
    pthread_mutex_lock(&self->mu);
    size_t room = self->replies.n;
    Reply **out = room ? malloc(room * sizeof(Reply *)) : NULL;
    size_t n = out ? replies_pop(&self->replies, out) : 0;
    pthread_mutex_unlock(&self->mu);
    if (room && !out)
        return PyErr_NoMemory();
    PyObject *list = PyList_New(0);
    for (size_t i = 0; i < n; i++) {
        Reply *r = out[i];
        if (list && r->state == REPLY_DONE) {
            PyObject *item = Py_BuildValue("Lni", r->token, (Py_ssize_t)r->sent, r->err);
            if (!item || PyList_Append(list, item) < 0)
                Py_CLEAR(list);
            Py_XDECREF(item);
        }
        Py_XDECREF((PyObject *)r->owner);
        free(r);
    }
    free(out);
    return list;
}

static PyObject *GroupCommit_close(GroupCommit *self, PyObject *Py_UNUSED(ignored)) {
    stop_thread(self);
    Py_RETURN_NONE;
}

static PyObject *GroupCommit_get_eventfd(GroupCommit *self, void *closure) {
    CHECK_INITED(self);
    return PyLong_FromLong(self->efd);
}

static PyObject *GroupCommit_get_fd(GroupCommit *self, void *closure) {
    CHECK_INITED(self);
    pthread_mutex_lock(&self->mu);
    int fd = self->fd;
    pthread_mutex_unlock(&self->mu);
    return PyLong_FromLong(fd);
}

static PyObject *GroupCommit_get_syncs(GroupCommit *self, void *closure) {
    CHECK_INITED(self);
    pthread_mutex_lock(&self->mu);
    unsigned long long syncs = self->syncs;
    pthread_mutex_unlock(&self->mu);
    return PyLong_FromUnsignedLongLong(syncs);
}

static PyMethodDef GroupCommit_methods[] = {
    {"submit", (PyCFunction)GroupCommit_submit, METH_VARARGS,
     "submit(header, payload, new_fd=-1) -> record number; queue one record"},
    {"kick", (PyCFunction)GroupCommit_kick, METH_NOARGS,
     "kick(): let the writer take what is queued"},
    {"completed", (PyCFunction)GroupCommit_completed, METH_NOARGS,
     "completed() -> (done, good, errno, seconds); release finished records"},
    {"reply_after", (PyCFunction)GroupCommit_reply_after, METH_VARARGS,
     "reply_after(sock_fd, data, first=True) -> token | None; send data once what is submitted "
     "is durable"},
    {"cancel_reply", (PyCFunction)GroupCommit_cancel_reply, METH_O,
     "cancel_reply(token) -> bool; True if the reply was still waiting"},
    {"replies", (PyCFunction)GroupCommit_replies, METH_NOARGS,
     "replies() -> [(token, sent, errno)]; the replies finished since the last call"},
    {"close", (PyCFunction)GroupCommit_close, METH_NOARGS,
     "close(): write what is queued and stop the writer thread"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef GroupCommit_getset[] = {
    {"eventfd", (getter)GroupCommit_get_eventfd, NULL, "readable when records finished", NULL},
    {"fd", (getter)GroupCommit_get_fd, NULL, "the segment fd being written", NULL},
    {"syncs", (getter)GroupCommit_get_syncs, NULL, "group commits so far", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject GroupCommitType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ingest.s3stream.wal._groupcommit.GroupCommit",
    .tp_basicsize = sizeof(GroupCommit),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The file WAL's group commit on a writer thread without the GIL.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)GroupCommit_init,
    .tp_dealloc = (destructor)GroupCommit_dealloc,
    .tp_methods = GroupCommit_methods,
    .tp_getset = GroupCommit_getset,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_groupcommit",
    "The file WAL's group commit, on a writer thread that never takes the GIL.", -1, NULL,
};

PyMODINIT_FUNC PyInit__groupcommit(void) {
    if (PyType_Ready(&GroupCommitType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    Py_INCREF(&GroupCommitType);
    if (PyModule_AddObject(m, "GroupCommit", (PyObject *)&GroupCommitType) < 0) {
        Py_DECREF(&GroupCommitType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
