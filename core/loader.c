/* dlopen of plugin files and the ABI handshake. The only file that includes <dlfcn.h>.
 *
 * A load either succeeds with every registered descriptor checked and copied into host
 * memory, or fails leaving nothing loaded, with a message that names the .so. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "loader.h"

struct sbx__module {
	void *handle;
	char *path;
	sbx_plugin_desc *descs;
	size_t n;
	void *owner; /* a wrapped module's maker, released on unload */
	void (*release)(void *owner);
};

/* Collects the descriptors one entry call registers; the first failure sticks. */
struct sbx_registrar {
	const char *path;
	const char *const *expected;
	size_t n_expected;
	sbx_plugin_desc *descs;
	size_t n, cap;
	int status;
	sbx_error err;
};

static int reg_fail(sbx_registrar *reg, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int reg_fail(sbx_registrar *reg, int code, const char *fmt, ...)
{
	if (reg->status != SBX_OK)
		return code; /* keep the first reason */
	va_list ap;
	va_start(ap, fmt);
	sbx__set_errorv(&reg->err, code, fmt, ap);
	va_end(ap);
	reg->status = code;
	return code;
}

static int is_listed(const sbx_registrar *reg, const char *alias)
{
	for (size_t i = 0; i < reg->n_expected; i++)
		if (reg->expected[i] && strcmp(reg->expected[i], alias) == 0)
			return 1;
	return 0;
}

/* "a, b" of the expected aliases, into buf. */
static void listed_text(const sbx_registrar *reg, char *buf, size_t cap)
{
	size_t used = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < reg->n_expected && used < cap; i++) {
		int n = snprintf(buf + used, cap - used, "%s%s", i ? ", " : "",
				 reg->expected[i] ? reg->expected[i] : "");
		if (n < 0)
			break;
		used += (size_t)n;
	}
	if (reg->n_expected == 0)
		snprintf(buf, cap, "none");
}

static int check_ops(sbx_registrar *reg, const sbx_plugin_desc *d)
{
	struct {
		const char *name;
		int missing;
	} ops[] = {
	    {"init", d->init == NULL},       {"fini", d->fini == NULL},
	    {"create", d->create == NULL},   {"execute", d->execute == NULL},
	    {"destroy", d->destroy == NULL},
	};
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (ops[i].missing)
			return reg_fail(reg, SBX_E_INVAL,
					"%s: alias '%s': required op '%s' is NULL", reg->path,
					d->alias, ops[i].name);
	return SBX_OK;
}

static int check_keys(sbx_registrar *reg, const sbx_plugin_desc *d)
{
	if (d->n_keys > 0 && d->keys == NULL)
		return reg_fail(reg, SBX_E_INVAL, "%s: alias '%s': n_keys is %u but keys is NULL",
				reg->path, d->alias, d->n_keys);
	for (uint32_t i = 0; i < d->n_keys; i++) {
		const sbx_config_key *k = &d->keys[i];
		if (k->name == NULL || k->name[0] == '\0')
			return reg_fail(reg, SBX_E_INVAL,
					"%s: alias '%s': config key %u has no name", reg->path,
					d->alias, i);
		if (k->type < SBX_KEY_STRING || k->type > SBX_KEY_ANY)
			return reg_fail(reg, SBX_E_INVAL,
					"%s: alias '%s': config key '%s' has type %u, expected "
					"one of SBX_KEY_STRING (%u) .. SBX_KEY_ANY (%u)",
					reg->path, d->alias, k->name, k->type, SBX_KEY_STRING,
					SBX_KEY_ANY);
	}
	return SBX_OK;
}

