/* The registry: which plugin file implements each sandbox type alias.
 *
 * registry.yaml maps alias -> {path: FILE.so, defaults: {...}}; registry.d/ *.yaml beside it
 * add aliases in the same format (read in name order), so a third party never edits the main
 * file. Relative paths resolve against the folder of the file that lists them. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "loader.h"

#ifndef SBX_BUILD_DIR
#define SBX_BUILD_DIR ""
#endif
#ifndef SBX_BUILD_REGISTRY
#define SBX_BUILD_REGISTRY ""
#endif
#ifndef SBX_INSTALL_REGISTRY
#define SBX_INSTALL_REGISTRY "/usr/local/etc/sbx/registry.yaml"
#endif

/* Whether the running libsbx is the one in the build tree (then its registry is the
 * build tree's, naming the just-built plugins). */
static int running_from_build_tree(void)
{
	const char *lib = sbx__library_dir();
	char build[PATH_MAX], core[PATH_MAX];
	if (lib == NULL || SBX_BUILD_DIR[0] == '\0' || realpath(SBX_BUILD_DIR, build) == NULL)
		return 0;
	int n = snprintf(core, sizeof(core), "%s/core", build);
	if (n < 0 || (size_t)n >= sizeof(core))
		return 0;
	return strcmp(lib, build) == 0 || strcmp(lib, core) == 0;
}

/* <library dir>/<SBX_REL_REGISTRY> when that file exists: the installed registry of an
 * install that was relocated (`cmake --install --prefix P`) or copied elsewhere. */
static int relocated_registry(char *buf, size_t cap)
{
#ifdef SBX_REL_REGISTRY
	const char *lib = sbx__library_dir();
	if (!lib)
		return 0;
	char joined[PATH_MAX];
	int n = snprintf(joined, sizeof(joined), "%s/%s", lib, SBX_REL_REGISTRY);
	if (n < 0 || (size_t)n >= sizeof(joined) || cap < PATH_MAX)
		return 0;
	return realpath(joined, buf) != NULL && access(buf, R_OK) == 0;
#else
	(void)buf;
	(void)cap;
	return 0;
#endif
}

/* Absolute form of path (relative to the working directory), newly allocated. */
static char *absolute(const char *path)
{
	if (path[0] == '/')
		return sbx__strdup(path);
	char cwd[PATH_MAX];
	if (getcwd(cwd, sizeof(cwd)) == NULL)
		return sbx__strdup(path);
	return sbx__asprintf("%s/%s", cwd, path);
}

/* Folder part of an absolute path ("/a/b.yaml" -> "/a"), newly allocated. */
static char *folder_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	if (slash == NULL)
		return sbx__strdup(".");
	if (slash == path)
		return sbx__strdup("/");
	return sbx__strndup(path, (size_t)(slash - path));
}

static int valid_alias(const char *a)
{
	if (a[0] == '\0')
		return 0;
	for (const char *p = a; *p; p++) {
		char c = *p;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_' || c == '.'))
			return 0;
	}
	return 1;
}

static int is_null_scalar(const sbx__node *n)
{
	if (n == NULL)
		return 1;
	if (n->kind != SBX__NODE_SCALAR || n->quoted)
		return 0;
	const char *s = n->scalar ? n->scalar : "";
	return s[0] == '\0' || strcmp(s, "~") == 0 || strcmp(s, "null") == 0;
}

static void entry_clear(sbx__reg_entry *e)
{
	sbx__free(e->alias);
	sbx__free(e->path);
	sbx__free(e->file);
	sbx__node_free(e->defaults);
}

/* What reading the registry files needs besides the registry: the room allocated for
 * entries and the aliases seen so far (alias -> entry index), so a duplicate is found in
 * constant time however many aliases there are. */
typedef struct loading {
	size_t cap;
	sbx__nameset seen;
} loading;

