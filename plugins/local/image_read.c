/* What an image archive holds. Two layouts are read:
 *   docker-archive (`docker save`, `podman save`): manifest.json lists each image's config
 *     member, its RepoTags and its layer members (plain tar files, or symlinks to them);
 *   OCI image layout (`podman save --format oci-archive`, `docker save` since 25):
 *     index.json points at manifest blobs, which point at the config and layer blobs under
 *     blobs/sha256/ (layers gzip- or zstd-compressed or plain).
 * One pass keeps the small members (manifests, configs) in memory and the links between
 * members; the layers' bytes are skipped. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

#include "image_read.h"
#include "state.h"

#define KEEP_MAX  (4u << 20)  /* a member larger than this is not a manifest or a config */
#define KEEP_ALL  (64u << 20) /* and all those kept together stay below this */
#define LINK_HOPS 8

typedef struct member {
	char *name;
	char *link; /* a symlink's target as a member name, else NULL */
	char *data; /* kept bytes, else NULL */
	size_t len;
} member;

typedef struct members {
	member *v;
	size_t n, cap, kept;
} members;

void local_img_sha256_hex(const void *data, size_t len, char out[IMG_HEX + 1])
{
	unsigned char md[32];
	unsigned int n = 0;
	EVP_Digest(data, len, md, &n, EVP_sha256(), NULL);
	for (unsigned i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
	out[IMG_HEX] = '\0';
}

void local_img_normalise(const char *ref, char *buf, size_t cap)
{
	static const char *const drop[] = {"docker.io/", "index.docker.io/", "localhost/",
					   "library/"};
	for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
		if (strncmp(ref, drop[i], strlen(drop[i])) == 0)
			ref += strlen(drop[i]);
	const char *slash = strrchr(ref, '/');
	const char *tail = slash ? slash + 1 : ref;
	int tagged = strchr(tail, ':') != NULL || strchr(ref, '@') != NULL;
	int n = snprintf(buf, cap, "%s%s", ref, tagged ? "" : ":latest");
	if (n < 0 || (size_t)n >= cap)
		buf[0] = '\0';
}

/* "./a//b/" -> "a/b", in place. */
static void clean_name(char *s)
{
	char *w = s;
	const char *r = s;
	while (*r) {
		while (*r == '/')
			r++;
		if (r[0] == '.' && (r[1] == '/' || r[1] == '\0')) {
			r++;
			continue;
		}
		if (!*r)
			break;
		if (w != s)
			*w++ = '/';
		while (*r && *r != '/')
			*w++ = *r++;
	}
	*w = '\0';
}

/* The member a symlink in folder `dir` of the archive points at: NULL when it leaves the
 * archive's top. */
static char *link_member(const char *name, const char *target)
{
	size_t cap = strlen(name) + strlen(target) + 2;
	char *out = malloc(cap);
	if (!out)
		return NULL;
	if (target[0] == '/') {
		snprintf(out, cap, "%s", target);
	} else {
		const char *slash = strrchr(name, '/');
		int dl = slash ? (int)(slash - name) : 0;
		snprintf(out, cap, "%.*s%s%s", dl, name, dl ? "/" : "", target);
	}
	/* Resolve "." and ".." lexically. */
	char *w = out;
	const char *r = out;
	while (*r) {
		while (*r == '/')
			r++;
		const char *end = strchr(r, '/');
		size_t len = end ? (size_t)(end - r) : strlen(r);
		if (len == 1 && r[0] == '.') {
		} else if (len == 2 && r[0] == '.' && r[1] == '.') {
			if (w == out) {
				free(out);
				return NULL;
			}
			while (w > out && w[-1] != '/')
				w--;
			if (w > out)
				w--;
		} else if (len) {
			if (w != out)
				*w++ = '/';
			memmove(w, r, len);
			w += len;
		}
		r += len;
	}
	*w = '\0';
	return out;
}

static int add_member(members *m, struct archive *a, struct archive_entry *e)
{
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 64;
		member *v = realloc(m->v, cap * sizeof(*v));
		if (!v)
			return -1;
		m->v = v;
		m->cap = cap;
	}
	const char *p = archive_entry_pathname(e);
	member *x = &m->v[m->n];
	memset(x, 0, sizeof(*x));
	if (!p || !(x->name = strdup(p)))
		return p ? -1 : 0;
	clean_name(x->name);
	m->n++;
	if (archive_entry_filetype(e) == AE_IFLNK && archive_entry_symlink(e)) {
		x->link = link_member(x->name, archive_entry_symlink(e));
		return 0;
	}
	int64_t size = archive_entry_size(e);
	if (archive_entry_filetype(e) != AE_IFREG || size <= 0 || size > KEEP_MAX ||
	    m->kept + (size_t)size > KEEP_ALL)
		return 0;
	x->data = malloc((size_t)size);
	if (!x->data)
		return -1;
	la_ssize_t got = archive_read_data(a, x->data, (size_t)size);
	if (got != (la_ssize_t)size) {
		free(x->data);
		x->data = NULL;
		return got < 0 ? -2 : 0;
	}
	x->len = (size_t)size;
	m->kept += x->len;
	return 0;
}

