/* The completion queue (host.h, ABI 1.2) on `local`, through the public API: a sandbox's
 * lifecycle and files as completions, the descriptor's readiness, the worker bound, failed
 * calls and refused ones, and freeing a queue with calls running and completions untaken
 * (the sanitizers see the leaks a wrong free would leave). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sbx/host.h>

#ifndef BUILD_DIR
#error BUILD_DIR must name the build folder of these tests
#endif

static sbx_host *host;
static sbx_queue *queue;
static sbx_error err;

static void start(void)
{
	char dir[600];
	snprintf(dir, sizeof(dir), "%s/queue-XXXXXX", BUILD_DIR);
	cr_assert_not_null(mkdtemp(dir));
	sbx_host_options o = {.config_text = "data_source:\n  sandbox:\n    type: local\n",
			      .state_dir = dir};
	SBX_INIT_HEADER(o);
	cr_assert_eq(sbx_host_new(&o, &host, &err), SBX_OK, "%s", err.message);
}

static void stop(void)
{
	sbx_queue_free(queue);
	queue = NULL;
	sbx_host_free(host);
	host = NULL;
}

TestSuite(queue, .init = start, .fini = stop);

static int readable(int timeout_ms)
{
	struct pollfd p = {.fd = sbx_queue_fd(queue), .events = POLLIN};
	int n = poll(&p, 1, timeout_ms);
	cr_assert_geq(n, 0);
	return n == 1 && (p.revents & POLLIN);
}

/* Waits for the descriptor, then takes exactly one completion. */
static sbx_completion next(void)
{
	sbx_completion c;
	size_t n = 0;
	for (int i = 0; i < 600 && n == 0; i++) {
		readable(100);
		SBX_INIT_HEADER(c);
		cr_assert_eq(sbx_queue_take(queue, &c, 1, &n, &err), SBX_OK, "%s", err.message);
	}
	cr_assert_eq(n, 1, "no completion within a minute");
	return c;
}

static void submit(sbx_call *c)
{
	SBX_INIT_HEADER(*c);
	cr_assert_eq(sbx_queue_submit(queue, c, &err), SBX_OK, "%s", err.message);
}

static void new_queue(uint32_t workers)
{
	cr_assert_eq(sbx_queue_new(host, workers, &queue, &err), SBX_OK, "%s", err.message);
	cr_assert_geq(sbx_queue_fd(queue), 0);
}

static void create_one(char id[SBX_ID_MAX])
{
	sbx_call c = {.op = SBX_CALL_CREATE, .tag = 1};
	submit(&c);
	sbx_completion d = next();
	cr_assert_eq(d.status, SBX_OK, "%s", d.err.message);
	cr_assert_eq(d.op, SBX_CALL_CREATE);
	cr_assert_eq(d.tag, 1);
	cr_assert(strncmp(d.id, "local:", 6) == 0, "id %s", d.id);
	snprintf(id, SBX_ID_MAX, "%s", d.id);
}

