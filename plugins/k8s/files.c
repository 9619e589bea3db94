/* File ops through pods/exec: each op is a short POSIX sh script run in the sandbox
 * container (head -c, stat, mkdir, mv, rm), whose exit status says what went wrong; a
 * relative path must stay beneath the work dir, symlinks resolved, and a prelude checks it
 * in the container. Reads and writes touch regular files only, reads stop at
 * max_file_bytes. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <sbx/support/buf.h>
#include <sbx/support/host.h>

#include "files.h"
#include "podexec.h"
#include "podspec.h"

typedef struct collect {
	sbxs_buf out;
	sbxs_buf err;
} collect;

static int on_collect(void *ctx, uint32_t stream, const void *data, size_t len)
{
	collect *c = ctx;
	if (stream == SBX_STREAM_STDERR)
		return c->err.len < 4096 ? sbxs_buf_add(&c->err, data, len) : SBX_OK;
	return sbxs_buf_add(&c->out, data, len);
}

/* Runs argv (no wrapper), collecting output. */
static int run_collect(k8s_state *st, const char *id, const char *const *argv, const void *in,
		       size_t in_len, int has_in, collect *c, int *exit_code, sbx_error *err)
{
	k8s_podexec io = {.argv = argv,
			  .has_stdin = has_in,
			  .stdin_data = in,
			  .stdin_len = in_len,
			  .output = on_collect,
			  .output_ctx = c};
	int rc = k8s_podexec_run(st, id, &io, err);
	*exit_code = io.exit_code;
	return rc;
}

static const char *first_line(sbxs_buf *b)
{
	if (!b->data)
		return "";
	b->data[strcspn(b->data, "\r\n")] = '\0';
	return b->data;
}

/* Shell prelude of every file op: `chk PATH` exits 5 unless PATH, with symlinks resolved
 * (through its deepest existing ancestor when it does not exist yet), stays inside the work
 * dir (the exec cwd); `chkp PATH` checks the parent only (for ops on a link itself). */
#define PATH_CHECK                                                                            \
	"b=$(pwd -P); chk() { p=$1; case $p in /*) ;; *) p=$b/$p;; esac; "                    \
	"while [ ! -e \"$p\" ] && [ ! -L \"$p\" ]; do p=$(dirname -- \"$p\"); done; "         \
	"r=$(readlink -f -- \"$p\") || exit 5; case $r in \"$b\"|\"$b\"/*) ;; *) exit 5;; "   \
	"esac; }; chkp() { case $1 in /*) q=$1;; *) q=$b/$1;; esac; "                         \
	"case $(basename -- \"$q\") in ..|.) chk \"$q\";; *) chk \"$(dirname -- \"$q\")\";; " \
	"esac; }; "

/* `reg PATH` exits 6 to 10 unless PATH (a symlink followed) is a regular file: opening a
 * FIFO would block the op, a device could feed it forever. */
#define REGULAR_CHECK                                                                         \
	"reg() { [ -f \"$1\" ] && return; [ -p \"$1\" ] && exit 6; [ -c \"$1\" ] && exit 7; " \
	"[ -b \"$1\" ] && exit 8; [ -S \"$1\" ] && exit 9; exit 10; }; "

/* One file op's script: its name (the script's $0), text (arguments: the path, then op
 * specific ones) and the messages of its exit statuses 3 (SBX_E_NO_FILE) and 4
 * (SBX_E_INVAL), NULL where the script never exits so; `regular`: it runs `reg` (exit
 * statuses 6 to 10) and 11 says the file is larger than max_file_bytes. */
typedef struct file_script {
	const char *op;
	const char *name;
	const char *text;
	const char *missing;
	const char *wrong_kind;
	int regular;
} file_script;

/* $2 max_file_bytes, $3 one byte more: a file that grows past the size stat saw is still
 * cut there, and the plugin refuses what is longer than $2. */
static const file_script read_script = {
    "read",
    "sbx-read",
    PATH_CHECK REGULAR_CHECK "chk \"$1\"; [ -e \"$1\" ] || exit 3; [ -d \"$1\" ] && exit 4; "
			     "reg \"$1\"; n=$(stat -L -c %s -- \"$1\") || exit 1; "
			     "[ \"$n\" -gt \"$2\" ] && exit 11; exec head -c \"$3\" -- \"$1\"",
    "no such file",
    "is a directory",
    1};

/* $2 the byte count, $3 the mode. head -c needs no stdin EOF, so this works under v4 too;
 * the temp file and mv make the replacement atomic, and replace a hard link instead of
 * writing through it. */
