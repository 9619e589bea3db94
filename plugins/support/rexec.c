/* The in-sandbox wrapper and killer of the remote backends (see <sbx/support/rexec.h>). */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <sbx/support/host.h>
#include <sbx/support/random.h>
#include <sbx/support/rexec.h>

/* argv: run TOKEN FLAGS STDIN CWD N ENV... MODE CMD...  |  kill TOKEN
 * FLAGS: letters s (sweep) and r (re-raise), or "-". STDIN: "" (none), "f" (the token's
 * file), "pN" (N bytes of stdin). MODE: "s" then a shell string, or "a" then argv.
 * pg PID sets g to the process group of PID (fails when PID is gone). sweep kills every
 * process carrying the token, and its group unless that is ours, until a pass finds none;
 * grep -z reads environ's NUL-separated entries (busybox grep stops a line at a NUL).
 * The command starts through an inner sh that writes its own pid (the session leader's,
 * setsid not needing to fork there) before it execs, so the wrapper waits for it in the
 * foreground: an asynchronous list would start it with SIGINT and SIGQUIT ignored. The
 * wrapper's own stderr is /dev/null (a shell reports a foreground child's signal death,
 * "Killed", there, and dash writes it while the command's own redirections are in place,
 * so the inner sh makes them); the exec's stderr is kept on fd 3.
 * The command's stdout and stderr are pipes (fd 4 and fd 1 of `cmd`) that a relay each
 * copies to the exec's own; nothing the command starts ever holds the exec's streams. When
 * the command has exited, `cmd` writes the end marker behind its output on both pipes and
 * its status to $R. A relay ignores SIGPIPE: once the backend has hung up, its cat fails
 * with EPIPE and a second cat reads the pipe (still open: it is the relay's stdin) into
 * /dev/null (a cat that reached the end of the pipe exits 0 and needs no second), so a leftover holding the pipe never sees SIGPIPE or EPIPE. The wrapper waits
 * for both relays, which end when the last holder of their pipe has gone. */
static const char script[] =
    "m=$1 t=$2; shift 2\n"
    "f=/tmp/.sbx-exec-$t i=/tmp/.sbx-stdin-$t R=/tmp/.sbx-rc-$t\n"
    "pg() { s=; read -r s 2>/dev/null </proc/$1/stat || return 1; s=${s##*\") \"}; set -- $s; "
    "g=$3; [ -n \"$g\" ]; }\n"
    "G=; pg $$ && G=$g\n"
    "sweep() {\n"
    "  n=0\n"
    "  while [ $n -lt 200 ]; do\n"
    "    l=$(grep -lsxFz \"SBX_EXEC_TOKEN=$t\" /proc/[0-9]*/environ 2>/dev/null)\n"
    "    [ -z \"$l\" ] && return 0\n"
    "    for q in $l; do q=${q#/proc/}; q=${q%/environ}; [ \"$q\" = $$ ] && continue\n"
    "      if pg \"$q\"; then case $g in 0|1|\"$G\") ;; *) kill -9 \"-$g\" 2>/dev/null;; esac; fi\n"
    "      kill -9 \"$q\" 2>/dev/null; done\n"
    "    n=$((n + 1)); sleep 0.02 2>/dev/null\n"
    "  done\n"
    "  return 1\n"
    "}\n"
    "if [ \"$m\" = kill ]; then\n"
    "  p=; read -r p 2>/dev/null <\"$f\"\n"
    "  [ -n \"$p\" ] && grep -qsxFz \"SBX_EXEC_TOKEN=$t\" /proc/$p/environ && kill -9 \"-$p\" "
    "\"$p\" "
    "2>/dev/null\n"
    "  sweep; r=$?; rm -f -- \"$f\" \"$i\"; exit $r\n"
    "fi\n"
    "o=$1 s=$2 d=$3 n=$4; shift 4\n"
    "exec 3>&2 2>/dev/null\n"
    "while [ \"$n\" -gt 0 ]; do export \"$1\" || exit 126; shift; n=$((n - 1)); done\n"
    "if [ -n \"$d\" ]; then b=$(pwd -P); cd -- \"$d\" || { echo \"sbx-exec: no such directory: "
    "$d\" >&3; exit 126; }\n"
    "  case $d:$b in /*|*:/) ;; *) case $(pwd -P) in \"$b\"|\"$b\"/*) ;; *)\n"
    "    echo \"sbx-exec: cwd leads outside the work dir: $d\" >&3; exit 126;; esac;; esac\n"
    "fi\n"
    "if [ \"$1\" = s ]; then\n"
    "  if command -v bash >/dev/null; then set -- bash -c \"$2\"; else set -- sh -c \"$2\"; fi\n"
    "else shift; fi\n"
    "case $s in\n"
    "f) [ -r \"$i\" ] || { echo \"sbx-exec: no stdin file $i\" >&3; exit 126; }; exec <\"$i\"; "
    "rm -f -- \"$i\";;\n"
    "p*) ;;\n"
    "*) exec </dev/null;;\n"
    "esac\n"
    "S=; command -v setsid >/dev/null && S=setsid\n"
    "L='echo $$ >\"$0\"; exec 2>&1 >&4 4>&-; exec \"$@\"'\n"
    "cmd() {\n"
    "  case $s in\n"
    "  p*) SBX_EXEC_TOKEN=$t head -c \"${s#p}\" 4>&- | SBX_EXEC_TOKEN=$t sh -c \"$L\" \"$f\" $S "
    "\"$@\";;\n"
    "  *) SBX_EXEC_TOKEN=$t sh -c \"$L\" \"$f\" $S \"$@\";;\n"
    "  esac\n"
    "  r=$?\n"
    "  case $o in *s*) p=; read -r p 2>/dev/null <\"$f\"; [ -n \"$p\" ] && kill -9 \"-$p\" "
    "2>/dev/null; sweep;; esac\n"
    "  echo $r >\"$R\"\n"
    "  printf '\\001sbx-end:%s:%d\\001' \"$t\" $r >&4\n"
    "  printf '\\001sbx-end:%s:%d\\001' \"$t\" $r\n"
    "}\n"
    "relay() { trap '' PIPE; cat || { exec >/dev/null; exec cat; }; }\n"
    "{ { cmd \"$@\" 3>&- | relay >&3 3>&- 4>&-; } 4>&1 | relay 3>&-; }\n"
    "r=; read -r r 2>/dev/null <\"$R\"; rm -f -- \"$f\" \"$R\"\n"
    "[ -n \"$r\" ] || r=137\n"
    "case $o in *r*) if [ $r -gt 128 ] && [ $r -lt 160 ]; then\n"
    "  case $((r - 128)) in 19|20|21|22) ;; *) kill -$((r - 128)) $$;; esac; fi;; esac\n"
    "exit $r\n";

