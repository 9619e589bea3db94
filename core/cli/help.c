/* The one source of the `sbx` command's help: `sbx COMMAND --help` prints these texts, and
 * sbx-man (built from this file too) writes the manual pages sbx(1), sbx-COMMAND(1),
 * sbx-config(5) and sbx-plugin(7) from them, so the two cannot drift; core_cli_help checks
 * that they agree. */
#include <stddef.h>

#include "help.h"

const char cli_help_main[] =
    "usage: sbx [--registry FILE] [--config FILE] [-v|--verbose] [--log-level LEVEL] COMMAND\n"
    "           [ARGS...]\n"
    "\n"
    "options:\n"
    "  --config FILE       the config ($SBX_CONFIG; default: every data source on `local`)\n"
    "  --registry FILE     the registry of plugins ($SBX_REGISTRY)\n"
    "  -v, --verbose       log info (twice: debug) on stderr\n"
    "  --log-level LEVEL   error, warn (the default), info or debug; same as $SBX_LOG=LEVEL\n"
    "With --json, a command that fails prints {\"error\": {\"status\", \"message\"}} on stdout\n"
    "instead of a line on stderr.\n"
    "\n"
    "commands:\n"
    "  plugins       list sandbox types: alias, path, ABI, state, why one is faulty\n"
    "  config check  validate a config file and show its data sources\n"
    "  create        create a sandbox and print its id\n"
    "  exec          run a command in a sandbox (exit status is the command's); --detach\n"
    "                starts it as a background job and prints the job's id\n"
    "  job           ls, status, logs, wait, kill background jobs\n"
    "  rm            delete sandboxes\n"
    "  pause, resume, status   sandbox lifecycle\n"
    "  file          read, write, ls, stat, mkdir, rm files in a sandbox\n"
    "  ls            list sandboxes in the ledger\n"
    "  gc            delete sandboxes whose owner died or whose TTL passed\n"
    "  rollout       run a JSONL file of tasks, one sandbox per task\n"
    "  session       start, pause, end, show sessions: (user, session) -> sandbox\n"
    "\n"
    "Run 'sbx COMMAND --help' for a command's options. Exit codes: 2 usage or bad input,\n"
    "124 timeout, 125 sbx or backend failure; exec returns the command's own status.\n";

const char cli_help_plugins[] =
    "usage: sbx plugins [--json] [--check]\n"
    "Lists every alias of the registry with its path, ABI, state and, when faulty, why.\n"
    "Each plugin is loaded to report its state.\n"
    "  --check  also start each backend with the config in force and say whether it can be\n"
    "           used: ok (nothing to reach), reachable or unreachable (its engine or\n"
    "           service answers or not), unusable (it cannot start: why), faulty\n";

const char cli_help_config[] =
    "usage: sbx config check FILE\n"
    "Validates FILE (and every plugin key against its plugin) and prints the data sources.\n"
    "Prints one line per data source: its name ('default' is the data_source block) and its\n"
    "sandbox type alias. Exit status 0 when valid; 1 when FILE (or a plugin's check of its\n"
    "keys) is invalid, with the error on stderr; 2 on usage errors.\n";

const char cli_help_create[] =
    "usage: sbx create [--data-source NAME] [--image IMAGE] [--label K=V]... [--env K=V]...\n"
    "                  [--ttl SECONDS] [--owner-pid PID] [--wait SECONDS] [--share-dir DIR]\n"
    "                  [--json]\n"
    "Creates a sandbox and prints its id. The sandbox outlives this command: only its TTL\n"
    "(or the death of --owner-pid) lets 'sbx gc' reap it.\n"
    "--wait: how long to wait for a place under the data source's caps (max_concurrency,\n"
    "max_starting, create_rate, held across every process of the state dir); without it a\n"
    "full cap fails at once.\n"
    "--share-dir: an existing host folder, by its absolute path, that is the sandbox's work\n"
    "dir (backends that can share one: local); rm leaves the folder and its files.\n";

