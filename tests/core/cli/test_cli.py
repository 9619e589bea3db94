import json
import os
import subprocess
import tempfile
import unittest

SBX = os.environ["SBX_BIN"]
FIXTURES = os.environ["SBX_FIXTURE_REGISTRY"]
TMP = os.environ.get("CLI_TMP", tempfile.gettempdir())


def run(*args, registry=FIXTURES, config=None, stdin=None, env_extra=None):
    env = dict(os.environ)
    env["SBX_STATE_DIR"] = os.path.join(TMP, "state")
    env.pop("SBX_REGISTRY", None)
    env.pop("SBX_CONFIG", None)
    if env_extra:
        env.update(env_extra)
    cmd = [SBX]
    if registry:
        cmd += ["--registry", registry]
    if config:
        cmd += ["--config", config]
    p = subprocess.run(cmd + list(args), input=stdin, capture_output=True, env=env,
                       timeout=120)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def write(name, text):
    path = os.path.join(TMP, name)
    with open(path, "w") as f:
        f.write(text)
    return path


OK_CONFIG = None


def setUpModule():
    global OK_CONFIG
    os.makedirs(TMP, exist_ok=True)
    OK_CONFIG = write("ok.yaml", "data_source:\n  sandbox:\n    type: ok\n")


class Usage(unittest.TestCase):
    def test_no_command_is_a_usage_error(self):
        rc, out, err = run()
        self.assertEqual(rc, 2)
        self.assertIn("sbx: sbx: no command given", err)

    def test_unknown_command(self):
        rc, _, err = run("frobnicate")
        self.assertEqual(rc, 2)
        self.assertIn("unknown command 'frobnicate'", err)

    def test_every_subcommand_has_help(self):
        for sub in ["plugins", "config", "create", "exec", "rm", "pause", "resume", "status",
                    "file", "ls", "gc", "rollout"]:
            rc, out, err = run(sub, "--help")
            self.assertEqual((rc, err), (0, ""), sub)
            self.assertTrue(out.startswith("usage: sbx "), (sub, out))

    def test_registry_option_needs_a_value(self):
        rc, _, err = run("plugins", registry=None, env_extra=None) if False else (None, None, None)
        p = subprocess.run([SBX, "--registry"], capture_output=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn(b"--registry needs a FILE argument", p.stderr)

    def test_exec_without_command(self):
        rc, _, err = run("exec", "ok:ok-1", config=OK_CONFIG)
        self.assertEqual(rc, 2)
        self.assertIn("missing command: use -- ARGV... or -c 'SHELL'", err)

    def test_bad_timeout(self):
        rc, _, err = run("exec", "--timeout", "soon", "ok:ok-1", "-c", "x")
        self.assertEqual(rc, 2)
        self.assertIn("--timeout wants seconds >= 0, got 'soon'", err)


class Exec(unittest.TestCase):
    def setUp(self):
        rc, out, err = run("create", config=OK_CONFIG)
        self.assertEqual(rc, 0, err)
        self.id = out.strip()

    def tearDown(self):
        run("rm", self.id, config=OK_CONFIG)

    def test_create_prints_an_alias_prefixed_id(self):
        self.assertRegex(self.id, r"^ok:ok-\d+$")

    def test_exit_codes(self):
        self.assertEqual(run("exec", self.id, "-c", "exit 3", config=OK_CONFIG)[0], 3)
        self.assertEqual(run("exec", self.id, "-c", "exit 0", config=OK_CONFIG)[0], 0)
        rc, out, err = run("exec", self.id, "-c", "timeout", config=OK_CONFIG)
        self.assertEqual((rc, out), (124, "partial\n"))
        self.assertIn("timed out", err)
        self.assertEqual(run("exec", self.id, "-c", "kill", config=OK_CONFIG)[0], 128 + 9)

    def test_argv_and_output(self):
        rc, out, err = run("exec", self.id, "--", "echo", "a b", config=OK_CONFIG)
        self.assertEqual(rc, 0, err)
        self.assertIn("a b", out)
        rc, out, err = run("exec", self.id, "-c", "stderr", config=OK_CONFIG)
        self.assertEqual(err, "err\n")

    def test_json_shape(self):
        rc, out, err = run("exec", "--json", self.id, "-c", "exit 5", config=OK_CONFIG)
        self.assertEqual(rc, 5)
        r = json.loads(out)
        for key in ["exit_code", "signal", "timed_out", "duration", "stdout", "stderr",
                    "truncated", "original_stdout_length", "original_stderr_length",
                    "output_dir", "stdout_file", "stderr_file", "stdout_bytes",
                    "stderr_bytes"]:
            self.assertIn(key, r)
        self.assertEqual((r["exit_code"], r["timed_out"], r["truncated"]), (5, False, False))

    def test_stdin(self):
        rc, out, _ = run("exec", "-i", self.id, "-c", "cat", config=OK_CONFIG, stdin=b"piped\n")
        self.assertEqual((rc, out), (0, "piped\n"))

    def test_status_and_ls(self):
        rc, out, _ = run("status", self.id, config=OK_CONFIG)
        self.assertEqual((rc, out), (0, "running\n"))
        rc, out, _ = run("ls", "--json", config=OK_CONFIG)
        self.assertEqual(rc, 0)
        rows = [r for r in json.loads(out) if r["id"] == self.id]
        self.assertEqual(len(rows), 1)
        self.assertEqual((rows[0]["state"], rows[0]["owner_pid"]), ("running", 0))


class Errors(unittest.TestCase):
    def test_malformed_id_exits_2(self):
        rc, _, err = run("exec", "nocolon", "-c", "x", config=OK_CONFIG)
        self.assertEqual(rc, 2)
        self.assertIn("malformed sandbox id 'nocolon'", err)

    def test_unknown_alias_lists_known_ones(self):
        rc, _, err = run("exec", "zzz:1", "-c", "x", config=OK_CONFIG)
        self.assertEqual(rc, 2)
        self.assertIn("zzz", err)
        self.assertIn("ok", err)

    def test_faulty_plugin_is_infra(self):
        cfg = write("initfail.yaml", "data_source:\n  sandbox:\n    type: initfail\n")
        rc, _, err = run("create", config=cfg)
        self.assertEqual(rc, 125)
        self.assertIn("fixture: init: refused", err)

    def test_plugins_lists_faulty_with_reason(self):
        rc, out, _ = run("plugins", "--json")
        self.assertEqual(rc, 0)
        rows = {r["alias"]: r for r in json.loads(out)}
        self.assertEqual(rows["ok"]["state"], "loaded")
        self.assertEqual(rows["ok"]["abi"], "1.0")
        self.assertEqual(rows["major"]["state"], "faulty")
        self.assertIn("2.0", rows["major"]["reason"])

    def test_config_check(self):
        rc, out, _ = run("config", "check", OK_CONFIG)
        self.assertEqual((rc, out.split()), (0, ["default", "ok"]))
        bad = write("bad.yaml", "data_source:\n  sandbox:\n    type: ok\n    colour: red\n")
        rc, out, _ = run("config", "check", bad)
        self.assertEqual(rc, 2)
        self.assertIn("unknown key 'colour' for sandbox type 'ok'", out)

    def test_build_tree_registry_found_without_options(self):
        rc, out, _ = run("plugins", registry=None)
        self.assertEqual(rc, 0)
        aliases = [line.split()[0] for line in out.splitlines()[1:]]
        self.assertEqual(aliases, ["custom", "docker", "e2b", "k8s", "local"])


class Rollout(unittest.TestCase):
    def test_results_keep_infra_apart_from_command_failures(self):
        tasks = write("tasks.jsonl", "\n".join([
            json.dumps({"id": "a", "commands": ["exit 0", "greeting"]}),
            json.dumps({"id": "b", "commands": ["exit 4"]}),
            json.dumps({"id": "c", "image": "fail", "commands": ["exit 0"]}),
        ]) + "\n")
        out_path = os.path.join(TMP, "results.jsonl")
        rc, _, err = run("rollout", "--config", OK_CONFIG, "--output", out_path, tasks)
        self.assertEqual(rc, 1)  # one infrastructure error
        self.assertIn("rollout: 3 tasks: 1 ok, 1 with failing commands, 1 infrastructure errors", err)
        with open(out_path) as f:
            rows = {r["id"]: r for r in map(json.loads, f)}
        self.assertEqual((rows["a"]["ok"], rows["a"]["infra_error"]), (True, None))
        self.assertEqual([c["exit_code"] for c in rows["a"]["commands"]], [0, 0])
        self.assertEqual((rows["b"]["ok"], rows["b"]["commands"][0]["exit_code"]), (False, 4))
        self.assertEqual(rows["c"]["infra_error"]["stage"], "create")
        self.assertIsNone(rows["c"]["sandbox_id"])

    def test_whole_file_is_validated_first(self):
        tasks = write("bad.jsonl", '{"id": "x", "commands": ["exit 0"]}\n{"id": "y"}\nnot json\n')
        rc, out, err = run("rollout", "--config", OK_CONFIG, tasks)
        self.assertEqual((rc, out), (2, ""))
        self.assertIn("bad.jsonl:2: 'commands' must be a list", err)
        self.assertIn("bad.jsonl:3: not valid JSON", err)


if __name__ == "__main__":
    unittest.main()