static void members_free(members *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->v[i].name);
		free(m->v[i].link);
		free(m->v[i].data);
	}
	free(m->v);
}

/* The member called name, through at most LINK_HOPS symlinks; NULL when absent. */
static const member *find(const members *m, const char *name)
{
	char want[4096];
	snprintf(want, sizeof(want), "%s", name);
	clean_name(want);
	for (int hop = 0; hop <= LINK_HOPS; hop++) {
		const member *hit = NULL;
		for (size_t i = m->n; i-- > 0 && !hit;)
			if (strcmp(m->v[i].name, want) == 0)
				hit = &m->v[i];
		if (!hit || !hit->link)
			return hit;
		snprintf(want, sizeof(want), "%s", hit->link);
	}
	return NULL;
}

static json_t *load_json(const members *m, const char *name)
{
	const member *x = find(m, name);
	return x && x->data ? json_loadb(x->data, x->len, 0, NULL) : NULL;
}

/* "sha256:<64 hex>" -> the hex, else NULL. */
static const char *sha_of(const char *digest)
{
	if (!digest || strncmp(digest, "sha256:", 7) != 0 || strlen(digest + 7) != IMG_HEX)
		return NULL;
	for (size_t i = 7; digest[i]; i++)
		if (!strchr("0123456789abcdef", digest[i]))
			return NULL;
	return digest + 7;
}

static void plan_free(img_plan *p)
{
	free(p->config);
	for (size_t i = 0; i < p->n_layers; i++)
		free(p->layers[i]);
	free(p->layers);
	free(p->layer_sha);
	free(p->diff_id);
	for (size_t i = 0; i < p->n_names; i++)
		free(p->names[i]);
	free(p->names);
	memset(p, 0, sizeof(*p));
}

void local_img_archive_free(img_archive *a)
{
	for (size_t i = 0; a && i < a->n; i++)
		plan_free(&a->images[i]);
	if (a) {
		free(a->images);
		a->images = NULL;
		a->n = 0;
	}
}

static int add_name(img_plan *p, const char *ref)
{
	char norm[600];
	local_img_normalise(ref, norm, sizeof(norm));
	if (!norm[0])
		return 0;
	for (size_t i = 0; i < p->n_names; i++)
		if (strcmp(p->names[i], norm) == 0)
			return 0;
	char **v = realloc(p->names, (p->n_names + 1) * sizeof(*v));
	if (!v)
		return -1;
	p->names = v;
	if (!(v[p->n_names] = strdup(norm)))
		return -1;
	p->n_names++;
	return 0;
}

static int add_layer(img_plan *p, const char *member_name, const char *sha)
{
	size_t n = p->n_layers + 1;
	char **v = realloc(p->layers, n * sizeof(*v));
	if (!v)
		return -1;
	p->layers = v;
	char(*s)[IMG_HEX + 1] = realloc(p->layer_sha, n * sizeof(*s));
	if (!s)
		return -1;
	p->layer_sha = s;
	char(*d)[IMG_HEX + 1] = realloc(p->diff_id, n * sizeof(*d));
	if (!d)
		return -1;
	p->diff_id = d;
	if (!(v[p->n_layers] = strdup(member_name)))
		return -1;
	snprintf(s[p->n_layers], IMG_HEX + 1, "%s", sha ? sha : "");
	d[p->n_layers][0] = '\0';
	p->n_layers++;
	return 0;
}