const char cli_help_exec[] =
    "usage: sbx exec [--json] [--timeout SECONDS] [--cwd DIR] [--env K=V]... [--user U]\n"
    "                [--stdin-file FILE | -i] [--stdout-to PATH] [--stderr-to PATH]\n"
    "                [--full] [--detach] ID -- ARGV...\n"
    "       sbx exec [OPTIONS] ID -c 'SHELL COMMAND'\n"
    "Runs a command (argv, or a shell string through bash -c / sh -c) in sandbox ID.\n"
    "  --detach  start it as a background job and print the job's id at once (with --json:\n"
    "            {\"job_id\": ...}); see 'sbx job --help'. The timeout does not apply.\n"
    "  --timeout SECONDS  fractions allowed, 0 for none; default: the data source's timeout\n"
    "  --cwd DIR, --env K=V, --user U   where, with what, and as whom it runs\n"
    "  --stdin-file FILE, -i            stdin from FILE or from this stdin (else /dev/null)\n"
    "  --stdout-to PATH, --stderr-to PATH   the stream into a file in the sandbox instead, as\n"
    "           >PATH would (from --cwd; the same PATH twice is one file); not with --detach\n"
    "  --json   print the whole result as one JSON object (exit_code, signal, timed_out,\n"
    "           duration, stdout, stderr, original_*_length, truncated, output_dir,\n"
    "           stdout_file, stderr_file, *_bytes, *_dropped); bytes that are not UTF-8\n"
    "           become U+FFFD in the JSON strings (the files keep the exact bytes)\n"
    "  --full   write the full stored output instead of the display copy\n"
    "Without --json the display copies (head and tail past output_char_threshold) are\n"
    "written raw to stdout and stderr. Exit status: the command's, 124 when it timed out,\n"
    "128+N when killed by signal N, 125 when sbx or the backend failed (message on stderr),\n"
    "2 on usage errors and malformed ids or unknown aliases.\n";

const char cli_help_rm[] = "usage: sbx rm ID...\n"
			   "Deletes sandboxes; one that is already gone is not an error.\n";

const char cli_help_lifecycle[] =
    "usage: sbx pause ID | sbx resume ID | sbx status [--json] ID\n"
    "status prints running, paused, creating, gone or unknown; --json adds what the backend\n"
    "says about the sandbox (local: its isolation and its writable layer's disk use).\n";

const char cli_help_file[] =
    "usage: sbx file read ID PATH          (bytes to stdout)\n"
    "       sbx file write ID PATH [FILE]   (bytes from FILE, or stdin)\n"
    "       sbx file ls [--json] ID PATH\n"
    "       sbx file stat [--json] ID PATH\n"
    "       sbx file mkdir [-p] ID PATH\n"
    "       sbx file rm [-r] ID PATH\n"
    "Paths are absolute in the sandbox or relative to its work dir; paths that leave the\n"
    "sandbox are refused.\n";

const char cli_help_ls[] =
    "usage: sbx ls [-q] [--json] [-a|--all] [--no-trunc] [--filter KEY=VALUE]...\n"
    "Lists sandboxes recorded in the ledger ($SBX_STATE_DIR/ledger.db): ID, STATE, AGE,\n"
    "DATA SOURCE, OWNER (pid, or detached) and RUN. Without --all, sandboxes that are gone\n"
    "or whose create failed are left out. --json gives each its background jobs as the\n"
    "ledger last saw them (\"jobs\"; 'sbx job ls ID' asks the sandbox).\n"
    "  -q, --quiet         only the ids, one per line\n"
    "  --no-trunc          full ids (the table shows 12 characters of the backend id)\n"
    "  --filter KEY=VALUE  state=, data-source=, alias= or run=; --state S, --data-source D,\n"
    "                      --alias A and --run R say the same\n";

const char cli_help_job[] =
    "usage: sbx job ls ID [--json] [--cached]\n"
    "       sbx job status JOB [--json]\n"
    "       sbx job logs JOB [--stderr] [--follow] [--tail N]\n"
    "       sbx job wait JOB [--timeout SECONDS]\n"
    "       sbx job kill JOB [--signal SIG]\n"
    "Background jobs, started with 'sbx exec --detach ID ...', which prints the JOB id.\n"
    "  ls      the jobs of sandbox ID, oldest first (--cached: the ledger's last seen states,\n"
    "          without asking the sandbox)\n"
    "  status  state (running, exited, killed, lost), exit code or signal, pid, start time,\n"
    "          duration and output bytes so far\n"
    "  logs    the job's stdout (--stderr: its stderr); --tail N the last N lines; --follow\n"
    "          keeps printing what it writes until it ends\n"
    "  wait    waits for the job; exit status: the job's exit code, 128+N when a signal N\n"
    "          killed it, 124 when --timeout passed first (the job keeps running), 125 when\n"
    "          the job was lost (its supervisor died without a status)\n"
    "  kill    sends SIG (a number or a name: TERM, KILL, INT, HUP, ...; default TERM) to\n"
    "          the job's whole tree\n";

