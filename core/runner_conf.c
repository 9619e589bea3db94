/* Which plugins run in a runner process, and where sbx-runner is.
 *
 * A registry entry's `runner` is `process`, `inproc`, or a map of `mode` and the runner's
 * limits (grace, timeout, max_crashes, window). Without a mode, a plugin that ships with sbx
 * (its file is in the folder sbx-runner is in: build/plugins, or <libdir>/sbx/plugins) runs
 * in process, and every other plugin in a runner. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "loader.h"
#include "runner_conf.h"

#ifndef SBX_BUILD_DIR
#define SBX_BUILD_DIR ""
#endif
#ifndef SBX_BUILD_RUNNER
#define SBX_BUILD_RUNNER ""
#endif
#ifndef SBX_INSTALL_RUNNER
#define SBX_INSTALL_RUNNER "/usr/local/lib/sbx/plugins/sbx-runner"
#endif

static const char *const valid_keys = "mode, grace, timeout, max_crashes, window";

static int bad(const sbx__node *n, const char *file, const char *alias, const char *what,
	       sbx_error *err)
{
	return sbx__set_error(err, SBX_E_REGISTRY, "%s:%d: alias '%s': runner: %s", file,
			      n ? n->line : 0, alias, what);
}

static int is_null(const sbx__node *n)
{
	if (!n)
		return 1;
	if (n->kind != SBX__NODE_SCALAR || n->quoted)
		return 0;
	const char *s = n->scalar ? n->scalar : "";
	return !s[0] || strcmp(s, "~") == 0 || strcmp(s, "null") == 0;
}

static int parse_mode(const sbx__node *n, const char *file, const char *alias, int *mode,
		      sbx_error *err)
{
	const char *s = n->kind == SBX__NODE_SCALAR && n->scalar ? n->scalar : "";
	if (strcmp(s, "process") == 0)
		*mode = SBX__RUNNER_PROCESS;
	else if (strcmp(s, "inproc") == 0)
		*mode = SBX__RUNNER_INPROC;
	else
		return sbx__set_error(err, SBX_E_REGISTRY,
				      "%s:%d: alias '%s': runner must be 'process' or 'inproc' "
				      "(or a map of %s), found '%.64s'",
				      file, n->line, alias, valid_keys,
				      n->kind == SBX__NODE_SCALAR ? s : "a list");
	return SBX_OK;
}

/* A number of seconds >= min, as milliseconds. */
static int parse_seconds(const sbx__node *n, const char *file, const char *alias, const char *key,
			 double min, uint64_t *ms, sbx_error *err)
{
	char *end = NULL;
	const char *s = n->kind == SBX__NODE_SCALAR && !n->quoted && n->scalar ? n->scalar : "";
	double d = strtod(s, &end);
	if (!s[0] || *end || !isfinite(d) || d < min || d > 1e9) {
		char what[160];
		snprintf(what, sizeof(what), "'%s' must be a number of seconds%s up to 1e9", key,
			 min > 0 ? " above 0" : "");
		return bad(n, file, alias, what, err);
	}
	*ms = (uint64_t)ceil(d * 1000.0);
	return SBX_OK;
}

static int parse_key(const char *key, const sbx__node *n, const char *file, const char *alias,
		     sbx__runner_opts *o, sbx_error *err)
{
	if (strcmp(key, "mode") == 0)
		return parse_mode(n, file, alias, &o->mode, err);
	if (strcmp(key, "grace") == 0)
		return parse_seconds(n, file, alias, key, 0, &o->grace_ms, err);
	if (strcmp(key, "timeout") == 0)
		return parse_seconds(n, file, alias, key, 0, &o->timeout_ms, err);
	if (strcmp(key, "window") == 0)
		return parse_seconds(n, file, alias, key, 0.001, &o->window_ms, err);
	if (strcmp(key, "max_crashes") == 0) {
		char *end = NULL;
		const char *s = n->kind == SBX__NODE_SCALAR && n->scalar ? n->scalar : "";
		long v = strtol(s, &end, 10);
		if (!s[0] || *end || v < 1 || v > 1000)
			return bad(n, file, alias, "'max_crashes' must be an integer 1..1000", err);
		o->max_crashes = (uint32_t)v;
		return SBX_OK;
	}
	char what[200];
	snprintf(what, sizeof(what), "unknown key '%.64s' (valid keys: %s)", key, valid_keys);
	return bad(n, file, alias, what, err);
}