static const file_script write_script = {
    "write",
    "sbx-write",
    PATH_CHECK REGULAR_CHECK
    "chk \"$1\"; [ -d \"$1\" ] && exit 4; [ -e \"$1\" ] && reg \"$1\"; t=\"$1.sbx-tmp.$$\"; "
    "mkdir -p -- \"$(dirname -- \"$1\")\" && head -c \"$2\" > \"$t\" && chmod \"$3\" \"$t\" && "
    "mv -f -- \"$t\" \"$1\" || { rm -f -- \"$t\"; exit 1; }",
    NULL,
    "is a directory",
    1};

/* $2 1: recursive. */
static const file_script remove_script = {
    "remove",
    "sbx-rm",
    PATH_CHECK "chkp \"$1\"; [ -e \"$1\" ] || [ -L \"$1\" ] || exit 3; "
	       "if [ \"$2\" = 1 ]; then rm -rf -- \"$1\"; elif [ -d \"$1\" ] && [ ! -L \"$1\" ]; "
	       "then rmdir -- \"$1\"; else rm -f -- \"$1\"; fi",
    "no such file",
    NULL,
    0};

/* $2 1: with parents. */
static const file_script mkdir_script = {"mkdir",
					 "sbx-mkdir",
					 PATH_CHECK
					 "chk \"$1\"; if [ \"$2\" = 1 ]; then mkdir -p -- \"$1\"; "
					 "else mkdir -- \"$1\"; fi",
					 NULL,
					 NULL,
					 0};

static const file_script stat_script = {"stat",
					"sbx-stat",
					PATH_CHECK
					"chkp \"$1\"; [ -e \"$1\" ] || [ -L \"$1\" ] || exit 3; "
					"exec stat -c '%f %s %Y %n' -- \"$1\"",
					"no such file",
					NULL,
					0};

static const file_script list_script = {
    "list",
    "sbx-ls",
    PATH_CHECK "chk \"$1\"; [ -e \"$1\" ] || exit 3; [ -d \"$1\" ] || exit 4; "
	       "cd -- \"$1\" || exit 1; for e in * .[!.]* ..?*; do "
	       "[ -e \"$e\" ] || [ -L \"$e\" ] || continue; "
	       "stat -c '%f %s %Y %n' -- \"$e\"; done",
    "no such directory",
    "not a directory",
    0};

static int too_big(const k8s_state *st, const char *path, sbx_error *err)
{
	return sbxs_host->set_error(
	    err, SBX_E_LIMIT, "k8s: read: '%.300s' is larger than max_file_bytes (%llu bytes)",
	    path, (unsigned long long)st->max_file_bytes);
}

/* Runs s on path (a2, a3: its other arguments, NULL when none; stdin: in[in_len] when
 * has_in) and maps its exit status the same for every op: 5 the path leaves the work dir,
 * 3 and 4 the script's messages, any other nonzero an I/O error quoting the first line of
 * its stderr. The output is in c, which the caller frees on every path (collect_free). */
static int run_op(k8s_state *st, const char *id, const file_script *s, const char *path,
		  const char *a2, const char *a3, const void *in, size_t in_len, int has_in,
		  collect *c, sbx_error *err)
{
	int code = 0;
	int rc = k8s_check_id(id, err);
	if (rc != SBX_OK)
		return rc;
	const char *argv[] = {"/bin/sh", "-c", s->text, s->name, path, a2, a3, NULL};
	rc = run_collect(st, id, argv, in, in_len, has_in, c, &code, err);
	if (rc != SBX_OK || code == 0)
		return rc;
	if (code == 5)
		return sbxs_host->set_error(err, SBX_E_PATH,
					    "k8s: %s %s: the path leaves the sandbox work dir",
					    s->op, path);
	if (code == 3 && s->missing)
		return sbxs_host->set_error(err, SBX_E_NO_FILE, "k8s: %s %s: %s", s->op, path,
					    s->missing);
	if (code == 4 && s->wrong_kind)
		return sbxs_host->set_error(err, SBX_E_INVAL, "k8s: %s %s: %s", s->op, path,
					    s->wrong_kind);
	static const char *const kinds[] = {"a FIFO", "a character device", "a block device",
					    "a socket", "not a regular file"};
	if (s->regular && code >= 6 && code <= 10)
		return sbxs_host->set_error(err, SBX_E_INVAL,
					    "k8s: %s: '%.300s' is %s; only regular files can be "
					    "read or written",
					    s->op, path, kinds[code - 6]);
	if (s->regular && code == 11)
		return too_big(st, path, err);
	return sbxs_host->set_error(err, SBX_E_IO, "k8s: %s %s: %s", s->op, path,
				    first_line(&c->err));
}

static void collect_free(collect *c)
{
	sbxs_buf_free(&c->out);
	sbxs_buf_free(&c->err);
}