Test(queue, lifecycle_and_files_as_completions)
{
	new_queue(4);
	cr_assert_eq(readable(0), 0, "readable before any call");
	char id[SBX_ID_MAX];
	create_one(id);

	sbx_exec_opts e = {.shell = "echo hi; echo oops >&2; exit 3"};
	SBX_INIT_HEADER(e);
	sbx_call x = {.op = SBX_CALL_EXEC, .tag = 42, .id = id, .exec = &e};
	submit(&x);
	sbx_completion d = next();
	cr_assert_eq(d.status, SBX_OK, "%s", d.err.message);
	cr_assert_eq(d.op, SBX_CALL_EXEC);
	cr_assert_eq(d.tag, 42);
	cr_assert_not_null(d.exec);
	cr_assert_eq(d.exec->exit_code, 3);
	cr_assert_str_eq(d.exec->stdout_text, "hi\n");
	cr_assert_str_eq(d.exec->stderr_text, "oops\n");
	sbx_exec_result_free(d.exec);

	sbx_call w = {.op = SBX_CALL_WRITE_FILE,
		      .tag = 7,
		      .id = id,
		      .path = "dir/f.txt",
		      .data = "payload",
		      .len = 7,
		      .mode = 0600};
	submit(&w);
	d = next();
	cr_assert_eq(d.status, SBX_OK, "%s", d.err.message);
	cr_assert_eq(d.tag, 7);
	sbx_call r = {.op = SBX_CALL_READ_FILE, .tag = 8, .id = id, .path = "dir/f.txt"};
	submit(&r);
	d = next();
	cr_assert_eq(d.status, SBX_OK, "%s", d.err.message);
	cr_assert_eq(d.op, SBX_CALL_READ_FILE);
	cr_assert_eq(d.len, 7);
	cr_assert(memcmp(d.data, "payload", 7) == 0);
	sbx_free(d.data);

	sbx_call k = {.op = SBX_CALL_DESTROY, .tag = 9, .id = id};
	submit(&k);
	d = next();
	cr_assert_eq(d.status, SBX_OK, "%s", d.err.message);
	cr_assert_eq(d.op, SBX_CALL_DESTROY);
	uint32_t state = 0;
	cr_assert_eq(sbx_status(host, id, &state, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(state, SBX_STATE_GONE);
	size_t n = 1;
	sbx_completion none;
	SBX_INIT_HEADER(none);
	cr_assert_eq(sbx_queue_take(queue, &none, 1, &n, &err), SBX_OK);
	cr_assert_eq(n, 0);
}

/* Failed calls come back as completions with the blocking call's status and message. */
Test(queue, failures_are_completions)
{
	new_queue(2);
	sbx_exec_opts e = {.shell = "true"};
	SBX_INIT_HEADER(e);
	sbx_call x = {.op = SBX_CALL_EXEC, .tag = 5, .id = "nosuchalias:abc", .exec = &e};
	submit(&x);
	sbx_completion d = next();
	sbx_error direct;
	sbx_exec_result *res = NULL;
	int rc = sbx_exec(host, "nosuchalias:abc", &e, &res, &direct);
	cr_assert_neq(rc, SBX_OK);
	cr_assert_eq(d.status, rc);
	cr_assert_str_eq(d.err.message, direct.message);
	cr_assert_null(d.exec);

	sbx_create_opts c = {.data_source = "no-such-source"};
	SBX_INIT_HEADER(c);
	sbx_call cc = {.op = SBX_CALL_CREATE, .tag = 6, .create = &c};
	submit(&cc);
	d = next();
	cr_assert_eq(d.status, SBX_E_CONFIG, "%d: %s", d.status, d.err.message);
	cr_assert_eq(d.id[0], '\0');
}

Test(queue, bad_calls_are_refused_at_submit)
{
	cr_assert_eq(sbx_queue_new(host, 0, &queue, &err), SBX_E_INVAL);
	cr_assert_str_eq(err.message, "queue: workers must be 1 to 1024, not 0");
	cr_assert_null(queue);
	cr_assert_eq(sbx_queue_new(host, 1025, &queue, &err), SBX_E_INVAL);
	new_queue(1);
	sbx_call c = {.op = 99, .id = "local:x"};
	SBX_INIT_HEADER(c);
	cr_assert_eq(sbx_queue_submit(queue, &c, &err), SBX_E_INVAL);
	cr_assert_str_eq(err.message, "queue: unknown op 99");
	c.op = SBX_CALL_DESTROY;
	c.id = NULL;
	cr_assert_eq(sbx_queue_submit(queue, &c, &err), SBX_E_INVAL);
	cr_assert_str_eq(err.message, "queue: op 3 needs a sandbox id");
	c.op = SBX_CALL_EXEC;
	c.id = "local:x";
	cr_assert_eq(sbx_queue_submit(queue, &c, &err), SBX_E_INVAL);
	cr_assert_str_eq(err.message, "queue: an exec call needs exec");
	c.op = SBX_CALL_READ_FILE;
	cr_assert_eq(sbx_queue_submit(queue, &c, &err), SBX_E_INVAL);
	cr_assert_str_eq(err.message, "queue: a file call needs a path");
	c.op = SBX_CALL_DESTROY;
	c.struct_size = 8;
	cr_assert_eq(sbx_queue_submit(queue, &c, &err), SBX_E_INVAL);
	cr_assert(strstr(err.message, "sbx_call struct has size 8") != NULL, "%s", err.message);
	sbx_completion d;
	SBX_INIT_HEADER(d);
	d.struct_size = 16;
	size_t n = 1;
	cr_assert_eq(sbx_queue_take(queue, &d, 1, &n, &err), SBX_E_INVAL);
	cr_assert_eq(n, 0);
	cr_assert(strstr(err.message, "sbx_completion struct has size 16") != NULL, "%s",
		  err.message);
	cr_assert_eq(readable(0), 0, "a refused call left a completion");
}

/* Six commands on two workers: never more than two run at once, and all six finish. Each
 * command marks itself running, records how many are, and unmarks itself. */
Test(queue, workers_bound_the_calls_in_flight)
{
	new_queue(2);
	char id[SBX_ID_MAX];
	create_one(id);
	sbx_exec_opts e = {.shell = "mkdir -p run && touch run/$$ && ls run | wc -l >> seen && "
				    "sleep 0.3 && rm run/$$"};
	SBX_INIT_HEADER(e);
	for (int i = 0; i < 6; i++) {
		sbx_call x = {.op = SBX_CALL_EXEC, .tag = 100 + (uint64_t)i, .id = id, .exec = &e};
		submit(&x);
	}
	int tags = 0;
	for (int i = 0; i < 6; i++) {
		sbx_completion d = next();
		cr_assert_eq(d.status, SBX_OK, "%s", d.err.message);
		cr_assert_eq(d.exec->exit_code, 0, "%s", d.exec->stderr_text);
		tags |= 1 << (d.tag - 100);
		sbx_exec_result_free(d.exec);
	}
	cr_assert_eq(tags, 0x3f);
	void *data = NULL;
	size_t len = 0;
	cr_assert_eq(sbx_read_file(host, id, "seen", &data, &len, &err), SBX_OK, "%s", err.message);
	int lines = 0;
	for (char *p = data, *end = (char *)data + len; p < end; p++)
		if (*p == '\n') {
			lines++;
		} else if (*p != ' ') {
			cr_assert(*p == '1' || *p == '2', "%d commands ran at once: %.*s", *p - '0',
				  (int)len, (char *)data);
		}
	sbx_free(data);
	cr_assert_eq(lines, 6);
	cr_assert_eq(sbx_destroy(host, id, &err), SBX_OK, "%s", err.message);
}

/* A take of one leaves the rest waiting and the descriptor readable: a loop that takes one
 * completion per wake gets them all. The pause after the first wake lets the others finish
 * first, so that several wait at once (were the descriptor not re-armed, poll would then time
 * out); were they slower, each would wake the loop itself and the case still holds. */
Test(queue, descriptor_stays_readable_while_completions_wait)
{
	new_queue(3);
	char id[SBX_ID_MAX];
	create_one(id);
	sbx_exec_opts e = {.shell = "echo x"};
	SBX_INIT_HEADER(e);
	for (int i = 0; i < 3; i++) {
		sbx_call x = {.op = SBX_CALL_EXEC, .tag = (uint64_t)i, .id = id, .exec = &e};
		submit(&x);
	}
	cr_assert(readable(60000), "no completion within a minute");
	usleep(500 * 1000);
	for (int i = 0; i < 3; i++) {
		cr_assert(readable(60000), "not readable with %d completions to come", 3 - i);
		sbx_completion d;
		SBX_INIT_HEADER(d);
		size_t n = 0;
		cr_assert_eq(sbx_queue_take(queue, &d, 1, &n, &err), SBX_OK, "%s", err.message);
		cr_assert_eq(n, 1, "a wake with nothing to take, %d to come", 3 - i);
		cr_assert_str_eq(d.exec->stdout_text, "x\n");
		sbx_exec_result_free(d.exec);
	}
	sbx_completion none[2];
	SBX_INIT_HEADER(none[0]);
	size_t n = 1;
	cr_assert_eq(sbx_queue_take(queue, none, 2, &n, &err), SBX_OK);
	cr_assert_eq(n, 0);
	cr_assert_eq(sbx_destroy(host, id, &err), SBX_OK, "%s", err.message);
}

/* Freeing a queue runs what was submitted to its end and frees completions no one took: the
 * sandbox the queued calls wrote into holds all their files, and the sanitizers find no
 * leak of the untaken results. */
Test(queue, free_finishes_submitted_calls_and_frees_untaken_results)
{
	new_queue(1);
	char id[SBX_ID_MAX];
	create_one(id);
	sbx_exec_opts e[3];
	const char *cmds[] = {"sleep 0.2; echo a > a", "echo b > b", "echo c > c"};
	for (int i = 0; i < 3; i++) {
		e[i] = (sbx_exec_opts){.shell = cmds[i]};
		SBX_INIT_HEADER(e[i]);
		sbx_call x = {.op = SBX_CALL_EXEC, .id = id, .exec = &e[i]};
		submit(&x);
	}
	sbx_queue_free(queue);
	queue = NULL;
	for (int i = 0; i < 3; i++) {
		sbx_file_info st;
		SBX_INIT_HEADER(st);
		char name[2] = {(char)('a' + i), 0};
		cr_assert_eq(sbx_stat(host, id, name, &st, &err), SBX_OK, "%s: %s", name,
			     err.message);
		cr_assert_eq(st.size, 2);
	}
	cr_assert_eq(sbx_destroy(host, id, &err), SBX_OK, "%s", err.message);
}

/* The queue's threads ("sbx-queue") run with SIGINT and SIGTERM blocked: a harness's signal
 * handlers stay on its own threads. */
Test(queue, workers_block_the_callers_signals)
{
	new_queue(2);
	char id[SBX_ID_MAX];
	create_one(id); /* a worker now exists, idle */
	DIR *d = opendir("/proc/self/task");
	cr_assert_not_null(d);
	int workers = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char path[300], line[256] = "";
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		int named = fgets(line, sizeof(line), f) && strcmp(line, "sbx-queue\n") == 0;
		fclose(f);
		if (!named)
			continue;
		workers++;
		snprintf(path, sizeof(path), "/proc/self/task/%s/status", e->d_name);
		f = fopen(path, "r");
		cr_assert_not_null(f);
		unsigned long long blocked = 0;
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "SigBlk: %llx", &blocked) == 1)
				break;
		fclose(f);
		cr_assert(blocked & (1ULL << (SIGINT - 1)), "SigBlk %llx", blocked);
		cr_assert(blocked & (1ULL << (SIGTERM - 1)), "SigBlk %llx", blocked);
	}
	closedir(d);
	cr_assert_eq(workers, 1);
	cr_assert_eq(sbx_destroy(host, id, &err), SBX_OK, "%s", err.message);
}