const char cli_help_gc[] =
    "usage: sbx gc [--dry-run] [--json]\n"
    "Deletes sandboxes whose owner process died or whose TTL passed, finishes creates and\n"
    "deletes whose process died, and deletes backend objects carrying this state dir's label\n"
    "that the ledger does not hold. Safe while harnesses run: a create or delete in flight,\n"
    "anything made after gc started and any row that changes under it are spared, and every\n"
    "deletion is claimed in the ledger at the moment it is made. Prints one line per\n"
    "sandbox deleted, spared or finished, with the reason, then a count; --json prints a\n"
    "list of {action, id, token, reason, status}.\n";

const char cli_help_rollout[] =
    "usage: sbx rollout [--config FILE] [--output RESULTS.jsonl] [--concurrency N]\n"
    "                   [--wait SECONDS] [--resume] TASKS.jsonl\n"
    "Runs each task of TASKS (JSONL, '-' for stdin) in its own sandbox: create, write its\n"
    "files, run its commands in order (all of them, whatever their exit codes), delete the\n"
    "sandbox, on every path. A task line is an object with:\n"
    "  id           string or integer, unique in the file (required)\n"
    "  commands     list of shell strings, or objects {cmd | argv, timeout, cwd, env}\n"
    "  data_source  name or index of a configured data source (default: the data_source block)\n"
    "  image        image for the sandbox (also read from metadata.docker_image)\n"
    "  files        {path: content} written before the first command\n"
    "  timeout      seconds for each command (default: the data source's timeout)\n"
    "The whole file is checked before anything runs (unknown keys and data sources too);\n"
    "errors name FILE:LINE.\n"
    "  --output FILE     results, one JSON line per task as it finishes (default stdout):\n"
    "                    id, data_source, sandbox_id, ok, infra_error {stage, status,\n"
    "                    message} (null unless sbx or the backend failed), commands (each\n"
    "                    with the fields of 'sbx exec --json' and its command; the per-call\n"
    "                    files go with the sandbox, so their paths are null), timings {queued,\n"
    "                    create, total} in seconds\n"
    "  --resume          with --output: keep the results already in FILE for tasks that\n"
    "                    finished (dropping interrupted ones and torn lines), skip those\n"
    "                    tasks, and append the results of the others\n"
    "  --concurrency N   worker threads (default 8). Each data source's caps still hold\n"
    "                    (max_concurrency, max_starting, create_rate, across every\n"
    "                    process of the state dir): a create past one waits for a place\n"
    "  --wait SECONDS    how long a task's create may wait for that place (default 600);\n"
    "                    past it the task fails with SBX_E_LIMIT\n"
    "Progress goes to stderr when it is a terminal, then a summary line. An interrupt\n"
    "(SIGINT/SIGTERM) starts no new task or command and deletes the running tasks'\n"
    "sandboxes; a second one aborts. Exit status 0 when no task met an infrastructure\n"
    "error, 1 otherwise, 130 when interrupted, 2 for bad input.\n";

const char cli_help_session[] =
    "usage: sbx session start --user U --session S [--data-source NAME] [--image IMAGE]\n"
    "                         [--ttl SECONDS] [--env K=V]... [--asset HOST:SANDBOX]... [--json]\n"
    "       sbx session pause --user U --session S\n"
    "       sbx session end   --user U --session S\n"
    "       sbx session show  --user U --session S [--json]\n"
    "       sbx session ls    [--json]\n"
    "start reconnects to the session's sandbox (resuming it when paused) or, when it has none\n"
    "or it is gone, creates one and uploads the assets (files of this machine, copied to the\n"
    "sandbox path after the first ':'). It prints the sandbox id; --json adds what it did\n"
    "(created, reused, resumed, recreated). pause keeps the record, end destroys the sandbox\n"
    "and forgets the session. Environment variables are never recorded.\n";