int sbx__registrar_register(sbx_registrar *reg, const sbx_plugin_desc *desc)
{
	if (reg == NULL)
		return SBX_E_INVAL;
	if (desc == NULL)
		return reg_fail(reg, SBX_E_INVAL,
				"%s: register_sandbox called with a NULL descriptor", reg->path);
	if (desc->abi_major != SBX_ABI_MAJOR)
		return reg_fail(reg, SBX_E_ABI,
				"%s: plugin ABI %u.%u does not match host ABI %d.%d: rebuild the "
				"plugin against sbx %d.x headers",
				reg->path, desc->abi_major, desc->abi_minor, SBX_ABI_MAJOR,
				SBX_ABI_MINOR, SBX_ABI_MAJOR);
	if (desc->abi_minor > SBX_ABI_MINOR)
		return reg_fail(reg, SBX_E_ABI,
				"%s: plugin ABI %u.%u is newer than host ABI %d.%d: upgrade sbx or "
				"rebuild the plugin against sbx %d.%d headers",
				reg->path, desc->abi_major, desc->abi_minor, SBX_ABI_MAJOR,
				SBX_ABI_MINOR, SBX_ABI_MAJOR, SBX_ABI_MINOR);
	if (desc->struct_size < SBX__DESC_SIZE_1_0)
		return reg_fail(reg, SBX_E_ABI,
				"%s: descriptor is %u bytes, smaller than the %zu bytes of an ABI "
				"%d.0 descriptor: rebuild the plugin against sbx %d.x headers",
				reg->path, desc->struct_size, (size_t)SBX__DESC_SIZE_1_0,
				SBX_ABI_MAJOR, SBX_ABI_MAJOR);
	if (desc->alias == NULL || desc->alias[0] == '\0')
		return reg_fail(reg, SBX_E_INVAL, "%s: descriptor has an empty alias", reg->path);
	int rc = check_ops(reg, desc);
	if (rc == SBX_OK)
		rc = check_keys(reg, desc);
	if (rc != SBX_OK)
		return rc;
	for (size_t i = 0; i < reg->n; i++)
		if (strcmp(reg->descs[i].alias, desc->alias) == 0)
			return reg_fail(reg, SBX_E_EXISTS, "%s: alias '%s' registered twice",
					reg->path, desc->alias);
	if (!is_listed(reg, desc->alias)) {
		char listed[256];
		listed_text(reg, listed, sizeof(listed));
		return reg_fail(reg, SBX_E_INVAL,
				"%s: registered alias '%s' that the registry does not list for "
				"this file (listed: %s)",
				reg->path, desc->alias, listed);
	}
	if (reg->n == reg->cap) {
		size_t cap = reg->cap ? reg->cap * 2 : 4;
		sbx_plugin_desc *d = sbx__realloc(reg->descs, cap * sizeof(*d));
		if (d == NULL)
			return reg_fail(reg, SBX_E_NOMEM,
					"%s: out of memory registering alias '%s'", reg->path,
					desc->alias);
		reg->descs = d;
		reg->cap = cap;
	}
	/* Copy what the plugin has, zero the members a newer host knows and it does not. */
	sbx_plugin_desc *copy = &reg->descs[reg->n];
	size_t have = desc->struct_size < sizeof(*copy) ? desc->struct_size : sizeof(*copy);
	memset(copy, 0, sizeof(*copy));
	memcpy(copy, desc, have);
	reg->n++;
	return SBX_OK;
}

/* Why dlopen failed, told apart for the messages: not ELF, unresolved symbol, other. */
static int explain_dlopen(const char *path, const char *dlmsg, sbx_error *err)
{
	if (dlmsg == NULL)
		dlmsg = "unknown dlopen error";
	if (strstr(dlmsg, "undefined symbol") != NULL)
		return sbx__set_error(err, SBX_E_ABI, "%s: unresolved symbol: %s", path, dlmsg);
	unsigned char magic[4] = {0};
	ssize_t got = -1;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		got = read(fd, magic, sizeof(magic));
		close(fd);
	}
	if (got != (ssize_t)sizeof(magic) || memcmp(magic, "\177ELF", 4) != 0)
		return sbx__set_error(err, SBX_E_ABI, "%s: not a shared object (no ELF header)",
				      path);
	return sbx__set_error(err, SBX_E_ABI, "%s: cannot load: %s", path, dlmsg);
}

/* A plugin file stays mapped once a load of it succeeded, for the rest of the process: one
 * extra dlopen reference per file, its pin. A harness that makes a host per sandbox (NexAU's
 * drop-in makes one per sandbox) otherwise mapped, relocated and unmapped the plugin and its
 * libraries (libarchive, ICU, ...) with every host: 5 ms of a 5.2 ms create and destroy on
 * `local` (bench/README). A file replaced on disk (another device, inode, size or mtime)
 * loses its pin before it is opened again, so the new file is mapped once no host holds the
 * old one; a pin is only made by a load that mapped the file itself, so an old mapping that
 * a live host kept is never pinned under the new file's identity. The table is libc's memory,
 * not the caller's allocator (it outlives any change of allocator); a pin that cannot be
 * allocated is not made, and the load does not fail for it. */
