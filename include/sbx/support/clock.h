/* sbx-support: clocks, sleeps and time stamps.
 *
 * Durations and deadlines use the monotonic clock (sbxs_now_us); only values that leave the
 * process (labels, file times) use the wall clock. Thread-safe, no allocation. */
#ifndef SBX_SUPPORT_CLOCK_H
#define SBX_SUPPORT_CLOCK_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Monotonic time in microseconds and milliseconds (CLOCK_MONOTONIC). */
int64_t sbxs_now_us(void);
int64_t sbxs_now_ms(void);

/* Sleeps the whole duration, resuming after a signal. Zero or negative returns at once. */
void sbxs_sleep_us(int64_t us);
void sbxs_sleep_ms(int64_t ms);

/* Seconds since the epoch (CLOCK_REALTIME). */
int64_t sbxs_wall_s(void);

/* Parses an RFC 3339 date-time ("2024-05-01T10:00:00.5+02:00", "...Z"; 't', 'z' and a space
 * for 'T' accepted, fraction of any length) into seconds since the epoch, the offset applied,
 * and *nsec (may be NULL) the fraction in nanoseconds. SBX_OK, or SBX_E_INVAL for anything
 * else: a missing or out-of-range field, trailing bytes. */
int sbxs_rfc3339(const char *s, int64_t *sec, int32_t *nsec);

/* Parses an HTTP-date in IMF-fixdate form ("Sun, 06 Nov 1994 08:49:37 GMT", RFC 9110), as
 * Retry-After may carry one. SBX_OK or SBX_E_INVAL. */
int sbxs_http_date(const char *s, int64_t *sec);

#ifdef __cplusplus
}
#endif
#endif