/* Sixty lifecycles at once on eight workers, taken in batches of five: every sandbox gets its
 * own id, every command its own output, every destroy succeeds. */
Test(queue, many_lifecycles_in_batches)
{
	enum { N = 60 };
	new_queue(8);
	static char ids[N][SBX_ID_MAX];
	static char cmds[N][32];
	static sbx_exec_opts ex[N];
	int stage[N] = {0}, done = 0;
	for (int i = 0; i < N; i++) {
		sbx_call c = {.op = SBX_CALL_CREATE, .tag = (uint64_t)i};
		submit(&c);
	}
	while (done < N) {
		cr_assert(readable(60000), "stalled with %d of %d done", done, N);
		sbx_completion got[5];
		SBX_INIT_HEADER(got[0]);
		size_t n = 0;
		cr_assert_eq(sbx_queue_take(queue, got, 5, &n, &err), SBX_OK, "%s", err.message);
		for (size_t k = 0; k < n; k++) {
			sbx_completion *d = &got[k];
			int i = (int)d->tag;
			cr_assert_eq(d->status, SBX_OK, "%d: %s", i, d->err.message);
			cr_assert_eq(d->op, (uint32_t)(stage[i] + 1));
			if (d->op == SBX_CALL_CREATE) {
				snprintf(ids[i], SBX_ID_MAX, "%s", d->id);
				snprintf(cmds[i], sizeof(cmds[i]), "echo task-%d", i);
				ex[i] = (sbx_exec_opts){.shell = cmds[i]};
				SBX_INIT_HEADER(ex[i]);
				sbx_call x = {.op = SBX_CALL_EXEC,
					      .tag = (uint64_t)i,
					      .id = ids[i],
					      .exec = &ex[i]};
				submit(&x);
			} else if (d->op == SBX_CALL_EXEC) {
				char want[32];
				snprintf(want, sizeof(want), "task-%d\n", i);
				cr_assert_str_eq(d->exec->stdout_text, want);
				sbx_exec_result_free(d->exec);
				sbx_call x = {
				    .op = SBX_CALL_DESTROY, .tag = (uint64_t)i, .id = ids[i]};
				submit(&x);
			} else {
				done++;
			}
			stage[i]++;
		}
	}
	for (int i = 0; i < N; i++)
		for (int j = i + 1; j < N; j++)
			cr_assert_str_neq(ids[i], ids[j]);
}