int sbx__runner_opts_parse(const sbx__node *v, const char *file, const char *alias,
			   sbx__runner_opts *opts, sbx_error *err)
{
	sbx__runner_opts o = {
	    .mode = SBX__RUNNER_DEFAULT,
	    .grace_ms = 30000,
	    .timeout_ms = 0,
	    .max_crashes = 5,
	    .window_ms = 60000,
	};
	int rc = SBX_OK;
	if (is_null(v))
		goto out;
	if (v->kind != SBX__NODE_MAP) {
		rc = parse_mode(v, file, alias, &o.mode, err);
		goto out;
	}
	for (size_t i = 0; i < v->n && rc == SBX_OK; i++)
		rc = is_null(v->items[i])
			 ? SBX_OK
			 : parse_key(v->keys[i], v->items[i], file, alias, &o, err);
out:
	if (rc == SBX_OK)
		*opts = o;
	return rc;
}

/* <library dir>/<SBX_REL_RUNNER>, when that file exists (a relocated install). */
static int relocated(char *buf, size_t cap)
{
#ifdef SBX_REL_RUNNER
	const char *lib = sbx__library_dir();
	int n = lib ? snprintf(buf, cap, "%s/%s", lib, SBX_REL_RUNNER) : -1;
	return n > 0 && (size_t)n < cap && access(buf, X_OK) == 0;
#else
	(void)buf;
	(void)cap;
	return 0;
#endif
}

/* Whether libsbx's code lies in the build tree: libsbx itself, or a program there that links
 * it statically (the tests). */
static int inside_build_tree(void)
{
	char build[PATH_MAX];
	const char *lib = sbx__library_dir();
	if (!lib || !SBX_BUILD_DIR[0] || !realpath(SBX_BUILD_DIR, build))
		return 0;
	size_t n = strlen(build);
	return strncmp(lib, build, n) == 0 && (lib[n] == '/' || lib[n] == '\0');
}

/* The runner this libsbx ships with: the build tree's, a relocated install's or the
 * installed one. */
static int own_runner(char *buf, size_t cap)
{
	const char *path = SBX_INSTALL_RUNNER;
	if (SBX_BUILD_RUNNER[0] && inside_build_tree())
		path = SBX_BUILD_RUNNER;
	else if (relocated(buf, cap))
		return SBX_OK;
	int n = snprintf(buf, cap, "%s", path);
	return n > 0 && (size_t)n < cap ? SBX_OK : SBX_E_NOMEM;
}

int sbx__runner_path(char *buf, size_t cap)
{
	const char *env = getenv("SBX_RUNNER");
	if (!env || !env[0])
		return own_runner(buf, cap);
	int n = snprintf(buf, cap, "%s", env);
	return n > 0 && (size_t)n < cap ? SBX_OK : SBX_E_NOMEM;
}

/* The real folder of path, into buf. */
static int real_folder(const char *path, char *buf)
{
	char real[PATH_MAX];
	if (!realpath(path, real))
		return -1;
	char *slash = strrchr(real, '/');
	if (!slash)
		return -1;
	*slash = '\0';
	memcpy(buf, real, strlen(real) + 1);
	return 0;
}

int sbx__runner_mode(const sbx__reg_entry *ent)
{
	if (ent->runner.mode != SBX__RUNNER_DEFAULT)
		return ent->runner.mode;
	char runner[PATH_MAX], a[PATH_MAX], b[PATH_MAX];
	if (own_runner(runner, sizeof(runner)) == SBX_OK && real_folder(runner, a) == 0 &&
	    real_folder(ent->path, b) == 0 && strcmp(a, b) == 0)
		return SBX__RUNNER_INPROC;
	return SBX__RUNNER_PROCESS;
}