int sbxs_rexec_token(char token[SBXS_REXEC_TOKEN_SIZE])
{
	return sbxs_random_hex(token, SBXS_REXEC_TOKEN_SIZE, 8);
}

void sbxs_rexec_stdin_path(const char *token, char path[SBXS_REXEC_PATH_SIZE])
{
	snprintf(path, SBXS_REXEC_PATH_SIZE, "/tmp/.sbx-stdin-%s", token);
}

void sbxs_rexec_kill_argv(const char *token, const char *argv[SBXS_REXEC_KILL_ARGC])
{
	argv[0] = "/bin/sh";
	argv[1] = "-c";
	argv[2] = script;
	argv[3] = "sbx-exec";
	argv[4] = "kill";
	argv[5] = token;
	argv[6] = NULL;
}

/* A shell variable name: the wrapper exports it, and `export` refuses anything else. */
static int env_name_ok(const char *k)
{
	if (!k || !((*k >= 'A' && *k <= 'Z') || (*k >= 'a' && *k <= 'z') || *k == '_'))
		return 0;
	for (const char *p = k + 1; *p; p++)
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		      (*p >= '0' && *p <= '9') || *p == '_'))
			return 0;
	return 1;
}

int sbxs_rexec_argv(const sbxs_rexec *x, const char *alias, const char ***argv, size_t *argc,
		    sbx_error *err)
{
	size_t nargv = 0;
	if (x->argv)
		while (x->argv[nargv])
			nargv++;
	/* Exactly one of shell and a non-empty argv: the host checks it before any plugin runs
	 * (core/exec.c). */
	for (uint32_t i = 0; i < x->n_env; i++)
		if (!env_name_ok(x->env[i].key))
			return sbxs_host->set_error(
			    err, SBX_E_INVAL,
			    "%s: exec: environment name '%.64s' is not a shell "
			    "variable name ([A-Za-z_][A-Za-z0-9_]*)",
			    alias, x->env[i].key ? x->env[i].key : "");
	char flags[4] = "-", in[32] = "", nenv[16];
	size_t fl = 0;
	if (x->flags & SBXS_REXEC_SWEEP)
		flags[fl++] = 's';
	if (x->flags & SBXS_REXEC_RERAISE)
		flags[fl++] = 'r';
	if (fl)
		flags[fl] = '\0';
	if (x->stdin_how == SBXS_REXEC_STDIN_FILE)
		snprintf(in, sizeof(in), "f");
	else if (x->stdin_how == SBXS_REXEC_STDIN_PIPE)
		snprintf(in, sizeof(in), "p%zu", x->stdin_len);
	snprintf(nenv, sizeof(nenv), "%u", x->n_env);
	const char *head[] = {"/bin/sh", "-c",  script, "sbx-exec",           "run",
			      x->token,  flags, in,     x->cwd ? x->cwd : "", nenv};
	size_t nhead = SBXS_COUNT(head);
	size_t n = nhead + x->n_env + 1 + (x->shell ? 1 : nargv);
	/* One block: the pointer array, then every string that is not static. */
	size_t bytes = (n + 1) * sizeof(char *);
	for (size_t i = 3; i < nhead; i++)
		bytes += strlen(head[i]) + 1;
	for (uint32_t i = 0; i < x->n_env; i++)
		bytes +=
		    strlen(x->env[i].key) + 1 + strlen(x->env[i].value ? x->env[i].value : "") + 1;
	const char **out = sbxs_host->alloc(bytes);
	if (!out)
		return sbxs_nomem(err, alias, "exec");
	char *s = (char *)(out + n + 1);
	size_t k = 0;
	for (size_t i = 0; i < nhead; i++) {
		if (i < 3) { /* static text */
			out[k++] = head[i];
			continue;
		}
		size_t l = strlen(head[i]) + 1;
		memcpy(s, head[i], l);
		out[k++] = s;
		s += l;
	}
	for (uint32_t i = 0; i < x->n_env; i++) {
		const char *v = x->env[i].value ? x->env[i].value : "";
		size_t kl = strlen(x->env[i].key), vl = strlen(v);
		memcpy(s, x->env[i].key, kl);
		s[kl] = '=';
		memcpy(s + kl + 1, v, vl + 1);
		out[k++] = s;
		s += kl + vl + 2;
	}
	out[k++] = (x->shell ? "s" : "a");
	if (x->shell)
		out[k++] = x->shell;
	for (size_t i = 0; !x->shell && i < nargv; i++)
		out[k++] = x->argv[i];
	out[k] = NULL;
	*argv = out;
	if (argc)
		*argc = k;
	return SBX_OK;
}

