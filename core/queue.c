/* The completion queue (host.h, ABI 1.2): blocking calls on threads of the queue's own, and
 * an eventfd that says when finished ones wait to be taken.
 *
 * One lock guards both lists. A worker sleeps on `work` while nothing is pending; a submit
 * wakes one not yet signalled and starts a new thread only when there is none and fewer than
 * `max` run, so a queue that never has more than four calls in flight never has more than
 * four threads. The eventfd is written when the done list turns non-empty, and again by a
 * take that leaves completions behind, so a loop that drains in several takes keeps being
 * woken; a wake that finds the list already drained takes nothing. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "internal.h"

/* sbx_call and sbx_completion as ABI 1.2 first defined them: what a caller must pass. */
#define CALL_SIZE_1_2 (offsetof(sbx_call, reserved1) + sizeof(uint32_t))
#define DONE_SIZE_1_2 (offsetof(sbx_completion, len) + sizeof(size_t))

typedef struct job {
	struct job *next;
	sbx_call call;
	sbx_completion done;
} job;

struct sbx_queue {
	sbx_host *host;
	int fd;
	pthread_mutex_t lock;
	pthread_cond_t work;
	job *pending, **pending_tail;
	job *done, **done_tail;
	uint32_t max, started;
	uint32_t idle;  /* workers waiting on `work` */
	uint32_t woken; /* of those, how many a submit has signalled and not yet run */
	int stopping;
	pthread_t *threads;
	unsigned fork_generation; /* sbx__fork_generation() when made: its workers are there */
};

/* SBX_OK, or SBX_E_INVAL when this process is a fork of the one that made q: its workers
 * and the calls they run are the parent's. */
static int forked(const sbx_queue *q, sbx_error *err)
{
	if (q->fork_generation == sbx__fork_generation())
		return SBX_OK;
	return sbx__set_error(err, SBX_E_INVAL,
			      "queue: made before a fork, and its workers stayed in the parent; "
			      "make a host and a queue after the fork");
}

static void wake(sbx_queue *q)
{
	uint64_t one = 1;
	/* EAGAIN: the counter is full, so the descriptor is readable anyway. */
	while (write(q->fd, &one, sizeof(one)) < 0 && errno == EINTR)
		;
}

static void run(sbx_queue *q, job *j)
{
	const sbx_call *c = &j->call;
	sbx_completion *d = &j->done;
	switch (c->op) {
	case SBX_CALL_CREATE:
		d->status = sbx_create(q->host, c->create, d->id, &d->err);
		break;
	case SBX_CALL_EXEC:
		d->status = sbx_exec(q->host, c->id, c->exec, &d->exec, &d->err);
		break;
	case SBX_CALL_DESTROY:
		d->status = sbx_destroy(q->host, c->id, &d->err);
		break;
	case SBX_CALL_READ_FILE:
		d->status = sbx_read_file(q->host, c->id, c->path, &d->data, &d->len, &d->err);
		break;
	default: /* SBX_CALL_WRITE_FILE: submit let no other op through */
		d->status =
		    sbx_write_file(q->host, c->id, c->path, c->data, c->len, c->mode, &d->err);
		break;
	}
}

