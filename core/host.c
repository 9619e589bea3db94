/* The host object: sbx_host_new (options, registry, config, the state dir, this process's
 * identity for the ledger) and sbx_host_free; the data sources of its config. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "host_internal.h"

static int resolve_state_dir(const sbx_host_options *opts, char **out, sbx_error *err)
{
	const char *v;
	char *dir = NULL;
	if (opts && opts->state_dir)
		dir = sbx__strdup(opts->state_dir);
	else if ((v = getenv("SBX_STATE_DIR")) && *v)
		dir = sbx__strdup(v);
	else if ((v = getenv("XDG_STATE_HOME")) && *v)
		dir = sbx__asprintf("%s/sbx", v);
	else if ((v = getenv("HOME")) && *v)
		dir = sbx__asprintf("%s/.local/state/sbx", v);
	else
		return sbx__set_error(err, SBX_E_IO,
				      "host: no state directory: set SBX_STATE_DIR, "
				      "XDG_STATE_HOME or HOME");
	if (!dir)
		return sbx__nomem(err, "host");
	int e = sbx__mkdirs(dir);
	struct stat st;
	if (!e && (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)))
		e = ENOTDIR;
	/* A relative one is the working directory's now: the harness may change directory. */
	char real[PATH_MAX];
	if (!e && dir[0] != '/') {
		if (!realpath(dir, real)) {
			e = errno;
		} else {
			sbx__free(dir);
			if (!(dir = sbx__strdup(real)))
				return sbx__nomem(err, "host");
		}
	}
	if (e) {
		sbx__set_error(err, SBX_E_IO, "host: cannot create state directory %s: %s", dir,
			       strerror(e));
		sbx__free(dir);
		return SBX_E_IO;
	}
	*out = dir;
	return SBX_OK;
}

/* The caller's options, zero-extended; SBX_E_INVAL when they cannot be used. */
static int options_in(const sbx_host_options *opts, sbx_host_options *o, sbx_error *err)
{
	if (opts && opts->abi_major != SBX_ABI_MAJOR)
		return sbx__set_error(err, SBX_E_INVAL,
				      "host: options struct has ABI %u; expected ABI %u (use "
				      "SBX_INIT_HEADER)",
				      opts->abi_major, SBX_ABI_MAJOR);
	int rc =
	    sbx__struct_in(opts, o, sizeof(*o), SBX__SIZE_1_0(sbx_host_options, ledger_retention),
			   "host: options", err);
	if (rc == SBX_OK && o->config_path && o->config_text)
		rc = sbx__set_error(err, SBX_E_INVAL,
				    "host: config_path and config_text are both set; give one");
	return rc;
}

/* This process as the ledger knows it: owner "host:pid", its start time, the run id, and
 * the sbx.ledger label (FNV-1a of host name and state dir: gc finds what this ledger made,
 * not other users'). */
static int identify(sbx_host *h, const sbx_host_options *o)
{
	char hostname[256];
	if (gethostname(hostname, sizeof(hostname)) != 0)
		snprintf(hostname, sizeof(hostname), "unknown");
	hostname[sizeof(hostname) - 1] = '\0';
	snprintf(h->owner, sizeof(h->owner), "%s:%ld", hostname, (long)getpid());
	snprintf(h->hostname, sizeof(h->hostname), "%.127s", hostname);
	h->self_start = sbx__process_start_time(getpid());
	uint64_t fnv = 14695981039346656037ull;
	for (const char *p = hostname; *p; p++)
		fnv = (fnv ^ (unsigned char)*p) * 1099511628211ull;
	char real[4096];
	const char *sd = realpath(h->state_dir, real) ? real : h->state_dir;
	for (const char *p = sd; *p; p++)
		fnv = (fnv ^ (unsigned char)*p) * 1099511628211ull;
	snprintf(h->ledger_id, sizeof(h->ledger_id), "%016llx", (unsigned long long)fnv);
	if (o->run_id)
		h->run_id = sbx__strdup(o->run_id);
	else
		h->run_id = sbx__asprintf("run-%lld-%ld", (long long)time(NULL), (long)getpid());
	return h->run_id ? SBX_OK : SBX_E_NOMEM;
}