void sbxs_rexec_tap_init(sbxs_rexec_tap *t, const char *token, sbx_output_fn output,
			 void *output_ctx)
{
	memset(t, 0, sizeof(*t));
	t->token = token;
	t->output = output;
	t->output_ctx = output_ctx;
}

/* Byte k of the marker's fixed part. */
static char prefix_at(const sbxs_rexec_tap *t, size_t k)
{
	static const char head[] = "\001sbx-end:";
	if (k < sizeof(head) - 1)
		return head[k];
	k -= sizeof(head) - 1;
	return k < SBXS_REXEC_TOKEN_SIZE - 1 ? t->token[k] : ':';
}

static int pass(sbxs_rexec_tap *t, uint32_t stream, const void *data, size_t len)
{
	if (!len || !t->output || t->sink_rc)
		return t->sink_rc;
	int rc = t->output(t->output_ctx, stream, data, len);
	if (rc != SBX_OK)
		t->sink_rc = rc;
	return rc;
}

/* Passes on what was held back as a possible marker and starts matching afresh. */
static int release_held(sbxs_rexec_tap *t, uint32_t stream)
{
	char held[SBXS_REXEC_MARK_PREFIX + sizeof(t->s[0].digits)];
	size_t k = stream - SBX_STREAM_STDOUT, n = 0;
	for (; n < t->s[k].matched; n++)
		held[n] = prefix_at(t, n);
	memcpy(held + n, t->s[k].digits, t->s[k].n_digits);
	n += t->s[k].n_digits;
	t->s[k].matched = t->s[k].n_digits = 0;
	return pass(t, stream, held, n);
}