/* Manual pages only: the configuration file and writing a plugin. */
const char cli_help_config_file[] =
    "sbx reads one YAML file: --config FILE, else $SBX_CONFIG, else the built-in default\n"
    "(every data source on the `local` backend).\n"
    "\n"
    "data_source:              # defaults for every data source\n"
    "  sandbox:\n"
    "    type: local           # alias from the registry; `none` or empty: no sandbox\n"
    "    timeout: 30           # default exec timeout, seconds\n"
    "    max_concurrency: 64   # live sandboxes for this data source\n"
    "data_sources:\n"
    "  - name: swe\n"
    "    sandbox:\n"
    "      type: docker\n"
    "      image: localhost/sbx-busybox:latest\n"
    "\n"
    "NexAU's `sandbox_config:` block is accepted as the default block. The host's policy\n"
    "keys are type, timeout, max_concurrency, output_char_threshold, truncate_head_chars,\n"
    "truncate_tail_chars, output_max_bytes, ttl and auto_resume; every other key goes to the\n"
    "plugin of `type`, which declares its keys, so a misspelt key is an error naming the\n"
    "file, the line and the valid keys before any sandbox starts. ${env.NAME} interpolates\n"
    "an environment variable; secrets are never logged or stored.\n"
    "\n"
    "The registry maps aliases to plugin files: --registry FILE, else $SBX_REGISTRY, else\n"
    "the build tree's, else the installed <sysconfdir>/sbx/registry.yaml, plus the files in\n"
    "registry.d/ beside it, read in name order. State (per-call output, the ledger) lives in\n"
    "$SBX_STATE_DIR, else $XDG_STATE_HOME/sbx, else ~/.local/state/sbx. $SBX_LOG sets the\n"
    "log level (error, warn, info, debug).\n";

const char cli_help_plugin_author[] =
    "A backend is one shared object exporting sbx_plugin_register, built against the\n"
    "installed headers (<sbx/plugin.h> is the manual and holds the ABI change log) with the\n"
    "version script that keeps every other symbol hidden:\n"
    "\n"
    "  cc -shared -fPIC -fvisibility=hidden $(pkg-config --cflags sbx) \\\n"
    "     -Wl,--version-script=$(pkg-config --variable=pluginmap sbx) -o sbx-mine.so mine.c\n"
    "\n"
    "or in CMake: find_package(Sbx) and target_link_libraries(... Sbx::headers) with\n"
    "-Wl,--version-script=${SBX_PLUGIN_MAP}. sbx_plugin_register receives the host's services\n"
    "table and registers one descriptor per alias; the host checks the ABI (major equal,\n"
    "minor not newer) before any plugin code runs and keeps a plugin that fails to load as\n"
    "faulty, with its reason, instead of failing. Select the plugin with a file in\n"
    "registry.d/ naming its alias and path, and `type: <alias>` in a config. The example\n"
    "plugin `custom` (plugins/custom in the source, the examples of libsbx-dev) builds both\n"
    "ways.\n";

const cli_help_page cli_help_pages[] = {

    {"plugins", "list sandbox types: alias, path, ABI, state, why one is faulty", cli_help_plugins},

    {"config", "validate a config file and show its data sources", cli_help_config},

    {"create", "create a sandbox and print its id", cli_help_create},

    {"exec", "run a command in a sandbox (exit status is the command's)", cli_help_exec},

    {"job", "ls, status, logs, wait, kill background jobs", cli_help_job},

    {"rm", "delete sandboxes", cli_help_rm},

    {"pause", "pause, resume and show the status of a sandbox", cli_help_lifecycle},

    {"file", "read, write, ls, stat, mkdir, rm files in a sandbox", cli_help_file},

    {"ls", "list sandboxes in the ledger", cli_help_ls},

    {"gc", "delete sandboxes whose owner died or whose TTL passed", cli_help_gc},

    {"rollout", "run a JSONL file of tasks, one sandbox per task", cli_help_rollout},

    {"session", "start, pause, end, show sessions: (user, session) -> sandbox", cli_help_session},

};
const size_t cli_help_n_pages = sizeof(cli_help_pages) / sizeof(cli_help_pages[0]);