static int add_entry(sbx__registry *reg, loading *ld, sbx__reg_entry *e, sbx_error *err)
{
	if (reg->n == ld->cap) {
		size_t ncap = ld->cap ? ld->cap * 2 : 8;
		sbx__reg_entry *v = sbx__realloc(reg->entries, ncap * sizeof(*v));
		if (v == NULL)
			return sbx__set_error(err, SBX_E_NOMEM, "registry: out of memory");
		reg->entries = v;
		ld->cap = ncap;
	}
	if (sbx__nameset_add(&ld->seen, e->alias, reg->n, NULL) < 0)
		return sbx__set_error(err, SBX_E_NOMEM, "registry: out of memory");
	reg->entries[reg->n++] = *e;
	memset(e, 0, sizeof(*e));
	return SBX_OK;
}

/* One alias -> {path, defaults} entry of `file` (folder `dir`). */
static int parse_entry(sbx__registry *reg, loading *ld, const char *file, const char *dir,
		       const char *alias, const sbx__node *v, sbx_error *err)
{
	int rc = SBX_OK;
	sbx__reg_entry e = {0};
	int line = v ? v->line : 0;

	if (!valid_alias(alias)) {
		rc = sbx__set_error(err, SBX_E_REGISTRY,
				    "%s:%d: alias '%s' may only contain letters, digits, '-', '_' "
				    "and '.'",
				    file, line, alias);
		goto out;
	}
	size_t first = 0;
	if (sbx__nameset_get(&ld->seen, alias, &first)) {
		const sbx__reg_entry *o = &reg->entries[first];
		rc = sbx__set_error(err, SBX_E_REGISTRY,
				    "registry: alias '%s' is listed twice: %s:%d and %s:%d", alias,
				    o->file, o->line, file, line);
		goto out;
	}
	if (v == NULL || v->kind != SBX__NODE_MAP) {
		rc =
		    sbx__set_error(err, SBX_E_REGISTRY,
				   "%s:%d: alias '%s' must map to {path: FILE.so, defaults: {...}}",
				   file, line, alias);
		goto out;
	}
	const sbx__node *path = NULL, *defaults = NULL, *runner = NULL;
	for (size_t i = 0; i < v->n; i++) {
		if (strcmp(v->keys[i], "path") == 0) {
			path = v->items[i];
		} else if (strcmp(v->keys[i], "defaults") == 0) {
			defaults = v->items[i];
		} else if (strcmp(v->keys[i], "runner") == 0) {
			runner = v->items[i];
		} else {
			rc = sbx__set_error(
			    err, SBX_E_REGISTRY,
			    "%s:%d: alias '%s': unknown key '%s' (valid keys: path, "
			    "defaults, runner)",
			    file, v->items[i] ? v->items[i]->line : line, alias, v->keys[i]);
			goto out;
		}
	}
	rc = sbx__runner_opts_parse(runner, file, alias, &e.runner, err);
	if (rc != SBX_OK)
		goto out;
	if (path == NULL || is_null_scalar(path)) {
		rc = sbx__set_error(err, SBX_E_REGISTRY,
				    "%s:%d: alias '%s' has no 'path' (the plugin .so file)", file,
				    line, alias);
		goto out;
	}
	if (path->kind != SBX__NODE_SCALAR) {
		rc = sbx__set_error(err, SBX_E_REGISTRY,
				    "%s:%d: alias '%s': 'path' must be a file name", file,
				    path->line, alias);
		goto out;
	}
	if (defaults && is_null_scalar(defaults))
		defaults = NULL;
	if (defaults && defaults->kind != SBX__NODE_MAP) {
		rc =
		    sbx__set_error(err, SBX_E_REGISTRY,
				   "%s:%d: alias '%s': 'defaults' must be a mapping of config keys",
				   file, defaults->line, alias);
		goto out;
	}
	e.alias = sbx__strdup(alias);
	e.file = sbx__strdup(file);
	e.line = line;
	if (path->scalar[0] == '/')
		e.path = sbx__strdup(path->scalar);
	else
		e.path = sbx__asprintf("%s/%s", dir, path->scalar);
	if (defaults)
		e.defaults = sbx__node_dup(defaults);
	if (!e.alias || !e.file || !e.path || (defaults && !e.defaults)) {
		rc = sbx__set_error(err, SBX_E_NOMEM, "registry: out of memory");
		goto out;
	}
	rc = add_entry(reg, ld, &e, err);
out:
	entry_clear(&e);
	return rc;
}

