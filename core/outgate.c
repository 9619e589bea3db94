/* Output gates: the output callback a plugin gets for one execute, safe to call late.
 *
 * The context a plugin receives is not a pointer but a token (a table index and that
 * slot's generation). A callback looks its token up under a lock and forwards to the
 * call's real sink only while the gate is open; closing the gate waits for a callback in
 * progress, so once execute has returned and the gate is closed no byte reaches the sink,
 * and a token kept by a plugin thread can never name freed memory. Late and foreign calls
 * return SBX_E_CANCELLED and are logged once per gate. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define INDEX_BITS 20u
#define INDEX_MASK ((uintptr_t)((1u << INDEX_BITS) - 1u))

struct sbx__outgate {
	pthread_mutex_t lock; /* serialises the callbacks of one call */
	uintptr_t token;
	sbx_output_fn fn;
	void *ctx;
	int closed;     /* under lock: the sink is gone */
	unsigned refs;  /* under table_lock: callbacks holding the gate */
	int close_done; /* under table_lock: the closer has let go */
};

typedef struct gate_slot {
	sbx__outgate *gate;
	uintptr_t gen;
	int late_logged; /* for the gate that last held the slot */
	char alias[64];
} gate_slot;

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static gate_slot *slots;
static size_t n_slots;

void sbx__outgate_fork_child(void)
{
	/* The gates of calls in progress are the parent's threads' and stay open here; the
	 * child's own hosts make new ones. */
	pthread_mutex_init(&table_lock, NULL);
}

static void gate_free(sbx__outgate *g)
{
	pthread_mutex_destroy(&g->lock);
	sbx__free(g);
}

/* Says once per gate that a plugin called back after its execute returned. */
static void note_late(uintptr_t token)
{
	size_t idx = (size_t)(token & INDEX_MASK);
	char alias[64] = "";
	int first = 0;
	pthread_mutex_lock(&table_lock);
	if (idx < n_slots && !slots[idx].late_logged) {
		slots[idx].late_logged = 1;
		memcpy(alias, slots[idx].alias, sizeof(alias));
		first = 1;
	}
	pthread_mutex_unlock(&table_lock);
	if (first)
		sbx__log(SBX_LOG_WARN, alias[0] ? alias : "plugin",
			 "output callback called after execute returned (or with a context that is "
			 "not the call's); ignored");
}

int sbx__outgate_output(void *ctx, uint32_t stream, const void *data, size_t len)
{
	uintptr_t token = (uintptr_t)ctx;
	size_t idx = (size_t)(token & INDEX_MASK);
	sbx__outgate *g = NULL;
	pthread_mutex_lock(&table_lock);
	if (idx < n_slots && slots[idx].gate && slots[idx].gate->token == token) {
		g = slots[idx].gate;
		g->refs++;
	}
	pthread_mutex_unlock(&table_lock);
	if (!g) {
		note_late(token);
		return SBX_E_CANCELLED;
	}
	int rc;
	pthread_mutex_lock(&g->lock);
	if (g->closed)
		rc = SBX_E_CANCELLED;
	else if ((stream != SBX_STREAM_STDOUT && stream != SBX_STREAM_STDERR) ||
		 (data == NULL && len > 0))
		rc = SBX_E_INVAL;
	else
		rc = g->fn(g->ctx, stream, data, len);
	pthread_mutex_unlock(&g->lock);
	pthread_mutex_lock(&table_lock);
	g->refs--;
	int last = g->refs == 0 && g->close_done;
	pthread_mutex_unlock(&table_lock);
	if (last)
		gate_free(g);
	if (rc == SBX_E_CANCELLED)
		note_late(token);
	return rc;
}

int sbx__outgate_open(sbx_output_fn fn, void *ctx, const char *alias, sbx__outgate **out)
{
	*out = NULL;
	sbx__outgate *g = sbx__calloc(1, sizeof(*g));
	if (!g)
		return SBX_E_NOMEM;
	if (pthread_mutex_init(&g->lock, NULL) != 0) {
		sbx__free(g);
		return SBX_E_NOMEM;
	}
	g->fn = fn;
	g->ctx = ctx;
	int rc = SBX_OK;
	pthread_mutex_lock(&table_lock);
	size_t idx = 0;
	while (idx < n_slots && slots[idx].gate)
		idx++;
	if (idx == n_slots) {
		/* The table is the process's, not a host's: it outlives every sbx_host and the
		 * allocator a test installs, so it comes from libc. */
		gate_slot *v = idx <= INDEX_MASK ? realloc(slots, (idx + 1) * sizeof(*v)) : NULL;
		if (!v) {
			rc = SBX_E_NOMEM;
			goto out;
		}
		slots = v;
		memset(&slots[idx], 0, sizeof(slots[idx]));
		n_slots++;
	}
	gate_slot *s = &slots[idx];
	s->gen++;
	s->late_logged = 0;
	snprintf(s->alias, sizeof(s->alias), "%s", alias ? alias : "");
	g->token = (s->gen << INDEX_BITS) | (uintptr_t)idx;
	s->gate = g;
	*out = g;
out:
	pthread_mutex_unlock(&table_lock);
	if (rc != SBX_OK)
		gate_free(g);
	return rc;
}

void *sbx__outgate_ctx(const sbx__outgate *g)
{
	return (void *)g->token;
}

void sbx__outgate_close(sbx__outgate *g)
{
	if (!g)
		return;
	size_t idx = (size_t)(g->token & INDEX_MASK);
	pthread_mutex_lock(&table_lock);
	if (idx < n_slots && slots[idx].gate == g)
		slots[idx].gate = NULL;
	pthread_mutex_unlock(&table_lock);
	/* Waits for a callback inside the sink; later ones see closed. */
	pthread_mutex_lock(&g->lock);
	g->closed = 1;
	pthread_mutex_unlock(&g->lock);
	pthread_mutex_lock(&table_lock);
	g->close_done = 1;
	int last = g->refs == 0;
	pthread_mutex_unlock(&table_lock);
	if (last)
		gate_free(g);
}
