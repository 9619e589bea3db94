/* fork(): a host belongs to the process that made it.
 *
 * A harness forks (Python's multiprocessing does by default on Linux) while other threads may
 * be inside libsbx or a plugin. The child is a copy of one thread: locks another thread held
 * stay locked in it, the ledger's SQLite connection is shared with the parent in ways SQLite
 * cannot survive, and a host's runner links and worker threads are the parent's. So:
 * - the ledger makes sure no thread is inside SQLite at the fork, and the child closes every
 *   inherited connection (ledger.c);
 * - the child resets this library's process-wide locks and tables, and every plugin resets
 *   its own the same way (the local plugin's spawn lock, for one);
 * - a host or queue made before the fork refuses every call in the child with SBX_E_INVAL,
 *   and freeing it there frees nothing that is the parent's (host.c, queue.c). The child
 *   makes a host of its own, which opens its own ledger connection and plugin states; the
 *   Python binding does that by itself.
 * A fork by posix_spawn or vfork (subprocess, sbx's own exec path) runs none of this. */
#include <pthread.h>
#include <stdatomic.h>

#include "host_internal.h"
#include "ledger.h"

static atomic_uint generation;

static void prepare(void)
{
	sbx__ledger_fork_prepare();
}

static void parent(void)
{
	sbx__ledger_fork_parent();
}

static void child(void)
{
	atomic_fetch_add_explicit(&generation, 1, memory_order_relaxed);
	sbx__ledger_fork_child();
	sbx__host_api_fork_child();
	sbx__loader_fork_child();
	sbx__outgate_fork_child();
	sbx__proxy_fork_child();
}

__attribute__((constructor)) static void watch_forks(void)
{
	pthread_atfork(prepare, parent, child);
}

unsigned sbx__fork_generation(void)
{
	return atomic_load_explicit(&generation, memory_order_relaxed);
}

int sbx__host_forked(const sbx_host *h, sbx_error *err)
{
	if (h->fork_generation == sbx__fork_generation())
		return SBX_OK;
	return sbx__set_error(err, SBX_E_INVAL,
			      "host: made by process %ld, and this process is a fork of it: a "
			      "host cannot cross a fork (its ledger connection, locks and "
			      "plugin states are the parent's); make a new one after the fork",
			      (long)h->pid);
}