static void *worker(void *arg)
{
	sbx_queue *q = arg;
	pthread_setname_np(pthread_self(), "sbx-queue");
	pthread_mutex_lock(&q->lock);
	for (;;) {
		while (!q->pending && !q->stopping) {
			q->idle++;
			pthread_cond_wait(&q->work, &q->lock);
			q->idle--;
			if (q->woken)
				q->woken--;
		}
		job *j = q->pending;
		if (!j)
			break; /* stopping, and nothing left to run */
		q->pending = j->next;
		if (!q->pending)
			q->pending_tail = &q->pending;
		pthread_mutex_unlock(&q->lock);
		run(q, j);
		pthread_mutex_lock(&q->lock);
		j->next = NULL;
		int was_empty = q->done == NULL;
		*q->done_tail = j;
		q->done_tail = &j->next;
		if (was_empty) { /* outside the lock: a woken taker must not wait for it */
			pthread_mutex_unlock(&q->lock);
			wake(q);
			pthread_mutex_lock(&q->lock);
		}
	}
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

/* A worker starts with every signal blocked, so the caller's handlers keep running on the
 * caller's threads (a SIGINT meant for a Python harness must not land on one of ours). */
static int start_worker(sbx_queue *q)
{
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&q->threads[q->started], NULL, worker, q);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

int sbx_queue_new(sbx_host *host, uint32_t workers, sbx_queue **out, sbx_error *err)
{
	if (out)
		*out = NULL;
	if (!host || !out)
		return sbx__set_error(err, SBX_E_INVAL, "queue: host and out are required");
	if (workers < 1 || workers > 1024)
		return sbx__set_error(err, SBX_E_INVAL,
				      "queue: workers must be 1 to 1024, not %" PRIu32, workers);
	sbx_queue *q = sbx__calloc(1, sizeof(*q));
	pthread_t *threads = sbx__calloc(workers, sizeof(*threads));
	int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!q || !threads || fd < 0) {
		int e = errno;
		sbx__free(q);
		sbx__free(threads);
		if (fd >= 0)
			close(fd);
		return fd < 0 ? sbx__set_error(err, SBX_E_IO, "queue: eventfd: %s", strerror(e))
			      : sbx__set_error(err, SBX_E_NOMEM, "queue: out of memory");
	}
	q->host = host;
	q->fd = fd;
	q->fork_generation = sbx__fork_generation();
	q->max = workers;
	q->threads = threads;
	q->pending_tail = &q->pending;
	q->done_tail = &q->done;
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->work, NULL);
	*out = q;
	return SBX_OK;
}

int sbx_queue_fd(const sbx_queue *q)
{
	return q ? q->fd : -1;
}

static int call_ok(const sbx_call *c, sbx_error *err)
{
	switch (c->op) {
	case SBX_CALL_CREATE:
		return SBX_OK;
	case SBX_CALL_EXEC:
		if (!c->exec)
			return sbx__set_error(err, SBX_E_INVAL, "queue: an exec call needs exec");
		break;
	case SBX_CALL_DESTROY:
		break;
	case SBX_CALL_READ_FILE:
	case SBX_CALL_WRITE_FILE:
		if (!c->path)
			return sbx__set_error(err, SBX_E_INVAL, "queue: a file call needs a path");
		break;
	default:
		return sbx__set_error(err, SBX_E_INVAL, "queue: unknown op %" PRIu32, c->op);
	}
	if (!c->id)
		return sbx__set_error(err, SBX_E_INVAL, "queue: op %" PRIu32 " needs a sandbox id",
				      c->op);
	return SBX_OK;
}

int sbx_queue_submit(sbx_queue *q, const sbx_call *call, sbx_error *err)
{
	if (!q || !call)
		return sbx__set_error(err, SBX_E_INVAL, "queue: queue and call are required");
	if (forked(q, err) != SBX_OK)
		return SBX_E_INVAL;
	job *j = sbx__calloc(1, sizeof(*j));
	if (!j)
		return sbx__set_error(err, SBX_E_NOMEM, "queue: out of memory");
	/* Read zero-extended, as every struct a caller passes in (structs.c). */
	int rc =
	    sbx__struct_in(call, &j->call, sizeof(j->call), CALL_SIZE_1_2, "queue: sbx_call", err);
	if (rc == SBX_OK)
		rc = call_ok(&j->call, err);
	if (rc != SBX_OK) {
		sbx__free(j);
		return rc;
	}
	SBX_INIT_HEADER(j->done);
	j->done.op = j->call.op;
	j->done.tag = j->call.tag;
	pthread_mutex_lock(&q->lock);
	if (q->stopping) {
		pthread_mutex_unlock(&q->lock);
		sbx__free(j);
		return sbx__set_error(err, SBX_E_INVAL, "queue: it is being freed");
	}
	*q->pending_tail = j;
	q->pending_tail = &j->next;
	/* A waiting worker already signalled for an earlier call is not free for this one: in a
	 * burst of submits, counting it would leave every call to one worker. */
	int signal = q->idle > q->woken;
	if (signal) {
		q->woken++;
	} else if (q->started < q->max) {
		if (start_worker(q) == 0)
			q->started++;
		else if (q->started == 0) {
			/* No thread to run it: take the call back rather than strand it. */
			q->pending = NULL;
			q->pending_tail = &q->pending;
			pthread_mutex_unlock(&q->lock);
			sbx__free(j);
			return sbx__set_error(err, SBX_E_NOMEM, "queue: cannot start a worker");
		}
		/* Else the running workers get to it. */
	}
	pthread_mutex_unlock(&q->lock);
	/* Signalled after the unlock, so the woken worker does not block on the lock at once. */
	if (signal)
		pthread_cond_signal(&q->work);
	return SBX_OK;
}

