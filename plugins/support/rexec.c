/* The in-sandbox wrapper and killer of the remote backends (see <sbx/support/rexec.h>). */
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
 * "Killed", there); the command gets the real one back through fd 3. */
static const char script[] =
    "m=$1 t=$2; shift 2\n"
    "f=/tmp/.sbx-exec-$t i=/tmp/.sbx-stdin-$t\n"
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
    "if [ -n \"$d\" ]; then cd -- \"$d\" || { echo \"sbx-exec: no such directory: $d\" >&3; "
    "exit 126; }; fi\n"
    "if [ \"$1\" = s ]; then\n"
    "  if command -v bash >/dev/null; then set -- bash -c \"$2\"; else set -- sh -c \"$2\"; fi\n"
    "else shift; fi\n"
    "S=; command -v setsid >/dev/null && S=setsid\n"
    "L='echo $$ >\"$0\"; exec 2>&3 3>&-; exec \"$@\"'\n"
    "case $s in\n"
    "f) [ -r \"$i\" ] || { echo \"sbx-exec: no stdin file $i\" >&3; exit 126; }; exec <\"$i\"; "
    "rm -f -- \"$i\"\n"
    "  SBX_EXEC_TOKEN=$t sh -c \"$L\" \"$f\" $S \"$@\";;\n"
    "p*) SBX_EXEC_TOKEN=$t head -c \"${s#p}\" 3>&- | SBX_EXEC_TOKEN=$t sh -c \"$L\" \"$f\" $S "
    "\"$@\";;\n"
    "*) SBX_EXEC_TOKEN=$t sh -c \"$L\" \"$f\" $S \"$@\" </dev/null;;\n"
    "esac\n"
    "r=$?\n"
    "case $o in *s*) p=; read -r p 2>/dev/null <\"$f\"; [ -n \"$p\" ] && kill -9 \"-$p\" "
    "2>/dev/null; sweep;; esac\n"
    "rm -f -- \"$f\"\n"
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
