/* A create's place under its data source's caps (max_concurrency, max_starting, create_rate
 * with create_burst), held across every process that shares the state dir: the create's
 * ledger row is inserted only by the transaction that counted the data source's rows and
 * took from its rate bucket (ledger.c), so two processes cannot both take the last place. */
#ifndef SBX_CAPS_H
#define SBX_CAPS_H

#include "internal.h"
#include "ledger.h"

/* The ledger caps a policy asks for. */
sbx__ledger_caps sbx__caps_of(const sbx__policy *p);

/* Inserts `row` (state creating) once every cap of `p` has room for it. `wait` is how long
 * the caller may wait, in seconds: 0 refuses at once. A wait sleeps (never spins) until the
 * rate bucket refills, or until this process records a delete or a finished create, or a
 * growing, jittered interval (at most 200 ms) passes for other processes' to show, and always
 * ends by the deadline. row->actor_host names this host (whose pids can be checked).
 * SBX_E_LIMIT names the cap that is full, the count or the time to the next token, and how
 * long the caller waited; ledger errors pass through. Thread-safe. */
int sbx__caps_admit(sbx__ledger *led, const sbx__policy *p, const sbx__ledger_row *row, double wait,
		    sbx_error *err);

#endif