/* The config's bytes become the image's address; its rootfs.diff_ids are kept for layers the
 * archive names without a digest. */
static int set_config(img_plan *p, const member *cfg, const char *want_sha, const char *path,
		      sbx_error *err)
{
	if (!cfg || !cfg->data)
		return sbxs_host->set_error(err, SBX_E_IO,
					    "local: image archive %s: config member missing", path);
	if (!(p->config = malloc(cfg->len + 1)))
		return sbxs_host->set_error(err, SBX_E_NOMEM, "local: image: out of memory");
	memcpy(p->config, cfg->data, cfg->len);
	p->config[cfg->len] = '\0';
	p->config_len = cfg->len;
	local_img_sha256_hex(p->config, p->config_len, p->digest);
	if (want_sha && strcmp(want_sha, p->digest) != 0)
		return sbxs_host->set_error(
		    err, SBX_E_IO,
		    "local: image archive %s: config %s does not hash to its digest "
		    "(sha256 %s)",
		    path, cfg->name, p->digest);
	return SBX_OK;
}

static void set_diff_ids(img_plan *p)
{
	json_t *c = json_loadb(p->config, p->config_len, 0, NULL);
	json_t *ids = json_object_get(json_object_get(c, "rootfs"), "diff_ids");
	for (size_t i = 0; i < p->n_layers && i < json_array_size(ids); i++) {
		const char *hex = sha_of(json_string_value(json_array_get(ids, i)));
		if (hex)
			snprintf(p->diff_id[i], IMG_HEX + 1, "%s", hex);
	}
	json_decref(c);
}

static int grow(img_archive *out, img_plan **p)
{
	img_plan *v = realloc(out->images, (out->n + 1) * sizeof(*v));
	if (!v)
		return -1;
	out->images = v;
	*p = &v[out->n++];
	memset(*p, 0, sizeof(**p));
	return 0;
}

/* docker-archive: manifest.json. */
static int from_manifest(const members *m, json_t *man, const char *path, img_archive *out,
			 sbx_error *err)
{
	if (!json_is_array(man) || json_array_size(man) == 0)
		return sbxs_host->set_error(
		    err, SBX_E_IO, "local: image archive %s: manifest.json is not a list of images",
		    path);
	for (size_t i = 0; i < json_array_size(man); i++) {
		json_t *e = json_array_get(man, i);
		const char *cfg = json_string_value(json_object_get(e, "Config"));
		json_t *layers = json_object_get(e, "Layers");
		json_t *tags = json_object_get(e, "RepoTags");
		img_plan *p;
		if (!cfg || !json_is_array(layers))
			return sbxs_host->set_error(
			    err, SBX_E_IO,
			    "local: image archive %s: manifest.json entry %zu lacks "
			    "Config or Layers",
			    path, i);
		if (grow(out, &p) != 0)
			return sbxs_host->set_error(err, SBX_E_NOMEM,
						    "local: image: out of memory");
		/* A config named blobs/sha256/<hex> or <hex>.json names its own digest. */
		char want[IMG_HEX + 8] = "";
		const char *base = strrchr(cfg, '/') ? strrchr(cfg, '/') + 1 : cfg;
		if (strlen(base) >= IMG_HEX)
			snprintf(want, sizeof(want), "sha256:%.64s", base);
		int rc = set_config(p, find(m, cfg), sha_of(want), path, err);
		if (rc != SBX_OK)
			return rc;
		for (size_t k = 0; k < json_array_size(layers); k++) {
			const char *l = json_string_value(json_array_get(layers, k));
			if (!l)
				return sbxs_host->set_error(
				    err, SBX_E_IO, "local: image archive %s: a layer is not a name",
				    path);
			char d[IMG_HEX + 8] = "";
			if (strncmp(l, "blobs/sha256/", 13) == 0)
				snprintf(d, sizeof(d), "sha256:%s", l + 13);
			if (add_layer(p, l, sha_of(d)) != 0)
				return sbxs_host->set_error(err, SBX_E_NOMEM,
							    "local: image: out of memory");
		}
		set_diff_ids(p);
		for (size_t k = 0; k < json_array_size(tags); k++) {
			const char *t = json_string_value(json_array_get(tags, k));
			if (t && add_name(p, t) != 0)
				return sbxs_host->set_error(err, SBX_E_NOMEM,
							    "local: image: out of memory");
		}
	}
	return SBX_OK;
}