int sbx_queue_take(sbx_queue *q, sbx_completion *out, size_t max, size_t *n, sbx_error *err)
{
	if (n)
		*n = 0;
	if (!q || !n || (max && !out))
		return sbx__set_error(err, SBX_E_INVAL, "queue: queue, out and n are required");
	if (forked(q, err) != SBX_OK)
		return SBX_E_INVAL;
	if (!max)
		return SBX_OK;
	size_t stride = out->struct_size;
	if (stride < DONE_SIZE_1_2)
		return sbx__set_error(
		    err, SBX_E_INVAL,
		    "queue: sbx_completion struct has size %zu, expected at least "
		    "%zu (use SBX_INIT_HEADER)",
		    stride, (size_t)DONE_SIZE_1_2);
	uint64_t count;
	while (read(q->fd, &count, sizeof(count)) < 0 && errno == EINTR)
		;
	pthread_mutex_lock(&q->lock);
	job *taken = q->done, **last = &q->done;
	size_t k = 0;
	while (*last && k < max) {
		last = &(*last)->next;
		k++;
	}
	q->done = *last;
	*last = NULL;
	int more = q->done != NULL;
	if (!more)
		q->done_tail = &q->done;
	pthread_mutex_unlock(&q->lock);
	if (more)
		wake(q);
	for (size_t i = 0; taken; i++) {
		job *next = taken->next;
		sbx_completion *slot = (sbx_completion *)((char *)out + i * stride);
		slot->struct_size = (uint32_t)stride;
		sbx__struct_out(slot, &taken->done, sizeof(taken->done));
		if (stride > sizeof(taken->done)) /* a newer caller's members: none set */
			memset((char *)slot + sizeof(taken->done), 0, stride - sizeof(taken->done));
		sbx__free(taken);
		taken = next;
	}
	*n = k;
	return SBX_OK;
}

static void drop(job *j)
{
	while (j) {
		job *next = j->next;
		sbx_exec_result_free(j->done.exec);
		sbx__free(j->done.data);
		sbx__free(j);
		j = next;
	}
}

void sbx_queue_free(sbx_queue *q)
{
	if (!q)
		return;
	if (forked(q, NULL) != SBX_OK)
		return; /* its workers are not in this process: nothing to join, nothing to free */
	pthread_mutex_lock(&q->lock);
	q->stopping = 1;
	pthread_cond_broadcast(&q->work);
	uint32_t started = q->started;
	pthread_mutex_unlock(&q->lock);
	for (uint32_t i = 0; i < started; i++)
		pthread_join(q->threads[i], NULL);
	drop(q->pending); /* only when no worker ever started */
	drop(q->done);
	pthread_cond_destroy(&q->work);
	pthread_mutex_destroy(&q->lock);
	close(q->fd);
	sbx__free(q->threads);
	sbx__free(q);
}