/* One byte of a marker being matched: 1 taken, 0 not part of a marker, 2 the marker's end. */
static int match_byte(sbxs_rexec_tap *t, size_t k, char c)
{
	if (t->s[k].matched < SBXS_REXEC_MARK_PREFIX) {
		if (c != prefix_at(t, t->s[k].matched))
			return 0;
		t->s[k].matched++;
		return 1;
	}
	if (c >= '0' && c <= '9' && t->s[k].n_digits < 3) {
		t->s[k].digits[t->s[k].n_digits++] = c;
		return 1;
	}
	if (c != '\001' || !t->s[k].n_digits)
		return 0;
	int v = 0;
	for (size_t i = 0; i < t->s[k].n_digits; i++)
		v = v * 10 + (t->s[k].digits[i] - '0');
	t->s[k].status = v;
	return 2;
}

/* Keeps the last bytes of stderr in t->err_tail. */
static void keep_tail(sbxs_rexec_tap *t, const char *d, size_t len)
{
	size_t cap = sizeof(t->err_tail) - 1;
	if (len >= cap) {
		memcpy(t->err_tail, d + len - cap, cap);
		t->err_tail_len = cap;
	} else {
		size_t drop = t->err_tail_len + len > cap ? t->err_tail_len + len - cap : 0;
		memmove(t->err_tail, t->err_tail + drop, t->err_tail_len - drop);
		memcpy(t->err_tail + t->err_tail_len - drop, d, len);
		t->err_tail_len += len - drop;
	}
	t->err_tail[t->err_tail_len] = '\0';
}

int sbxs_rexec_tap_output(void *ctx, uint32_t stream, const void *data, size_t len)
{
	sbxs_rexec_tap *t = ctx;
	if (stream != SBX_STREAM_STDOUT && stream != SBX_STREAM_STDERR)
		return pass(t, stream, data, len);
	if (stream == SBX_STREAM_STDERR && !t->done)
		keep_tail(t, data, len);
	size_t k = stream - SBX_STREAM_STDOUT;
	const char *p = data, *end = p + len, *run = p; /* run: not yet passed on */
	int rc = SBX_OK;
	while (p < end && !t->s[k].ended && rc == SBX_OK) {
		if (!t->s[k].matched) {
			const char *q = memchr(p, '\001', (size_t)(end - p));
			if (!q)
				break;
			rc = pass(t, stream, run, (size_t)(q - run));
			t->s[k].matched = 1;
			run = p = q + 1;
			continue;
		}
		int m = match_byte(t, k, *p);
		if (m ==
		    0) { /* not a marker: what was held goes out, this byte is looked at anew */
			rc = release_held(t, stream);
			run = p;
			continue;
		}
		run = ++p;
		if (m == 2) {
			t->s[k].ended = 1;
			t->s[k].matched = t->s[k].n_digits = 0;
			if (t->s[1 - k].ended) {
				t->done = 1;
				t->status = t->s[0].status;
			}
		}
	}
	if (rc == SBX_OK && !t->s[k].ended && !t->s[k].matched)
		rc = pass(t, stream, run, (size_t)(end - run));
	return rc;
}

int sbxs_rexec_tap_flush(sbxs_rexec_tap *t)
{
	int rc = SBX_OK;
	for (uint32_t k = 0; k < 2 && rc == SBX_OK; k++)
		if (!t->s[k].ended && (t->s[k].matched || t->s[k].n_digits))
			rc = release_held(t, SBX_STREAM_STDOUT + k);
	return rc;
}

int sbxs_rexec_cwd_error(const sbxs_rexec_tap *t, int exit_code, const char *alias, const char *cwd,
			 sbx_error *err)
{
	if (t->done || exit_code != 126 || !cwd || !*cwd)
		return SBX_OK;
	if (strstr(t->err_tail, "sbx-exec: cwd leads outside the work dir: "))
		return sbxs_host->set_error(err, SBX_E_PATH,
					    "%s: exec: cwd '%.300s' leads outside the sandbox work "
					    "dir",
					    alias, cwd);
	if (strstr(t->err_tail, "sbx-exec: no such directory: "))
		return sbxs_host->set_error(err, SBX_E_NO_FILE,
					    "%s: exec: cwd '%.300s' does not exist", alias, cwd);
	return SBX_OK;
}

void sbxs_rexec_outcome(int status, sbx_exec_outcome *out)
{
	int sig = status - 128;
	if (sig >= 1 && sig <= 64 && sig != SIGSTOP && sig != SIGTSTP && sig != SIGTTIN &&
	    sig != SIGTTOU) {
		out->exit_code = -1;
		out->signal = sig;
	} else {
		out->exit_code = status;
		out->signal = 0;
	}
}