int k8s_read_file(void *state, const char *id, const char *path, void **data, size_t *len,
		  sbx_error *err)
{
	k8s_state *st = state;
	char cap[32], past[32];
	collect c = {0};
	snprintf(cap, sizeof(cap), "%llu", (unsigned long long)st->max_file_bytes);
	snprintf(past, sizeof(past), "%llu", (unsigned long long)st->max_file_bytes + 1);
	int rc = run_op(st, id, &read_script, path, cap, past, NULL, 0, 0, &c, err);
	if (rc == SBX_OK && c.out.len > st->max_file_bytes)
		rc = too_big(st, path, err);
	if (rc == SBX_OK && !(*data = sbxs_buf_take(&c.out, len)))
		rc = sbxs_nomem(err, K8S_ALIAS, "read");
	collect_free(&c);
	return rc;
}

int k8s_write_file(void *state, const char *id, const char *path, const void *data, size_t len,
		   uint32_t mode, sbx_error *err)
{
	char nbuf[32], mbuf[16];
	collect c = {0};
	snprintf(nbuf, sizeof(nbuf), "%zu", len);
	snprintf(mbuf, sizeof(mbuf), "%o", mode ? mode & 07777 : 0644);
	int rc = run_op(state, id, &write_script, path, nbuf, mbuf, data, len, 1, &c, err);
	collect_free(&c);
	return rc;
}

int k8s_remove_path(void *state, const char *id, const char *path, uint32_t recursive,
		    sbx_error *err)
{
	collect c = {0};
	int rc = run_op(state, id, &remove_script, path, recursive ? "1" : "0", NULL, NULL, 0, 0,
			&c, err);
	collect_free(&c);
	return rc;
}

int k8s_make_dir(void *state, const char *id, const char *path, uint32_t parents, sbx_error *err)
{
	collect c = {0};
	int rc =
	    run_op(state, id, &mkdir_script, path, parents ? "1" : "0", NULL, NULL, 0, 0, &c, err);
	collect_free(&c);
	return rc;
}

/* Parses one `stat -c '%f %s %Y %n'` line into info. */
static int parse_stat_line(const char *line, sbx_file_info *info)
{
	unsigned long mode = 0;
	unsigned long long size = 0;
	long long mtime = 0;
	int off = 0;
	if (sscanf(line, "%lx %llu %lld %n", &mode, &size, &mtime, &off) != 3)
		return -1;
	memset((char *)info + offsetof(sbx_file_info, kind), 0,
	       sizeof(*info) - offsetof(sbx_file_info, kind));
	unsigned long fmt = mode & 0170000;
	info->kind = fmt == 0100000   ? SBX_FILE_REGULAR
		     : fmt == 0040000 ? SBX_FILE_DIR
		     : fmt == 0120000 ? SBX_FILE_SYMLINK
				      : SBX_FILE_OTHER;
	info->mode = (uint32_t)(mode & 07777);
	info->size = size;
	info->mtime = mtime;
	const char *name = line + off;
	const char *slash = strrchr(name, '/');
	if (slash && slash[1])
		name = slash + 1;
	snprintf(info->name, sizeof(info->name), "%s", name);
	return 0;
}

int k8s_stat_file(void *state, const char *id, const char *path, sbx_file_info *info,
		  sbx_error *err)
{
	collect c = {0};
	int rc = run_op(state, id, &stat_script, path, NULL, NULL, NULL, 0, 0, &c, err);
	if (rc == SBX_OK && parse_stat_line(first_line(&c.out), info) != 0)
		rc = sbxs_host->set_error(err, SBX_E_BACKEND,
					  "k8s: stat %s: unreadable stat output", path);
	collect_free(&c);
	return rc;
}

int k8s_list_dir(void *state, const char *id, const char *path, sbx_file_info **entries, size_t *n,
		 sbx_error *err)
{
	collect c = {0};
	sbx_file_info *arr = NULL;
	int rc = run_op(state, id, &list_script, path, NULL, NULL, NULL, 0, 0, &c, err);
	if (rc != SBX_OK)
		goto out;
	size_t lines = 0;
	for (size_t i = 0; i < c.out.len; i++)
		lines += c.out.data[i] == '\n';
	arr = sbxs_host->alloc((lines ? lines : 1) * sizeof(*arr));
	if (!arr) {
		rc = sbxs_nomem(err, K8S_ALIAS, "list");
		goto out;
	}
	size_t k = 0;
	char *save = c.out.data;
	while (save && *save && k < lines) {
		char *nl = strchr(save, '\n');
		if (nl)
			*nl = '\0';
		SBX_INIT_HEADER(arr[k]);
		if (parse_stat_line(save, &arr[k]) == 0)
			k++;
		save = nl ? nl + 1 : NULL;
	}
	*entries = arr;
	*n = k;
	arr = NULL;
out:
	sbxs_host->free(arr);
	collect_free(&c);
	return rc;
}