static const char *host_arch(void)
{
	struct utsname u;
	if (uname(&u) != 0)
		return "amd64";
	if (strcmp(u.machine, "x86_64") == 0)
		return "amd64";
	if (strcmp(u.machine, "aarch64") == 0)
		return "arm64";
	return "";
}

static int blob_name(const char *digest, char *buf, size_t cap)
{
	const char *hex = sha_of(digest);
	if (!hex)
		return -1;
	snprintf(buf, cap, "blobs/sha256/%s", hex);
	return 0;
}

/* One OCI (or Docker v2) image manifest, named by `names` (an index entry's annotations). */
static int from_oci_manifest(const members *m, const char *digest, json_t *annotations,
			     const char *path, img_archive *out, sbx_error *err)
{
	char name[128];
	if (blob_name(digest, name, sizeof(name)) != 0)
		return sbxs_host->set_error(err, SBX_E_IO,
					    "local: image archive %s: bad digest '%.80s'", path,
					    digest ? digest : "");
	const member *x = find(m, name);
	json_t *man = x && x->data ? json_loadb(x->data, x->len, 0, NULL) : NULL;
	if (!man)
		return sbxs_host->set_error(
		    err, SBX_E_IO, "local: image archive %s: manifest %s missing or not JSON", path,
		    name);
	int rc = SBX_OK;
	char got[IMG_HEX + 1];
	local_img_sha256_hex(x->data, x->len, got);
	img_plan *p = NULL;
	const char *cfg =
	    json_string_value(json_object_get(json_object_get(man, "config"), "digest"));
	json_t *layers = json_object_get(man, "layers");
	if (strcmp(got, sha_of(digest)) != 0)
		rc = sbxs_host->set_error(
		    err, SBX_E_IO,
		    "local: image archive %s: manifest %s does not hash to its digest", path, name);
	else if (!json_is_array(layers) || blob_name(cfg, name, sizeof(name)) != 0)
		rc = sbxs_host->set_error(
		    err, SBX_E_IO, "local: image archive %s: manifest %s lacks a config or layers",
		    path, digest);
	else if (grow(out, &p) != 0)
		rc = sbxs_host->set_error(err, SBX_E_NOMEM, "local: image: out of memory");
	if (rc == SBX_OK)
		rc = set_config(p, find(m, name), sha_of(cfg), path, err);
	for (size_t k = 0; rc == SBX_OK && k < json_array_size(layers); k++) {
		const char *d =
		    json_string_value(json_object_get(json_array_get(layers, k), "digest"));
		if (blob_name(d, name, sizeof(name)) != 0)
			rc = sbxs_host->set_error(
			    err, SBX_E_IO,
			    "local: image archive %s: layer %zu has no sha256 digest", path, k);
		else if (add_layer(p, name, sha_of(d)) != 0)
			rc = sbxs_host->set_error(err, SBX_E_NOMEM, "local: image: out of memory");
	}
	if (rc == SBX_OK)
		set_diff_ids(p);
	static const char *const keys[] = {"io.containerd.image.name",
					   "org.opencontainers.image.ref.name"};
	for (size_t k = 0; rc == SBX_OK && k < 2; k++) {
		const char *ref = json_string_value(json_object_get(annotations, keys[k]));
		/* A bare tag ("latest") names no repository: it is no reference. */
		if (ref && strpbrk(ref, "/:") && add_name(p, ref) != 0)
			rc = sbxs_host->set_error(err, SBX_E_NOMEM, "local: image: out of memory");
	}
	json_decref(man);
	return rc;
}

static int is_index(const char *media)
{
	return media &&
	       (strcmp(media, "application/vnd.oci.image.index.v1+json") == 0 ||
		strcmp(media, "application/vnd.docker.distribution.manifest.list.v2+json") == 0);
}