/* Reads one registry file (main or drop-in). `how` says where its name came from. */
static int parse_file(sbx__registry *reg, loading *ld, const char *file, const char *how,
		      sbx_error *err)
{
	sbx__node *root = NULL;
	char *dir = NULL;
	int rc;
	struct stat st;

	if (stat(file, &st) != 0) {
		rc = sbx__set_error(err, SBX_E_REGISTRY, "%s%s: cannot read the registry: %s", file,
				    how, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = sbx__set_error(err, SBX_E_REGISTRY,
				    "%s%s: the registry must be a regular file; this is %s", file,
				    how, sbx__file_kind(st.st_mode));
		goto out;
	}
	rc = sbx__yaml_load_file(file, 0, SBX_E_REGISTRY, &root, err);
	if (rc != SBX_OK) {
		if (err)
			err->code = rc == SBX_E_NOMEM ? SBX_E_NOMEM : SBX_E_REGISTRY;
		rc = rc == SBX_E_NOMEM ? SBX_E_NOMEM : SBX_E_REGISTRY;
		goto out;
	}
	if (root->kind != SBX__NODE_MAP) {
		rc = sbx__set_error(err, SBX_E_REGISTRY,
				    "%s:%d: the registry must be a mapping of alias -> {path: "
				    "FILE.so, defaults: {...}}",
				    file, root->line);
		goto out;
	}
	dir = folder_of(file);
	if (dir == NULL) {
		rc = sbx__set_error(err, SBX_E_NOMEM, "registry: out of memory");
		goto out;
	}
	for (size_t i = 0; i < root->n && rc == SBX_OK; i++)
		rc = parse_entry(reg, ld, file, dir, root->keys[i], root->items[i], err);
out:
	sbx__free(dir);
	sbx__node_free(root);
	return rc;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The *.yaml files of registry.d/ beside the main file, in name order. */
static int parse_dropins(sbx__registry *reg, loading *ld, const char *main_dir, sbx_error *err)
{
	int rc = SBX_OK;
	char **names = NULL;
	size_t n = 0, ncap = 0;
	char *ddir = sbx__asprintf("%s/registry.d", main_dir);
	DIR *d = NULL;

	if (ddir == NULL) {
		rc = sbx__set_error(err, SBX_E_NOMEM, "registry: out of memory");
		goto out;
	}
	d = opendir(ddir);
	if (d == NULL) {
		if (errno != ENOENT && errno != ENOTDIR)
			rc = sbx__set_error(err, SBX_E_REGISTRY, "%s: cannot read the folder: %s",
					    ddir, strerror(errno));
		goto out;
	}
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		size_t len = strlen(de->d_name);
		if (de->d_name[0] == '.' || len < 6 || strcmp(de->d_name + len - 5, ".yaml") != 0)
			continue;
		if (n == ncap) {
			size_t c = ncap ? ncap * 2 : 8;
			char **v = sbx__realloc(names, c * sizeof(*v));
			if (v == NULL) {
				rc = sbx__set_error(err, SBX_E_NOMEM, "registry: out of memory");
				goto out;
			}
			names = v;
			ncap = c;
		}
		names[n] = sbx__asprintf("%s/%s", ddir, de->d_name);
		if (names[n] == NULL) {
			rc = sbx__set_error(err, SBX_E_NOMEM, "registry: out of memory");
			goto out;
		}
		n++;
	}
	if (n > 1)
		qsort(names, n, sizeof(*names), cmp_str);
	for (size_t i = 0; i < n && rc == SBX_OK; i++)
		rc = parse_file(reg, ld, names[i], "", err);
out:
	if (d)
		closedir(d);
	for (size_t i = 0; i < n; i++)
		sbx__free(names[i]);
	sbx__free(names);
	sbx__free(ddir);
	return rc;
}

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(((const sbx__reg_entry *)a)->alias, ((const sbx__reg_entry *)b)->alias);
}