/* Registry, config, state dir, identity and plugin slots of a new host. */
static int host_init(sbx_host *h, const sbx_host_options *o, sbx_error *err)
{
	int rc = sbx__registry_load(o->registry_path, &h->reg, err);
	if (rc == SBX_OK)
		rc = sbx__config_load(o->config_path, o->config_text, &h->cfg, err);
	if (rc == SBX_OK)
		rc = resolve_state_dir(o, &h->state_dir, err);
	if (rc != SBX_OK)
		return rc;
	h->plugins_dir = sbx__asprintf("%s/plugins", h->state_dir);
	if (!h->plugins_dir || identify(h, o) != SBX_OK)
		return sbx__nomem(err, "host");
	/* For plugins of ABI 1.0, whose state_dir() knows no host: the latest one. */
	sbx__set_state_dir(h->plugins_dir);
	h->ledger_retention =
	    o->ledger_retention ? o->ledger_retention : SBX__LEDGER_RETENTION_DEFAULT;
	return sbx__slots_new(h, err);
}

int sbx_host_new(const sbx_host_options *opts, sbx_host **out, sbx_error *err)
{
	if (!out)
		return sbx__set_error(err, SBX_E_INVAL, "host: NULL output pointer");
	*out = NULL;
	sbx_host_options o;
	int rc = options_in(opts, &o, err);
	if (rc != SBX_OK)
		return rc;
	sbx_host *h = sbx__calloc(1, sizeof(*h));
	if (!h)
		return sbx__nomem(err, "host");
	if (pthread_mutex_init(&h->lock, NULL) != 0) {
		sbx__free(h);
		return sbx__set_error(err, SBX_E_NOMEM, "host: cannot create a mutex");
	}
	h->pid = (long)getpid();
	h->fork_generation = sbx__fork_generation();
	sbx__nofile_raise();
	rc = host_init(h, &o, err);
	if (rc != SBX_OK) {
		sbx_host_free(h);
		return rc;
	}
	*out = h;
	return SBX_OK;
}

void sbx_host_free(sbx_host *host)
{
	if (!host)
		return;
	/* In a fork of the process that made it, all of it but the memory is the parent's:
	 * plugin states (a runner's link, a plugin's threads), its ledger handle. The memory
	 * stays too, rather than a half-freed host. */
	if (host->fork_generation != sbx__fork_generation())
		return;
	for (size_t i = host->n_states; i > 0; i--)
		sbx__state_free(host, host->states[i - 1]);
	sbx__free(host->states);
	for (size_t i = 0; i < host->n_mods; i++)
		sbx__module_unload(host->mods[i]);
	sbx__free(host->mods);
	sbx__slots_free(host);
	for (size_t i = 0; i < host->n_ids; i++)
		sbx__free(host->ids[i].id);
	sbx__free(host->ids);
	sbx__ledger_close(host->ledger);
	sbx__config_free(host->cfg);
	sbx__registry_free(host->reg);
	sbx__free(host->state_dir);
	sbx__free(host->plugins_dir);
	sbx__free(host->run_id);
	pthread_mutex_destroy(&host->lock);
	sbx__free(host);
}

size_t sbx_data_source_count(const sbx_host *host)
{
	return host ? host->cfg->n : 0;
}

int sbx_data_source_get(const sbx_host *host, size_t index, const char **name, const char **alias,
			sbx_error *err)
{
	if (!host)
		return sbx__set_error(err, SBX_E_INVAL, "data sources: NULL host");
	const sbx__data_source *ds;
	if (index == SIZE_MAX)
		ds = &host->cfg->deflt;
	else if (index < host->cfg->n)
		ds = &host->cfg->sources[index];
	else
		return sbx__set_error(err, SBX_E_INVAL,
				      "data sources: index %zu is past the end (%zu)", index,
				      host->cfg->n);
	if (name)
		*name = ds->name;
	if (alias)
		*alias = ds->alias;
	return SBX_OK;
}