typedef struct pin {
	char *real;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	void *handle;
} pin;

static pthread_mutex_t pins_lock = PTHREAD_MUTEX_INITIALIZER;
static pin *pins;
static size_t n_pins;

static int same_file(const pin *p, const struct stat *st)
{
	return p->dev == st->st_dev && p->ino == st->st_ino && p->size == st->st_size &&
	       p->mtime.tv_sec == st->st_mtim.tv_sec && p->mtime.tv_nsec == st->st_mtim.tv_nsec;
}

/* Under pins_lock: the pin of real, or NULL. */
static pin *pin_find(const char *real)
{
	for (size_t i = 0; i < n_pins; i++)
		if (strcmp(pins[i].real, real) == 0)
			return &pins[i];
	return NULL;
}

/* Before real is opened: drops its pin if the file changed since it was pinned. Returns 1
 * when the file is mapped in this process no longer (the coming dlopen maps it). */
static int pin_check(const char *real, const struct stat *st)
{
	pthread_mutex_lock(&pins_lock);
	pin *p = pin_find(real);
	if (p && !same_file(p, st)) {
		dlclose(p->handle);
		free(p->real);
		*p = pins[--n_pins];
	}
	void *mapped = dlopen(real, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
	if (mapped)
		dlclose(mapped);
	pthread_mutex_unlock(&pins_lock);
	return mapped == NULL;
}

void sbx__loader_fork_child(void)
{
	pthread_mutex_init(&pins_lock, NULL);
}

/* After real loaded as handle: pins it unless it is pinned already. */
static void pin_add(const char *real, const struct stat *st)
{
	pthread_mutex_lock(&pins_lock);
	if (!pin_find(real)) {
		pin *grown = realloc(pins, (n_pins + 1) * sizeof(*pins));
		char *copy = grown ? strdup(real) : NULL;
		void *h = copy ? dlopen(real, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD) : NULL;
		if (grown)
			pins = grown;
		if (h) {
			pins[n_pins++] = (pin){.real = copy,
					       .dev = st->st_dev,
					       .ino = st->st_ino,
					       .size = st->st_size,
					       .mtime = st->st_mtim,
					       .handle = h};
		} else {
			free(copy);
		}
	}
	pthread_mutex_unlock(&pins_lock);
}

int sbx__module_load(const char *path, const sbx_host_api *api, const char *const *expected,
		     size_t n_expected, sbx__module **out, sbx_error *err)
{
	int rc = SBX_OK;
	void *handle = NULL;
	sbx__module *mod = NULL;
	sbx_registrar reg = {.path = path, .expected = expected, .n_expected = n_expected};

	*out = NULL;
	if (path == NULL || path[0] == '\0') {
		rc = sbx__set_error(err, SBX_E_INVAL, "loader: empty plugin path");
		goto out;
	}
	struct stat st;
	if (stat(path, &st) != 0) {
		int e = errno;
		if (e == ENOENT)
			rc = sbx__set_error(err, SBX_E_IO, "%s: plugin file not found", path);
		else
			rc = sbx__set_error(err, SBX_E_IO, "%s: cannot access plugin file: %s",
					    path, strerror(e));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = sbx__set_error(err, SBX_E_ABI, "%s: not a shared object (not a regular file)",
				    path);
		goto out;
	}

	char real[PATH_MAX];
	rc = sbx__plugin_trusted(path, real, sizeof(real), err);
	if (rc != SBX_OK)
		goto out;
	struct stat rst;
	int fresh = stat(real, &rst) == 0 && pin_check(real, &rst);
	dlerror();
	handle = dlopen(real, RTLD_NOW | RTLD_LOCAL);
	if (handle == NULL) {
		rc = explain_dlopen(path, dlerror(), err);
		goto out;
	}
	dlerror();
	void *sym = dlsym(handle, SBX_PLUGIN_ENTRY);
	if (sym == NULL) {
		rc = sbx__set_error(err, SBX_E_ABI,
				    "%s: no entry symbol '%s': a plugin must export it (build it "
				    "with the sbx version script)",
				    path, SBX_PLUGIN_ENTRY);
		goto out;
	}
	sbx_plugin_register_fn entry;
	memcpy(&entry, &sym, sizeof(entry)); /* ISO C has no object-to-function cast */

	int erc = entry(api, &reg);
	if (reg.status != SBX_OK) {
		rc = reg.status;
		sbx__set_error(err, rc, "%s", reg.err.message);
		goto out;
	}
	if (erc != SBX_OK) {
		const char *name = sbx_status_name(erc);
		rc = strcmp(name, "SBX_E_UNKNOWN") == 0 ? SBX_E_ABI : erc;
		sbx__set_error(err, rc, "%s: %s failed with %s (%d)", path, SBX_PLUGIN_ENTRY, name,
			       erc);
		goto out;
	}
	if (reg.n == 0) {
		rc = sbx__set_error(err, SBX_E_ABI, "%s: %s registered no alias", path,
				    SBX_PLUGIN_ENTRY);
		goto out;
	}

	mod = sbx__calloc(1, sizeof(*mod));
	if (mod == NULL || (mod->path = sbx__strdup(path)) == NULL) {
		rc = sbx__set_error(err, SBX_E_NOMEM, "%s: out of memory loading the plugin", path);
		goto out;
	}
	mod->handle = handle;
	mod->descs = reg.descs;
	mod->n = reg.n;
	handle = NULL;
	if (fresh)
		pin_add(real, &rst);
	reg.descs = NULL;
	*out = mod;
	mod = NULL;
out:
	if (mod) {
		sbx__free(mod->path);
		sbx__free(mod);
	}
	sbx__free(reg.descs);
	if (handle)
		dlclose(handle);
	return rc;
}

size_t sbx__module_count(const sbx__module *mod)
{
	return mod ? mod->n : 0;
}

const sbx_plugin_desc *sbx__module_desc(const sbx__module *mod, size_t i)
{
	return mod && i < mod->n ? &mod->descs[i] : NULL;
}

const sbx_plugin_desc *sbx__module_find(const sbx__module *mod, const char *alias)
{
	if (mod == NULL || alias == NULL)
		return NULL;
	for (size_t i = 0; i < mod->n; i++)
		if (strcmp(mod->descs[i].alias, alias) == 0)
			return &mod->descs[i];
	return NULL;
}

int sbx__module_wrap(const char *path, sbx_plugin_desc *descs, size_t n, void *owner,
		     void (*release)(void *owner), sbx__module **out)
{
	sbx__module *mod = sbx__calloc(1, sizeof(*mod));
	if (mod == NULL || (mod->path = sbx__strdup(path)) == NULL) {
		sbx__free(mod);
		return SBX_E_NOMEM;
	}
	mod->descs = descs;
	mod->n = n;
	mod->owner = owner;
	mod->release = release;
	*out = mod;
	return SBX_OK;
}

void sbx__module_unload(sbx__module *mod)
{
	if (mod == NULL)
		return;
	if (mod->release)
		mod->release(mod->owner);
	if (mod->handle)
		dlclose(mod->handle);
	sbx__free(mod->descs);
	sbx__free(mod->path);
	sbx__free(mod);
}

static const char library_anchor = 0;
static char library_dir[PATH_MAX];
static pthread_once_t library_once = PTHREAD_ONCE_INIT;

static void find_library_dir(void)
{
	Dl_info info;
	char real[PATH_MAX];
	if (dladdr(&library_anchor, &info) == 0)
		return;
	/* A name without a slash is the main program as argv[0] called it: libsbx was linked
	 * in statically. */
	const char *name =
	    info.dli_fname && strchr(info.dli_fname, '/') ? info.dli_fname : "/proc/self/exe";
	if (realpath(name, real) == NULL)
		return;
	char *slash = strrchr(real, '/');
	if (slash == NULL)
		return;
	if (slash == real)
		slash[1] = '\0';
	else
		*slash = '\0';
	int n = snprintf(library_dir, sizeof(library_dir), "%s", real);
	if (n < 0 || (size_t)n >= sizeof(library_dir))
		library_dir[0] = '\0';
}

const char *sbx__library_dir(void)
{
	pthread_once(&library_once, find_library_dir);
	return library_dir[0] ? library_dir : NULL;
}