int sbx__registry_load(const char *explicit_path, sbx__registry **out, sbx_error *err)
{
	int rc = SBX_OK;
	loading ld = {0};
	char *main_dir = NULL;
	sbx__registry *reg = NULL;
	const char *name, *how;
	const char *env = getenv("SBX_REGISTRY");
	char relocated[PATH_MAX];

	*out = NULL;
	if (explicit_path && explicit_path[0]) {
		name = explicit_path;
		how = "";
	} else if (env && env[0]) {
		name = env;
		how = " (named by $SBX_REGISTRY)";
	} else if (SBX_BUILD_REGISTRY[0] && running_from_build_tree()) {
		name = SBX_BUILD_REGISTRY;
		how = " (the build tree's registry)";
	} else if (relocated_registry(relocated, sizeof(relocated))) {
		/* An install moved to another prefix finds the registry beside its library. */
		name = relocated;
		how = " (the installed registry; name another with $SBX_REGISTRY)";
	} else {
		name = SBX_INSTALL_REGISTRY;
		how = " (the installed registry; name another with $SBX_REGISTRY)";
	}

	reg = sbx__calloc(1, sizeof(*reg));
	if (reg == NULL || (reg->main_file = absolute(name)) == NULL ||
	    (main_dir = folder_of(reg->main_file)) == NULL) {
		rc = sbx__set_error(err, SBX_E_NOMEM, "registry: out of memory");
		goto out;
	}
	rc = parse_file(reg, &ld, reg->main_file, how, err);
	if (rc == SBX_OK)
		rc = parse_dropins(reg, &ld, main_dir, err);
	sbx__nameset_clear(&ld.seen); /* indexes, which the sort below changes */
	if (rc != SBX_OK)
		goto out;
	if (reg->n > 1)
		qsort(reg->entries, reg->n, sizeof(*reg->entries), cmp_entry);
	*out = reg;
	reg = NULL;
out:
	sbx__free(main_dir);
	sbx__registry_free(reg);
	return rc;
}

void sbx__registry_free(sbx__registry *reg)
{
	if (reg == NULL)
		return;
	for (size_t i = 0; i < reg->n; i++)
		entry_clear(&reg->entries[i]);
	sbx__free(reg->entries);
	sbx__free(reg->main_file);
	sbx__free(reg);
}

const sbx__reg_entry *sbx__registry_find(const sbx__registry *reg, const char *alias)
{
	if (reg == NULL || alias == NULL || reg->n == 0)
		return NULL;
	sbx__reg_entry key = {.alias = (char *)alias};
	return bsearch(&key, reg->entries, reg->n, sizeof(*reg->entries), cmp_entry);
}

char *sbx__registry_alias_list(const sbx__registry *reg)
{
	if (reg == NULL || reg->n == 0)
		return sbx__strdup("(none)");
	size_t len = 1;
	for (size_t i = 0; i < reg->n; i++)
		len += strlen(reg->entries[i].alias) + 2;
	char *s = sbx__alloc(len), *p = s;
	if (s == NULL)
		return NULL;
	for (size_t i = 0; i < reg->n; i++) {
		size_t a = strlen(reg->entries[i].alias);
		if (i) {
			memcpy(p, ", ", 2);
			p += 2;
		}
		memcpy(p, reg->entries[i].alias, a);
		p += a;
	}
	*p = '\0';
	return s;
}