/* OCI layout: index.json, whose entries may be nested indexes (one per platform). */
static int from_index(const members *m, json_t *idx, json_t *annotations, int depth,
		      const char *path, img_archive *out, sbx_error *err)
{
	json_t *list = json_object_get(idx, "manifests");
	if (!json_is_array(list) || depth > 2)
		return sbxs_host->set_error(
		    err, SBX_E_IO, "local: image archive %s: index lists no manifests", path);
	for (size_t i = 0; i < json_array_size(list); i++) {
		json_t *e = json_array_get(list, i);
		const char *media = json_string_value(json_object_get(e, "mediaType"));
		const char *digest = json_string_value(json_object_get(e, "digest"));
		json_t *ann = json_object_get(e, "annotations");
		int rc;
		if (is_index(media)) {
			char name[128];
			json_t *sub =
			    blob_name(digest, name, sizeof(name)) == 0 ? load_json(m, name) : NULL;
			if (!sub)
				return sbxs_host->set_error(
				    err, SBX_E_IO, "local: image archive %s: index %s missing",
				    path, digest ? digest : "");
			rc = from_index(m, sub, ann ? ann : annotations, depth + 1, path, out, err);
			json_decref(sub);
		} else {
			json_t *plat = json_object_get(e, "platform");
			const char *arch = json_string_value(json_object_get(plat, "architecture"));
			if (depth > 0 && arch && strcmp(arch, host_arch()) != 0)
				continue;
			rc = from_oci_manifest(m, digest, ann ? ann : annotations, path, out, err);
		}
		if (rc != SBX_OK)
			return rc;
	}
	return SBX_OK;
}

int local_img_read(const char *path, img_archive *out, sbx_error *err)
{
	members m = {0};
	memset(out, 0, sizeof(*out));
	struct archive *a = archive_read_new();
	if (!a)
		return sbxs_host->set_error(err, SBX_E_NOMEM, "local: image: out of memory");
	archive_read_support_filter_all(a);
	archive_read_support_format_tar(a);
	int rc = SBX_OK;
	if (archive_read_open_filename(a, path, 1 << 16) != ARCHIVE_OK) {
		rc = sbxs_host->set_error(err, SBX_E_IO,
					  "local: image archive %s is not a readable tar: %s", path,
					  archive_error_string(a));
		goto out;
	}
	struct archive_entry *e;
	int r;
	while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
		int k = add_member(&m, a, e);
		if (k == -1) {
			rc = sbxs_host->set_error(err, SBX_E_NOMEM, "local: image: out of memory");
			goto out;
		}
		if (k == -2)
			break;
	}
	if (r != ARCHIVE_EOF) {
		rc = sbxs_host->set_error(err, SBX_E_IO,
					  "local: image archive %s is not a readable tar: %s", path,
					  archive_error_string(a));
		goto out;
	}
	json_t *j = load_json(&m, "manifest.json");
	if (j) {
		rc = from_manifest(&m, j, path, out, err);
	} else if ((j = load_json(&m, "index.json"))) {
		rc = from_index(&m, j, NULL, 0, path, out, err);
	} else {
		rc = sbxs_host->set_error(
		    err, SBX_E_IO,
		    "local: %s is no image archive: neither manifest.json (docker "
		    "save) nor index.json (OCI) is in it",
		    path);
	}
	json_decref(j);
	if (rc == SBX_OK && out->n == 0)
		rc = sbxs_host->set_error(err, SBX_E_IO,
					  "local: image archive %s holds no image for %s", path,
					  host_arch());
	for (size_t i = 0; rc == SBX_OK && i < out->n; i++)
		for (size_t k = 0; rc == SBX_OK && k < out->images[i].n_layers; k++) {
			const member *x = find(&m, out->images[i].layers[k]);
			if (!x)
				rc = sbxs_host->set_error(
				    err, SBX_E_IO,
				    "local: image archive %s: layer %.200s is missing", path,
				    out->images[i].layers[k]);
			else if (strcmp(x->name, out->images[i].layers[k]) != 0) {
				/* Unpacking looks for the member itself, past its links. */
				char *real = strdup(x->name);
				if (!real) {
					rc = sbxs_host->set_error(err, SBX_E_NOMEM,
								  "local: image: out of memory");
					break;
				}
				free(out->images[i].layers[k]);
				out->images[i].layers[k] = real;
			}
		}
out:
	if (rc != SBX_OK)
		local_img_archive_free(out);
	members_free(&m);
	archive_read_free(a);
	return rc;
}
