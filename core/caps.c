/* Caps across processes (caps.h): the waiting and the messages; the counting is ledger.c's. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "caps.h"

/* The longest sleep between two looks while another process holds the places. */
#define MAX_BACKOFF_MS 200
#define MIN_BACKOFF_MS 5

static int64_t clock_ms(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A number in [0, n] from a per-thread xorshift seeded by time, pid and the stack's place:
 * waiters that started together must not look again together. */
static int64_t jitter(int64_t n)
{
	static _Thread_local uint64_t x;
	if (x == 0) {
		int local;
		x = (uint64_t)clock_ms(CLOCK_MONOTONIC) ^ ((uint64_t)getpid() << 32) ^
		    (uint64_t)(uintptr_t)&local;
		x |= 1;
	}
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return n > 0 ? (int64_t)(x % (uint64_t)(n + 1)) : 0;
}

sbx__ledger_caps sbx__caps_of(const sbx__policy *p)
{
	sbx__ledger_caps c = {.max_live = p->max_concurrency,
			      .max_starting = p->max_starting,
			      .rate = p->create_rate,
			      .burst = p->create_burst ? (double)p->create_burst : 1.0};
	return c;
}

static int refused(sbx_error *err, const sbx__ledger_row *row, const sbx__ledger_caps *c,
		   const sbx__ledger_admission *a, int64_t waited_ms)
{
	char waited[48] = "";
	if (waited_ms >= 0) /* -1: the caller did not ask to wait */
		snprintf(waited, sizeof(waited), " (waited %.2f s)", (double)waited_ms / 1000.0);
	if (a->cap == SBX__CAP_LIVE)
		return sbx__set_error(err, SBX_E_LIMIT,
				      "create: data source '%s' has %llu live sandboxes, its "
				      "max_concurrency; destroy one first%s",
				      row->data_source, (unsigned long long)(a->live + a->starting),
				      waited);
	if (a->cap == SBX__CAP_STARTING)
		return sbx__set_error(err, SBX_E_LIMIT,
				      "create: data source '%s' has %llu creates in flight, its "
				      "max_starting; try again when one has finished%s",
				      row->data_source, (unsigned long long)a->starting, waited);
	return sbx__set_error(err, SBX_E_LIMIT,
			      "create: data source '%s' is at its create_rate (%g per second, "
			      "burst %g); the next create can start in %.2f s%s",
			      row->data_source, c->rate, c->burst, (double)a->retry_ms / 1000.0,
			      waited);
}

int sbx__caps_admit(sbx__ledger *led, const sbx__policy *p, const sbx__ledger_row *row, double wait,
		    sbx_error *err)
{
	sbx__ledger_caps caps = sbx__caps_of(p);
	int64_t start = clock_ms(CLOCK_MONOTONIC);
	/* NaN and negative waits are no wait; a wait past a year is a year. */
	double w = wait > 0 ? (wait < 31536000.0 ? wait : 31536000.0) : 0;
	int64_t deadline = start + (int64_t)ceil(w * 1000.0);
	int64_t backoff = MIN_BACKOFF_MS;
	for (;;) {
		uint64_t seen = sbx__ledger_generation(led);
		sbx__ledger_admission a;
		int rc = sbx__ledger_admit(led, row, &caps, row->actor_host,
					   clock_ms(CLOCK_REALTIME), &a, err);
		if (rc != SBX_OK || a.admitted)
			return rc;
		int64_t t = clock_ms(CLOCK_MONOTONIC);
		if (t >= deadline)
			return refused(err, row, &caps, &a, w > 0 ? t - start : -1);
		int64_t nap;
		if (a.cap == SBX__CAP_RATE) {
			/* Nothing but time refills the bucket. */
			nap = a.retry_ms + jitter(a.retry_ms / 2 + 1);
		} else {
			nap = backoff / 2 + jitter(backoff / 2);
			backoff = backoff * 2 > MAX_BACKOFF_MS ? MAX_BACKOFF_MS : backoff * 2;
		}
		int64_t until = t + nap < deadline ? t + nap : deadline;
		if (a.cap == SBX__CAP_RATE) {
			int64_t ms = until - t;
			struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
			nanosleep(&ts, NULL);
		} else {
			sbx__ledger_wait(led, seen, until);
		}
	}
}
