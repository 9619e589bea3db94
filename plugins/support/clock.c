/* Monotonic and wall clocks, sleeps, and the two time-stamp formats backends send. */
#include <errno.h>
#include <string.h>
#include <time.h>

#include <sbx/support/clock.h>
#include <sbx/types.h>

int64_t sbxs_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t sbxs_now_ms(void)
{
	return sbxs_now_us() / 1000;
}

void sbxs_sleep_us(int64_t us)
{
	if (us <= 0)
		return;
	struct timespec ts = {.tv_sec = (time_t)(us / 1000000),
			      .tv_nsec = (long)(us % 1000000) * 1000};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

void sbxs_sleep_ms(int64_t ms)
{
	sbxs_sleep_us(ms * 1000);
}

int64_t sbxs_wall_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec;
}

/* Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar (Howard Hinnant's
 * days_from_civil), so no time zone or libc table is involved. */
static int64_t days_from_civil(int64_t y, int m, int d)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	int64_t yoe = y - era * 400;
	int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

static int days_in_month(int64_t y, int m)
{
	static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
	return m == 2 && leap ? 29 : days[m - 1];
}

/* Reads exactly n decimal digits at *s. */
static int digits(const char **s, int n, int *out)
{
	int v = 0;
	for (int i = 0; i < n; i++) {
		char c = (*s)[i];
		if (c < '0' || c > '9')
			return 0;
		v = v * 10 + (c - '0');
	}
	*s += n;
	*out = v;
	return 1;
}

static int lit(const char **s, char c)
{
	if (**s != c)
		return 0;
	(*s)++;
	return 1;
}

static int64_t seconds_of(int y, int mo, int d, int h, int mi, int sec)
{
	return days_from_civil(y, mo, d) * 86400 + (int64_t)h * 3600 + mi * 60 + sec;
}

int sbxs_rfc3339(const char *s, int64_t *sec, int32_t *nsec)
{
	int y, mo, d, h, mi, se, oh = 0, om = 0, sign = 0;
	int32_t frac = 0;
	if (!s || !digits(&s, 4, &y) || !lit(&s, '-') || !digits(&s, 2, &mo) || !lit(&s, '-') ||
	    !digits(&s, 2, &d))
		return SBX_E_INVAL;
	if (*s != 'T' && *s != 't' && *s != ' ')
		return SBX_E_INVAL;
	s++;
	if (!digits(&s, 2, &h) || !lit(&s, ':') || !digits(&s, 2, &mi) || !lit(&s, ':') ||
	    !digits(&s, 2, &se))
		return SBX_E_INVAL;
	if (*s == '.') {
		s++;
		int n = 0;
		for (; *s >= '0' && *s <= '9'; s++, n++)
			if (n < 9)
				frac = frac * 10 + (*s - '0');
		if (n == 0)
			return SBX_E_INVAL;
		for (; n < 9; n++)
			frac *= 10;
	}
	if (*s == 'Z' || *s == 'z') {
		s++;
	} else if (*s == '+' || *s == '-') {
		sign = *s == '+' ? 1 : -1;
		s++;
		if (!digits(&s, 2, &oh) || !lit(&s, ':') || !digits(&s, 2, &om) || oh > 23 ||
		    om > 59)
			return SBX_E_INVAL;
	} else {
		return SBX_E_INVAL;
	}
	if (*s || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 ||
	    se > 60)
		return SBX_E_INVAL;
	/* A leap second reads as the first second of the next minute. The offset says how far
	 * local time runs ahead of UTC. */
	*sec = seconds_of(y, mo, d, h, mi, se) - sign * (oh * 3600 + om * 60);
	if (nsec)
		*nsec = frac;
	return SBX_OK;
}

int sbxs_http_date(const char *s, int64_t *sec)
{
	static const char *const wdays[] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
	static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
					     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
	int d, y, h, mi, se, mo = 0, wd_ok = 0;
	if (!s || strlen(s) != 29)
		return SBX_E_INVAL;
	for (int i = 0; i < 7; i++)
		wd_ok |= strncmp(s, wdays[i], 3) == 0;
	s += 3;
	if (!wd_ok || !lit(&s, ',') || !lit(&s, ' ') || !digits(&s, 2, &d) || !lit(&s, ' '))
		return SBX_E_INVAL;
	for (int i = 0; i < 12 && !mo; i++)
		if (strncmp(s, months[i], 3) == 0)
			mo = i + 1;
	s += 3;
	if (!mo || !lit(&s, ' ') || !digits(&s, 4, &y) || !lit(&s, ' ') || !digits(&s, 2, &h) ||
	    !lit(&s, ':') || !digits(&s, 2, &mi) || !lit(&s, ':') || !digits(&s, 2, &se) ||
	    strcmp(s, " GMT") != 0)
		return SBX_E_INVAL;
	if (d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || se > 60)
		return SBX_E_INVAL;
	*sec = seconds_of(y, mo, d, h, mi, se);
	return SBX_OK;
}
