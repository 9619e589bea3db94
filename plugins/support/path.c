/* Lexical sandbox paths (see <sbx/support/path.h>). */
#include <string.h>

#include <sbx/support/path.h>

int sbxs_path_push(char *buf, size_t cap, const char *c, size_t n)
{
	size_t l = strlen(buf);
	if (n == 0 || (n == 1 && c[0] == '.'))
		return 1;
	if (n == 2 && c[0] == '.' && c[1] == '.') {
		while (l > 1 && buf[l - 1] != '/')
			l--;
		if (l > 1)
			l--;
		buf[l] = '\0';
		return 1;
	}
	if (l + (l > 1) + n + 1 > cap)
		return 0;
	if (l > 1)
		buf[l++] = '/';
	memcpy(buf + l, c, n);
	buf[l + n] = '\0';
	return 1;
}

int sbxs_path_normalize(const char *p, char *buf, size_t cap)
{
	char out[4096];
	if (p[0] != '/' || cap < 2)
		return 0;
	memcpy(out, "/", 2);
	for (const char *s = p; *s;) {
		size_t n = strcspn(s, "/");
		if (!sbxs_path_push(out, sizeof(out), s, n))
			return 0;
		s += n;
		s += *s == '/';
	}
	size_t l = strlen(out);
	if (l + 1 > cap)
		return 0;
	memcpy(buf, out, l + 1);
	return 1;
}

int sbxs_path_beneath(const char *root, const char *p)
{
	size_t n = strlen(root);
	if (n == 1 && root[0] == '/')
		return p[0] == '/';
	return strncmp(p, root, n) == 0 && (p[n] == '\0' || p[n] == '/');
}
