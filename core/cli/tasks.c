/* One line of a rollout task file: JSON, the shape of a task, an id no earlier line used.
 * Kept apart from the runner so the fuzzer (tests/fuzz/fuzz_tasks.c) reaches it alone. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char *const task_keys[] = {"id",    "commands", "data_source", "image",
					"files", "timeout",  "metadata",    NULL};
static const char *const command_keys[] = {"cmd", "argv", "timeout", "cwd", "env", NULL};

static int known_key(const char *key, const char *const *keys)
{
	for (size_t i = 0; keys[i]; i++)
		if (strcmp(keys[i], key) == 0)
			return 1;
	return 0;
}

/* "unknown key 'K' (HINT)" into why. */
static const char *unknown_key(const char *key, const char *hint, char *why, size_t cap)
{
	snprintf(why, cap, "unknown key '%.64s' (%s)", key, hint);
	return why;
}

/* What is wrong with one entry of 'commands', or NULL. */
static const char *command_problem(json_t *v, char *why, size_t cap)
{
	if (json_is_string(v))
		return NULL;
	if (!json_is_object(v))
		return "each command must be a string or an object with 'cmd' or 'argv'";
	json_t *cmd = json_object_get(v, "cmd"), *argv = json_object_get(v, "argv");
	json_t *timeout = json_object_get(v, "timeout"), *cwd = json_object_get(v, "cwd");
	json_t *env = json_object_get(v, "env");
	const char *key;
	json_t *val;
	json_object_foreach(v, key, val) if (!known_key(key, command_keys)) return unknown_key(
	    key, "a command object has cmd, argv, timeout, cwd, env", why, cap);
	if (!json_is_string(cmd) == !json_is_array(argv))
		return "a command object needs exactly one of 'cmd' (a string) or 'argv' (a list)";
	if (argv && json_array_size(argv) == 0)
		return "'argv' must not be empty";
	size_t i;
	json_t *a;
	json_array_foreach(argv, i, a) if (!json_is_string(a)) return "'argv' must hold strings";
	if (timeout && !(json_is_number(timeout) && json_number_value(timeout) >= 0))
		return "a command's 'timeout' must be a number of seconds >= 0";
	if (cwd && !json_is_string(cwd))
		return "a command's 'cwd' must be a string";
	if (env && !json_is_object(env))
		return "a command's 'env' must be an object {NAME: value}";
	const char *k;
	json_object_foreach(env, k,
			    a) if (!json_is_string(a)) return "'env' values must be strings";
	if (env && json_object_size(env) > 64)
		return "a command's 'env' holds at most 64 variables";
	return NULL;
}

/* What is wrong with the task, or NULL. */
static const char *task_problem(json_t *t, char *why, size_t cap)
{
	json_t *cmds = json_object_get(t, "commands");
	json_t *id = json_object_get(t, "id");
	json_t *ds = json_object_get(t, "data_source");
	json_t *files = json_object_get(t, "files");
	json_t *image = json_object_get(t, "image");
	json_t *meta = json_object_get(t, "metadata");
	json_t *timeout = json_object_get(t, "timeout");
	if (!json_is_object(t))
		return "a task must be a JSON object";
	if (!id || !(json_is_string(id) || json_is_integer(id)))
		return "'id' (a string or integer) is required";
	if (!json_is_array(cmds))
		return "'commands' must be a list";
	if (ds && !json_is_string(ds) && !json_is_integer(ds))
		return "'data_source' must be a name or an index";
	if (files && !json_is_object(files))
		return "'files' must be an object {path: content}";
	if (image && !json_is_string(image))
		return "'image' must be a string";
	if (meta && !json_is_object(meta))
		return "'metadata' must be an object";
	if (timeout && !(json_is_number(timeout) && json_number_value(timeout) >= 0))
		return "'timeout' must be a number of seconds >= 0";
	if (meta && json_object_get(meta, "docker_image") &&
	    !json_is_string(json_object_get(meta, "docker_image")))
		return "'metadata.docker_image' must be a string";
	const char *key;
	json_t *v;
	/* A misspelt key ('timout', 'comands') would silently change the task. */
	json_object_foreach(t, key, v) if (!known_key(key, task_keys)) return unknown_key(
	    key, "a task has id, commands, data_source, image, files, timeout, metadata", why, cap);
	json_object_foreach(files, key, v) if (!json_is_string(v)) return "every value of 'files' "
									  "must be a string";
	size_t i;
	json_array_foreach(cmds, i, v)
	{
		const char *bad = command_problem(v, why, cap);
		if (bad)
			return bad;
	}
	return NULL;
}

/* Records the task's id in seen (id -> line); the reason when an earlier line has it, since
 * results are matched to tasks by id. */
static const char *repeated_id(json_t *seen, json_t *t, size_t line, char *why, size_t cap)
{
	json_t *id = json_object_get(t, "id");
	/* '#' for integers and '$' for strings keep 7 and "7" distinct. */
	json_t *key = json_is_integer(id) ? json_sprintf("#%lld", (long long)json_integer_value(id))
					  : json_sprintf("$%s", json_string_value(id));
	if (!key)
		return "out of memory";
	const char *k = json_string_value(key), *bad = NULL;
	json_t *prev = json_object_get(seen, k);
	if (prev) {
		snprintf(why, cap, "id %s%.200s%s repeats line %lld", *k == '$' ? "'" : "", k + 1,
			 *k == '$' ? "'" : "", (long long)json_integer_value(prev));
		bad = why;
	} else if (json_object_set_new(seen, k, json_integer((json_int_t)line)) != 0) {
		bad = "out of memory";
	}
	json_decref(key);
	return bad;
}

json_t *task_parse(const char *line, size_t len, size_t lineno, json_t *seen, char *why, size_t cap)
{
	/* A NUL byte would end the line for a C string and hide what follows it. */
	const char *nul = memchr(line, '\0', len);
	if (nul) {
		snprintf(why, cap, "NUL byte at column %zu", (size_t)(nul - line) + 1);
		return NULL;
	}
	json_error_t jerr;
	json_t *t = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!t) {
		snprintf(why, cap, "not valid JSON: %s", jerr.text);
		return NULL;
	}
	char buf[300];
	const char *bad = task_problem(t, buf, sizeof(buf));
	if (!bad)
		bad = repeated_id(seen, t, lineno, buf, sizeof(buf));
	if (!bad)
		return t;
	snprintf(why, cap, "%s", bad);
	json_decref(t);
	return NULL;
}
