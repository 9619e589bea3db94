"""The `sbx` command: usage errors, help, exit codes, JSON shapes (fixture plugins, and
`local` when it is built)."""
import json
import os
import subprocess
import unittest

from clitest import BUILD_REGISTRY, SBX, TMP, local_available, local_config, ok_config, run, write

SUBCOMMANDS = ["plugins", "config", "create", "exec", "rm", "pause", "resume", "status",
               "file", "ls", "gc", "rollout", "job"]
EXEC_KEYS = {"exit_code", "signal", "timed_out", "oom_killed", "duration", "stdout", "stderr",
             "truncated", "original_stdout_length", "original_stderr_length", "output_dir", "stdout_file",
             "stderr_file", "stdout_bytes", "stderr_bytes", "stdout_dropped", "stderr_dropped"}


class Usage(unittest.TestCase):
    def test_no_command_is_a_usage_error(self):
        rc, out, err = run()
        self.assertEqual((rc, out), (2, ""))
        self.assertTrue(err.startswith("sbx: no command given\nusage: sbx "), err)

    def test_unknown_command(self):
        rc, _, err = run("frobnicate")
        self.assertEqual(rc, 2)
        self.assertIn("sbx: unknown command 'frobnicate'\nusage: sbx ", err)

    def test_every_subcommand_has_help(self):
        for sub in SUBCOMMANDS:
            for flag in ["--help", "-h"]:
                rc, out, err = run(sub, flag)
                self.assertEqual((rc, err), (0, ""), sub)
                self.assertTrue(out.startswith("usage: sbx "), (sub, out))

    def test_top_level_help_lists_every_subcommand(self):
        rc, out, _ = run("--help")
        self.assertEqual(rc, 0)
        for sub in SUBCOMMANDS:
            self.assertIn("\n  " + sub, out.replace("pause, resume, status", "pause\n  resume\n  status"))

    def test_version(self):
        rc, out, _ = run("--version")
        self.assertEqual(rc, 0)
        self.assertRegex(out, r"^sbx \d+\.\d+\.\d+ \(plugin ABI \d+\.\d+\)\n$")

    def test_registry_option_needs_a_value(self):
        p = subprocess.run([SBX, "--registry"], capture_output=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn(b"sbx: --registry needs a FILE argument\nusage: sbx ", p.stderr)

    def test_unknown_global_option(self):
        rc, _, err = run("--colour", "plugins")
        self.assertEqual(rc, 2)
        self.assertIn("sbx: unknown option '--colour'", err)

    def test_exec_without_command(self):
        rc, _, err = run("exec", "ok:ok-1", config=ok_config())
        self.assertEqual(rc, 2)
        self.assertIn("sbx: exec: missing command: use -- ARGV... or -c 'SHELL'\nusage: sbx exec",
                      err)

    def test_exec_without_id(self):
        rc, _, err = run("exec")
        self.assertEqual(rc, 2)
        self.assertIn("sbx: exec: missing sandbox ID\nusage: sbx exec", err)

    def test_exec_shell_and_argv_together(self):
        rc, _, err = run("exec", "ok:ok-1", "-c", "x", "--", "echo")
        self.assertEqual(rc, 2)
        self.assertIn("give either -c 'SHELL' or -- ARGV, not both", err)

    def test_exec_unknown_option(self):
        rc, _, err = run("exec", "--frob", "ok:ok-1", "-c", "x")
        self.assertEqual(rc, 2)
        self.assertIn("sbx: exec: unknown option '--frob'\nusage: sbx exec", err)

    def test_bad_timeout(self):
        rc, _, err = run("exec", "--timeout", "soon", "ok:ok-1", "-c", "x")
        self.assertEqual(rc, 2)
        self.assertIn("--timeout wants seconds >= 0, got 'soon'", err)

    def test_bad_env(self):
        rc, _, err = run("exec", "--env", "NOEQUALS", "ok:ok-1", "-c", "x")
        self.assertEqual(rc, 2)
        self.assertIn("--env wants KEY=VALUE, got 'NOEQUALS'", err)

    def test_create_bad_label_and_ttl(self):
        rc, _, err = run("create", "--label", "=v")
        self.assertEqual(rc, 2)
        self.assertIn("--label wants KEY=VALUE (at most 64), got '=v'", err)
        rc, _, err = run("create", "--ttl", "1.5")
        self.assertEqual(rc, 2)
        self.assertIn("--ttl wants whole seconds, got '1.5'", err)

    def test_rm_without_id(self):
        rc, _, err = run("rm")
        self.assertEqual(rc, 2)
        self.assertIn("sbx: rm: missing sandbox ID\nusage: sbx rm", err)

    def test_status_needs_one_id(self):
        for args in ([], ["a:1", "b:2"]):
            rc, _, err = run("status", *args)
            self.assertEqual(rc, 2)
            self.assertIn("sbx: status: expected one sandbox ID\nusage: sbx pause", err)
        rc, out, err = run("pause", "--json", "a:1")
        self.assertEqual((rc, err), (2, ""))  # asked for JSON: the error is JSON too
        self.assertEqual(json.loads(out), {"error": {
            "status": "SBX_E_INVAL", "message": "pause: unknown option '--json'"}})

    def test_config_needs_check_file(self):
        rc, _, err = run("config", "lint")
        self.assertEqual(rc, 2)
        self.assertIn("sbx: config: expected 'config check FILE'", err)


class Exec(unittest.TestCase):
    def setUp(self):
        self.cfg = ok_config()
        rc, out, err = run("create", config=self.cfg)
        self.assertEqual(rc, 0, err)
        self.id = out.strip()

    def tearDown(self):
        run("rm", self.id, config=self.cfg)

    def test_create_prints_an_alias_prefixed_id(self):
        self.assertRegex(self.id, r"^ok:ok-\d+$")

    def test_create_json(self):
        rc, out, err = run("create", "--json", "--label", "k=v", config=self.cfg)
        self.assertEqual(rc, 0, err)
        obj = json.loads(out)
        self.assertEqual(list(obj), ["id"])
        self.assertRegex(obj["id"], r"^ok:ok-\d+$")
        self.assertEqual(run("rm", obj["id"], config=self.cfg)[0], 0)

    def test_exit_codes(self):
        self.assertEqual(run("exec", self.id, "-c", "exit 3", config=self.cfg)[0], 3)
        self.assertEqual(run("exec", self.id, "-c", "exit 0", config=self.cfg)[0], 0)
        rc, out, err = run("exec", self.id, "-c", "timeout", config=self.cfg)
        self.assertEqual((rc, out), (124, "partial\n"))
        self.assertRegex(err, r"^sbx: exec: command timed out after [0-9.]+ s\n$")
        self.assertEqual(run("exec", self.id, "-c", "kill", config=self.cfg)[0], 128 + 9)

    def test_unknown_sandbox_is_infra_125(self):
        rc, out, err = run("exec", "ok:nope", "-c", "exit 0", config=self.cfg)
        self.assertEqual((rc, out, err), (125, "", "sbx: exec: ok: execute: no sandbox 'nope'\n"))

    def test_argv_and_output(self):
        rc, out, err = run("exec", self.id, "--", "echo", "a b", config=self.cfg)
        self.assertEqual((rc, out, err), (0, "echo a b\n", ""))
        rc, out, err = run("exec", self.id, "-c", "stderr", config=self.cfg)
        self.assertEqual((rc, out, err), (0, "", "err\n"))

    def test_json_shape(self):
        rc, out, err = run("exec", "--json", self.id, "-c", "exit 5", config=self.cfg)
        self.assertEqual(rc, 5)
        r = json.loads(out)
        self.assertEqual(set(r), EXEC_KEYS)
        self.assertEqual((r["exit_code"], r["signal"], r["timed_out"], r["truncated"]),
                         (5, 0, False, False))
        self.assertIs(r["oom_killed"], False)
        self.assertEqual((r["stdout"], r["stderr"], r["stdout_bytes"]), ("", "", 0))
        self.assertIsInstance(r["duration"], float)

    def test_json_timeout_exits_124(self):
        rc, out, err = run("exec", "--json", self.id, "-c", "timeout", config=self.cfg)
        self.assertEqual((rc, err), (124, ""))
        r = json.loads(out)
        self.assertEqual((r["timed_out"], r["stdout"], r["stdout_bytes"]), (True, "partial\n", 8))

    def test_json_replaces_invalid_utf8(self):
        # The fixture echoes the shell string: one invalid byte between valid text.
        p = subprocess.run([SBX, "--registry", os.environ["SBX_FIXTURE_REGISTRY"], "--config",
                            self.cfg, "exec", "--json", self.id, "-c", b"\xc3\xa9\xff!"],
                           capture_output=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(p.stdout.isascii())  # non-ASCII is escaped
        r = json.loads(p.stdout)
        self.assertEqual((r["stdout"], r["stdout_bytes"]), ("\u00e9\ufffd!\n", 5))

    def test_raw_output_keeps_bytes(self):
        p = subprocess.run([SBX, "--registry", os.environ["SBX_FIXTURE_REGISTRY"], "--config",
                            self.cfg, "exec", self.id, "-c", b"\xff\x01"], capture_output=True)
        self.assertEqual((p.returncode, p.stdout), (0, b"\xff\x01\n"))

    def test_stdin(self):
        rc, out, _ = run("exec", "-i", self.id, "-c", "cat", config=self.cfg, stdin=b"piped\n")
        self.assertEqual((rc, out), (0, "piped\n"))
        path = write("stdin.txt", "from a file\n")
        rc, out, _ = run("exec", "--stdin-file", path, self.id, "-c", "cat", config=self.cfg)
        self.assertEqual((rc, out), (0, "from a file\n"))
        rc, out, _ = run("exec", self.id, "-c", "cat", config=self.cfg, stdin=b"ignored\n")
        self.assertEqual((rc, out), (0, ""))

    def test_config_option_after_the_command(self):
        rc, _, err = run("exec", self.id, "--config=" + self.cfg, "-c", "exit 3", config=None)
        self.assertEqual(rc, 3, err)
        rc, _, err = run("exec", "--config", self.cfg, self.id, "-c", "exit 4", config=None)
        self.assertEqual(rc, 4, err)
        rc, _, err = run("exec", self.id, "--config", config=None)
        self.assertEqual(rc, 2)
        self.assertIn("sbx: exec: --config needs a FILE argument", err)

    def test_words_after_dash_c_belong_to_the_command(self):
        rc, out, err = run("exec", self.id, "--", "echo", "--config", "x", config=self.cfg)
        self.assertEqual((rc, out), (0, "echo --config x\n"), err)

    def test_config_from_environment(self):
        rc, out, err = run("exec", self.id, "-c", "greeting", env_extra={"SBX_CONFIG": self.cfg})
        self.assertEqual(rc, 0, err)

    def test_status_and_ls(self):
        rc, out, _ = run("status", self.id, config=self.cfg)
        self.assertEqual((rc, out), (0, "running\n"))
        for args in (["--json", self.id], [self.id, "--json"]):
            rc, out, _ = run("status", *args, config=self.cfg)
            self.assertEqual((rc, json.loads(out)),
                             (0, {"id": self.id, "state": "running", "backend": {}}))
        rc, out, _ = run("ls", "--json", config=self.cfg)
        self.assertEqual(rc, 0)
        rows = [r for r in json.loads(out) if r["id"] == self.id]
        self.assertEqual(len(rows), 1)
        self.assertEqual((rows[0]["state"], rows[0]["owner_pid"]), ("running", 0))

    def test_pause_unsupported_by_fixture_is_infra(self):
        rc, out, err = run("pause", self.id, config=self.cfg)
        self.assertEqual((rc, out), (125, ""))
        self.assertTrue(err.startswith("sbx: pause: "), err)

    def test_file_ops_unsupported_by_fixture_are_infra(self):
        rc, _, err = run("file", "read", self.id, "x", config=self.cfg)
        self.assertEqual(rc, 125)
        self.assertTrue(err.startswith("sbx: file: "), err)

    def test_share_dir_unsupported_by_fixture_is_infra(self):
        rc, out, err = run("create", "--share-dir", TMP, config=self.cfg)
        self.assertEqual((rc, out), (125, ""))
        self.assertEqual(err, "sbx: create: ok: create: share_dir: this backend cannot share "
                              "a host folder with a sandbox\n")


class Errors(unittest.TestCase):
    def test_malformed_id_exits_2(self):
        for sub in (["exec", "nocolon", "-c", "x"], ["rm", "nocolon"], ["status", "nocolon"]):
            rc, _, err = run(*sub, config=ok_config())
            self.assertEqual(rc, 2, sub)
            self.assertIn("malformed sandbox id 'nocolon'", err)

    def test_unknown_alias_lists_known_ones(self):
        rc, _, err = run("exec", "zzz:1", "-c", "x", config=ok_config())
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
        self.assertEqual((rows["ok"]["state"], rows["ok"]["abi"], rows["ok"]["reason"]),
                         ("loaded", "1.5", None))
        self.assertIn("backend", rows["ok"])
        self.assertEqual(rows["major"]["state"], "faulty")
        self.assertIn("plugin ABI 2.5 does not match host ABI 1.5", rows["major"]["reason"])
        self.assertNotIn("backend", rows["major"])

    def test_plugins_table(self):
        rc, out, _ = run("plugins")
        self.assertEqual(rc, 0)
        lines = out.splitlines()
        self.assertEqual(lines[0].split(), ["ALIAS", "STATE", "ABI", "PATH", "/", "REASON"])
        ok = [l.split() for l in lines if l.startswith("ok ")][0]
        self.assertEqual(ok[1:3], ["loaded", "1.5"])

    def test_config_check(self):
        rc, out, err = run("config", "check", ok_config())
        self.assertEqual((rc, out.split(), err), (0, ["default", "ok"], ""))
        bad = write("bad.yaml", "data_source:\n  sandbox:\n    type: ok\n    colour: red\n")
        rc, out, err = run("config", "check", bad)
        self.assertEqual(rc, 1)
        self.assertIn("sbx: config: ", err)
        self.assertIn("unknown key 'colour' for sandbox type 'ok'", err)

    def test_config_check_unparsable_file_exits_1(self):
        bad = write("bad-top.yaml", "data_sauce:\n  x: 1\n")
        rc, out, err = run("config", "check", bad)
        self.assertEqual((rc, out), (1, ""))
        self.assertIn("data_sauce", err)

    def test_build_tree_registry_found_without_options(self):
        rc, out, _ = run("plugins", registry=None)
        self.assertEqual(rc, 0)
        aliases = [line.split()[0] for line in out.splitlines()[1:]]
        self.assertEqual(aliases, ["custom", "docker", "e2b", "k8s", "local"])


@unittest.skipUnless(local_available(), "the local plugin is not built")
class Local(unittest.TestCase):
    def setUp(self):
        self.cfg = local_config()
        rc, out, err = run("create", registry=BUILD_REGISTRY, config=self.cfg)
        self.assertEqual(rc, 0, err)
        self.id = out.strip()
        self.assertTrue(self.id.startswith("local:"), self.id)

    def tearDown(self):
        self.assertEqual(run("rm", self.id, registry=BUILD_REGISTRY, config=self.cfg)[0], 0)

    def sbx(self, *args, **kw):
        return run(*args, registry=BUILD_REGISTRY, config=self.cfg, **kw)

    def test_exit_codes(self):
        self.assertEqual(self.sbx("exec", self.id, "-c", "exit 0")[0], 0)
        self.assertEqual(self.sbx("exec", self.id, "-c", "exit 3")[0], 3)
        rc, out, err = self.sbx("exec", "--timeout", "0.5", self.id, "-c", "echo early; sleep 5")
        self.assertEqual((rc, out), (124, "early\n"))
        self.assertIn("sbx: exec: command timed out after ", err)
        self.assertEqual(self.sbx("exec", self.id, "-c", "kill -TERM $$")[0], 128 + 15)

    def test_create_with_share_dir(self):
        share = os.path.join(TMP, "shared")
        os.makedirs(share, exist_ok=True)
        rc, out, err = self.sbx("create", "--share-dir", share)
        self.assertEqual(rc, 0, err)
        sid = out.strip()
        try:
            self.assertEqual(self.sbx("exec", sid, "-c", "pwd; echo hi > f"),
                             (0, share + "\n", ""))
        finally:
            self.assertEqual(self.sbx("rm", sid)[0], 0)
        with open(os.path.join(share, "f")) as f:
            self.assertEqual(f.read(), "hi\n")
        rc, out, err = self.sbx("create", "--share-dir", "relative")
        self.assertEqual((rc, out), (2, ""))
        self.assertEqual(err, "sbx: create: share_dir 'relative' must be an existing "
                              "folder given by its absolute path (at most 1023 bytes)\n")

    def test_a_leftover_holding_its_output_does_not_hold_the_callers(self):
        # The leftover keeps the command's pipes until told to stop: the call returns, and
        # the sink reading them for it must not keep the CLI's own stdout and stderr open
        # (run() reads those to their end; it would wait out its timeout).
        rc, out, err = self.sbx("exec", self.id, "-c",
                                "(while [ ! -e stop ]; do sleep 0.05; done) & "
                                "echo started", timeout=60)
        self.assertEqual((rc, out, err), (0, "started\n", ""))
        self.assertEqual(self.sbx("exec", self.id, "--", "touch", "stop"), (0, "", ""))

    def test_exec_output_into_sandbox_files(self):
        rc, out, err = self.sbx("exec", "--stdout-to", "o", "--stderr-to", "o", self.id, "-c",
                                "echo a; echo b >&2; exit 4")
        self.assertEqual((rc, out, err), (4, "", ""))
        self.assertEqual(self.sbx("file", "read", self.id, "o")[1], "a\nb\n")
        rc, out, err = self.sbx("exec", "--stderr-to", "no/dir/e", self.id, "--", "true")
        self.assertEqual((rc, out), (125, ""))
        self.assertEqual(err, "sbx: exec: local: exec: cannot open the stderr file no/dir/e: "
                              "No such file or directory\n")
        rc, _, err = self.sbx("exec", "--detach", "--stdout-to", "o", self.id, "--", "true")
        self.assertEqual(rc, 2, err)

    def test_detached_job_through_every_job_subcommand(self):
        rc, out, err = self.sbx("exec", "--detach", self.id, "-c",
                                "echo a; echo e >&2; while [ ! -e go ]; do sleep 0.05; done; "
                                "echo b; exit 6")
        self.assertEqual((rc, err), (0, ""))
        job = out.strip()
        self.assertRegex(job, r"^[0-9a-f]{12}@" + self.id + "$")
        self.assertEqual(self.sbx("job", "wait", job, "--timeout", "0.2")[0], 124)
        rc, out, _ = self.sbx("job", "status", job, "--json")
        st = json.loads(out)
        self.assertEqual((rc, st["id"], st["sandbox_id"], st["state"]), (0, job, self.id, "running"))
        self.assertEqual(set(st), {"id", "sandbox_id", "state", "exit_code", "signal", "pid", "started",
                                   "duration", "stdout_bytes", "stderr_bytes", "command"})
        rc, out, _ = self.sbx("job", "status", job)
        self.assertEqual(rc, 0)
        self.assertRegex(out.splitlines()[1], r"^%s +running +- +[0-9]+ " % job)
        # --follow prints what comes until the job ends, then exits 0.
        follow = subprocess.Popen([SBX, "--registry", BUILD_REGISTRY, "--config", self.cfg, "job",
                                   "logs", job, "--follow"], stdout=subprocess.PIPE,
                                  env=dict(os.environ, SBX_STATE_DIR=os.path.join(TMP, "state")))
        self.assertEqual(follow.stdout.readline(), b"a\n")
        self.assertEqual(self.sbx("exec", self.id, "-c", "touch go")[0], 0)
        self.assertEqual(follow.stdout.read(), b"b\n")
        self.assertEqual(follow.wait(60), 0)
        self.assertEqual(self.sbx("job", "wait", job)[0], 6)
        self.assertEqual(self.sbx("job", "logs", job)[1], "a\nb\n")
        self.assertEqual(self.sbx("job", "logs", job, "--stderr")[1], "e\n")
        self.assertEqual(self.sbx("job", "logs", job, "--tail", "1")[1], "b\n")
        rc, out, _ = self.sbx("job", "ls", self.id, "--json")
        self.assertEqual([(j["id"], j["state"], j["exit_code"]) for j in json.loads(out)],
                         [(job, "exited", 6)])
        rc, out, _ = self.sbx("ls", "--json")
        row = [r for r in json.loads(out) if r["id"] == self.id][0]
        self.assertEqual([(j["id"], j["state"]) for j in row["jobs"]], [(job, "exited")])
        rc, out, _ = self.sbx("exec", "--detach", "--json", self.id, "--", "sleep", "300")
        job2 = json.loads(out)["job_id"]
        self.assertEqual(self.sbx("job", "kill", job2, "--signal", "SIGKILL")[0], 0)
        self.assertEqual(self.sbx("job", "wait", job2)[0], 128 + 9)

    def test_job_usage_errors(self):
        rc, _, err = self.sbx("job")
        self.assertEqual(rc, 2)
        self.assertIn("sbx: job: missing subcommand\nusage: sbx job", err)
        rc, _, err = self.sbx("job", "frob")
        self.assertIn("sbx: job: unknown subcommand 'frob'", err)
        rc, _, err = self.sbx("job", "wait")
        self.assertEqual(rc, 2)
        self.assertIn("sbx: job wait: missing JOB", err)
        rc, _, err = self.sbx("job", "wait", "x", "--signal", "KILL")
        self.assertEqual(rc, 2)
        self.assertIn("sbx: job wait: bad argument '--signal'", err)
        rc, _, err = self.sbx("job", "kill", "0123456789ab@" + self.id, "--signal", "BOGUS")
        self.assertEqual(rc, 2)
        self.assertIn("--signal wants 1..64 or a name such as TERM, got 'BOGUS'", err)
        rc, _, err = self.sbx("job", "logs", "0123456789ab@" + self.id, "--tail", "0")
        self.assertIn("--tail wants a line count 1..1000000, got '0'", err)
        rc, _, err = self.sbx("job", "status", "nonsense")
        self.assertEqual(rc, 2, err)
        rc, _, err = self.sbx("job", "status", "0123456789ab@" + self.id)
        self.assertEqual(rc, 125, err)
        self.assertIn("no such job in the sandbox", err)

    def test_argv_cwd_env(self):
        self.assertEqual(self.sbx("exec", self.id, "--", "mkdir", "sub")[0], 0)
        rc, out, err = self.sbx("exec", "--cwd", "sub", "--env", "A=b c", self.id, "-c",
                                'printf "%s|%s" "$A" "$(basename "$PWD")"')
        self.assertEqual((rc, out, err), (0, "b c|sub", ""))

    def test_json_and_full_output(self):
        rc, out, _ = self.sbx("exec", "--json", self.id, "-c", "seq 1 5000; echo e >&2")
        self.assertEqual(rc, 0)
        r = json.loads(out)
        self.assertEqual(set(r), EXEC_KEYS)
        self.assertEqual((r["truncated"], r["stderr"], r["original_stdout_length"]),
                         (True, "e\n", 23893))
        self.assertIn("characters omitted", r["stdout"])
        with open(r["stdout_file"], "rb") as f:
            self.assertEqual(len(f.read()), 23893)
        rc, out, _ = self.sbx("exec", "--full", self.id, "-c", "seq 1 5000")
        self.assertEqual((rc, len(out)), (0, 23893))

    def test_pause_resume_status(self):
        self.assertEqual(self.sbx("pause", self.id), (0, "", ""))
        self.assertEqual(self.sbx("status", self.id), (0, "paused\n", ""))
        self.assertEqual(self.sbx("resume", self.id), (0, "", ""))
        self.assertEqual(self.sbx("status", self.id), (0, "running\n", ""))
        rc, out, _ = self.sbx("status", "--json", self.id)
        self.assertEqual((rc, json.loads(out)), (0, {"id": self.id, "state": "running",
                                                      "backend": {"isolation": "plain"}}))

    def test_nul_and_invalid_utf8_in_json(self):
        rc, out, _ = self.sbx("exec", "--json", self.id, "-c", r"printf 'a\0b\377c'")
        self.assertEqual(rc, 0)
        self.assertIn('"stdout":"a\\u0000b\\uFFFDc"', out)
        r = json.loads(out)
        self.assertEqual((r["stdout"], r["stdout_bytes"]), ("a\0b\ufffdc", 5))
        with open(r["stdout_file"], "rb") as f:
            self.assertEqual(f.read(), b"a\0b\xffc")

    def test_files(self):
        src = write("payload.txt", "héllo\n")
        self.assertEqual(self.sbx("file", "write", self.id, "d/p.txt", src)[0], 0)
        self.assertEqual(self.sbx("file", "read", self.id, "d/p.txt"), (0, "héllo\n", ""))
        rc, out, _ = self.sbx("file", "stat", "--json", self.id, "d/p.txt")
        self.assertEqual((rc, json.loads(out)["size"], json.loads(out)["kind"]), (0, 7, "file"))
        rc, _, err = self.sbx("file", "read", self.id, "../../etc/passwd")
        self.assertEqual(rc, 125)
        self.assertTrue(err.startswith("sbx: file: "), err)

    def test_file_dirs(self):
        self.assertEqual(self.sbx("file", "mkdir", "-p", self.id, "x/y/z"), (0, "", ""))
        self.assertEqual(self.sbx("file", "write", self.id, "x/s.txt", stdin=b"from stdin")[0], 0)
        rc, out, _ = self.sbx("file", "ls", "--json", self.id, "x")
        self.assertEqual(rc, 0)
        got = sorted((e["name"], e["kind"], e["size"]) for e in json.loads(out))
        self.assertEqual([g[:2] for g in got], [("s.txt", "file"), ("y", "dir")])
        self.assertEqual(got[0][2], 10)
        self.assertEqual(self.sbx("file", "rm", "-r", self.id, "x"), (0, "", ""))
        rc, _, err = self.sbx("file", "stat", self.id, "x")
        self.assertEqual(rc, 125)
        self.assertTrue(err.startswith("sbx: file: "), err)

    def test_terminal_output_escapes_control_characters(self):
        # A name a command chose: an ESC sequence, a newline, a backslash. Printed raw it would
        # clear the terminal and forge a line; --json keeps the exact name.
        name = "x\x1b[2J\ny\\z"
        self.assertEqual(self.sbx("exec", self.id, "--", "touch", name)[0], 0)
        rc, out, _ = self.sbx("file", "ls", self.id, ".")
        self.assertEqual((rc, out), (0, "file             0 x\\e[2J\\ny\\\\z\n"))
        rc, out, _ = self.sbx("file", "ls", "--json", self.id, ".")
        self.assertEqual(json.loads(out)[0]["name"], name)
        rc, out, _ = self.sbx("file", "stat", self.id, name)
        self.assertEqual((rc, out), (0, "x\\e[2J\\ny\\\\z file 644 0\n"))
        rc, _, err = self.sbx("file", "read", self.id, "no\x1b]0;pwned\x07")
        self.assertEqual((rc, err), (125, "sbx: file: local: read: 'no\\e]0;pwned\\x07': no such "
                                          "file\n"))

    def test_session_ls_escapes_control_characters(self):
        user = "u\x1b[31m"
        rc, out, err = self.sbx("session", "start", "--user", user, "--session", "s\nx")
        self.assertEqual(rc, 0, err)
        sid = out.strip()
        try:
            rc, out, _ = self.sbx("session", "ls")
            self.assertEqual(rc, 0)
            rows = [line for line in out.splitlines() if sid in line]
            self.assertEqual(rows, ["%-16s %-16s %-8s %s" % ("u\\e[31m", "s\\nx", "running", sid)])
            rc, out, _ = self.sbx("session", "ls", "--json")
            self.assertIn({"user": user, "session": "s\nx"},
                          [{"user": r["user"], "session": r["session"]} for r in json.loads(out)])
        finally:
            self.assertEqual(self.sbx("session", "end", "--user", user, "--session", "s\nx")[0], 0)


if __name__ == "__main__":
    unittest.main()