/* A burst of submits after a worker went idle still runs on as many workers as it has
 * calls: four commands that each wait (20 s at most) until all four are running see four.
 * Counting a signalled idle worker as free for every call of the burst left them to one. */
Test(queue, a_burst_spreads_over_the_workers)
{
	new_queue(4);
	char id[SBX_ID_MAX];
	create_one(id); /* one worker, idle now */
	sbx_exec_opts e = {.shell = "mkdir -p run && touch run/$$ && i=0; "
				    "while [ $(ls run | wc -l) -lt 4 ] && [ $i -lt 400 ]; do "
				    "sleep 0.05; i=$((i + 1)); done; ls run | wc -l"};
	SBX_INIT_HEADER(e);
	for (int i = 0; i < 4; i++) {
		sbx_call x = {.op = SBX_CALL_EXEC, .tag = (uint64_t)i, .id = id, .exec = &e};
		submit(&x);
	}
	for (int i = 0; i < 4; i++) {
		sbx_completion d = next();
		cr_assert_eq(d.status, SBX_OK, "%s", d.err.message);
		cr_assert_str_eq(d.exec->stdout_text, "4\n", "a command saw %s running",
				 d.exec->stdout_text);
		sbx_exec_result_free(d.exec);
	}
	cr_assert_eq(sbx_destroy(host, id, &err), SBX_OK, "%s", err.message);
}
