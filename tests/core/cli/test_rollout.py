"""`sbx rollout`: task validation, infra errors kept apart from command failures, queueing
under max_concurrency, and the shipped example on `local` when it is built."""
import json
import os
import pty
import resource
import shutil
import signal
import subprocess
import time
import unittest

from clitest import (BUILD_REGISTRY, FIXTURES, SBX, SOURCE_DIR, TMP, local_available, local_config, ok_config,
                     run, write)


def rows_of(path):
    with open(path, encoding="utf-8") as f:
        return {r["id"]: r for r in map(json.loads, f)}


class Validation(unittest.TestCase):
    def test_whole_file_is_validated_first(self):
        tasks = write("bad.jsonl", '{"id": "x", "commands": ["exit 0"]}\n{"id": "y"}\n'
                      '\n  \nnot json\n{"id": "z", "commands": [{"cmd": "a", "argv": ["b"]}]}\n')
        rc, out, err = run("rollout", "--config", ok_config(), tasks)
        self.assertEqual((rc, out), (2, ""))
        self.assertEqual(err.splitlines(), [
            "sbx: rollout: %s:2: 'commands' must be a list" % tasks,
            "sbx: rollout: %s:5: not valid JSON: '[' or '{' expected near 'not'" % tasks,
            "sbx: rollout: %s:6: a command object needs exactly one of 'cmd' (a string) or "
            "'argv' (a list)" % tasks,
        ])

    def test_field_types(self):
        cases = [
            ({"commands": []}, "'id' (a string or integer) is required"),
            ({"id": "a", "commands": [], "data_source": 1.5},
             "'data_source' must be a name or an index"),
            ({"id": "a", "commands": [], "files": {"p": 1}},
             "every value of 'files' must be a string"),
            ({"id": "a", "commands": [], "image": 3}, "'image' must be a string"),
            ({"id": "a", "commands": [], "metadata": {"docker_image": 3}},
             "'metadata.docker_image' must be a string"),
            ({"id": "a", "commands": [], "timeout": -1}, "'timeout' must be a number of seconds >= 0"),
            ({"id": "a", "commands": [{"argv": []}]}, "'argv' must not be empty"),
            ({"id": "a", "commands": [{"argv": ["x", 1]}]}, "'argv' must hold strings"),
            ({"id": "a", "commands": [{"cmd": "x", "env": {"A": 1}}]}, "'env' values must be strings"),
            ({"id": "a", "commands": [7]},
             "each command must be a string or an object with 'cmd' or 'argv'"),
            ({"id": "a", "commands": [], "timout": 5},
             "unknown key 'timout' (a task has id, commands, data_source, image, files, "
             "timeout, metadata)"),
            ({"id": "a", "comands": ["true"], "commands": []},
             "unknown key 'comands' (a task has id, commands, data_source, image, files, "
             "timeout, metadata)"),
            ({"id": "a", "commands": [{"cmd": "x", "timout": 1}]},
             "unknown key 'timout' (a command object has cmd, argv, timeout, cwd, env)"),
        ]
        for task, why in cases:
            tasks = write("one.jsonl", json.dumps(task) + "\n")
            rc, out, err = run("rollout", "--config", ok_config(), tasks)
            self.assertEqual((rc, out, err), (2, "", "sbx: rollout: %s:1: %s\n" % (tasks, why)))

    def test_a_nul_byte_is_refused_not_taken_for_the_end_of_the_line(self):
        # json_loads stopped at the NUL and ran the task without seeing the rest.
        tasks = write("nul.jsonl", '{"id": "a", "commands": ["true"]}\0{"x": 1}\n')
        rc, out, err = run("rollout", "--config", ok_config(), tasks)
        self.assertEqual((rc, out, err), (2, "", "sbx: rollout: %s:1: NUL byte at column 34\n" % tasks))

    def test_duplicate_ids_are_refused(self):
        tasks = write("dup.jsonl", "".join(json.dumps({"id": i, "commands": []}) + "\n"
                                           for i in ["a", 7, "7", "a", 7]))
        rc, out, err = run("rollout", "--config", ok_config(), tasks)
        self.assertEqual((rc, out), (2, ""))
        self.assertEqual(err.splitlines(), [
            "sbx: rollout: %s:4: id 'a' repeats line 1" % tasks,
            "sbx: rollout: %s:5: id 7 repeats line 2" % tasks,
        ])

    def test_usage(self):
        rc, _, err = run("rollout", "--config", ok_config())
        self.assertEqual(rc, 2)
        self.assertIn("sbx: rollout: missing TASKS.jsonl\nusage: sbx rollout", err)
        rc, _, err = run("rollout", "--concurrency", "0", "t.jsonl")
        self.assertEqual(rc, 2)
        self.assertIn("--concurrency wants 1..4096, got '0'", err)
        rc, _, err = run("rollout", "--config", ok_config(), os.path.join(TMP, "absent.jsonl"))
        self.assertEqual(rc, 2)
        self.assertIn("sbx: rollout: cannot open %s: No such file or directory\n"
                      % os.path.join(TMP, "absent.jsonl"), err)


class Fixture(unittest.TestCase):
    def test_results_keep_infra_apart_from_command_failures(self):
        tasks = write("tasks.jsonl", "\n".join([
            json.dumps({"id": "a", "commands": ["exit 0", "greeting"]}),
            json.dumps({"id": "b", "commands": ["exit 4", "exit 0"]}),
            json.dumps({"id": "c", "image": "fail", "commands": ["exit 0"]}),
            json.dumps({"id": 7, "commands": ["timeout", {"argv": ["x", "y"]}]}),
            json.dumps({"id": "f", "files": {"a.txt": "x"}, "commands": ["exit 0"]}),
        ]) + "\n")
        out_path = os.path.join(TMP, "results.jsonl")
        rc, out, err = run("rollout", "--config", ok_config(), "--output", out_path, tasks)
        self.assertEqual((rc, out), (1, ""))  # infrastructure errors: c, f
        # Not a terminal: plain progress lines, then the summary.
        self.assertEqual([l.split(" done,")[0] for l in err.splitlines()[:-1]],
                         ["rollout: %d/5" % i for i in range(1, 6)])
        self.assertNotIn("\r", err)
        self.assertRegex(err.splitlines()[-1] + "\n", r"^rollout: 5 tasks: 1 ok, 2 with failing "
                         r"commands, 2 infrastructure errors; [0-9.]+ s, [0-9.]+ tasks/s\n$")
        rows = rows_of(out_path)
        self.assertEqual(set(rows), {"a", "b", "c", 7, "f"})
        a = rows["a"]
        self.assertEqual(set(a), {"id", "data_source", "sandbox_id", "ok", "infra_error",
                                  "commands", "timings"})
        self.assertEqual(set(a["timings"]), {"queued", "create", "total"})
        self.assertEqual((a["ok"], a["infra_error"], a["data_source"]), (True, None, "default"))
        self.assertRegex(a["sandbox_id"], r"^ok:ok-\d+$")
        self.assertEqual([(c["command"], c["exit_code"], c["stdout"]) for c in a["commands"]],
                         [("exit 0", 0, ""), ("greeting", 0, "hello\n")])
        # Every command runs; a failing one does not stop the task.
        self.assertEqual((rows["b"]["ok"], [c["exit_code"] for c in rows["b"]["commands"]]),
                         (False, [4, 0]))
        self.assertEqual(rows["c"]["infra_error"],
                         {"stage": "create", "status": "SBX_E_BACKEND",
                          "message": "ok: create: image 'fail' refused"})
        self.assertEqual((rows["c"]["sandbox_id"], rows["c"]["commands"]), (None, []))
        t = rows[7]["commands"]
        self.assertEqual((t[0]["timed_out"], t[0]["stdout"], rows[7]["ok"]), (True, "partial\n", False))
        self.assertEqual((t[1]["command"], t[1]["stdout"]), (["x", "y"], "x y\n"))
        # The fixture has no file ops: the write is an infra error and no command runs.
        self.assertEqual((rows["f"]["infra_error"]["stage"], rows["f"]["infra_error"]["status"],
                          rows["f"]["commands"]), ("files", "SBX_E_UNSUPPORTED", []))

    def test_results_to_stdout_without_output(self):
        tasks = write("two.jsonl", '{"id": "a", "commands": ["exit 0"]}\n'
                      '{"id": "b", "data_source": "0", "commands": ["exit 0"]}\n')
        cfg = write("ok-ds.yaml", "data_source:\n  sandbox:\n    type: ok\n"
                    "data_sources:\n  - name: one\n")
        rc, out, err = run("rollout", tasks, "--config=" + cfg)
        self.assertEqual(rc, 0, err)
        rows = {r["id"]: r for r in map(json.loads, out.splitlines())}
        self.assertEqual((rows["a"]["ok"], rows["b"]["ok"], rows["b"]["data_source"]),
                         (True, True, "0"))

    def test_unknown_data_source_is_refused_before_the_run(self):
        cfg = write("ok-two.yaml", "data_source:\n  sandbox:\n    type: ok\n"
                    "data_sources:\n  - name: one\n")
        tasks = write("ds.jsonl", "".join(json.dumps(t) + "\n" for t in [
            {"id": "a", "commands": ["exit 0"]},
            {"id": "b", "data_source": "nope", "commands": ["exit 0"]},
            {"id": "c", "data_source": "one", "commands": ["exit 0"]},
            {"id": "d", "data_source": 0, "commands": ["exit 0"]},
            {"id": "e", "data_source": 1, "commands": ["exit 0"]},
            {"id": "f", "data_source": "default", "commands": ["exit 0"]},
        ]))
        rc, out, err = run("rollout", "--config", cfg, tasks)
        self.assertEqual((rc, out), (2, ""))
        self.assertEqual(err.splitlines(), [
            "sbx: rollout: %s:2: unknown data_source \"nope\" (configured: default, one)" % tasks,
            "sbx: rollout: %s:5: unknown data_source 1 (configured: default, one)" % tasks,
        ])

    def test_progress_on_a_terminal_is_one_line_with_rate_and_eta(self):
        """Rewritten in place (\\r, erase line): done/total, in flight, failures, rate, ETA.
        Without a terminal the same facts come as plain lines (test_results_... pins them)."""
        tasks = write("tty.jsonl", "".join(
            json.dumps({"id": i, "commands": ["exit %d" % (i % 3 == 0)]}) + "\n"
            for i in range(20)))
        master, slave = pty.openpty()
        env = dict(os.environ, SBX_STATE_DIR=os.path.join(TMP, "state"))
        env.pop("SBX_REGISTRY", None)
        p = subprocess.Popen([SBX, "--registry", FIXTURES, "rollout", "--config", ok_config(),
                              "--output", os.path.join(TMP, "tty-out.jsonl"), tasks],
                             stderr=slave, stdout=subprocess.DEVNULL, env=env)
        os.close(slave)
        seen = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        os.close(master)
        self.assertEqual(p.wait(timeout=120), 0)
        text = seen.decode()
        updates = text.split("\r\x1b[K")[1:]
        self.assertEqual(len(updates), 20, text)
        self.assertRegex(updates[0], r"^rollout: 1/20 done, \d+ in flight, [01] failed, 0 infra "
                         r"errors, [0-9.]+ tasks/s, ETA \d+s$")
        self.assertRegex(updates[-1], r"^rollout: 20/20 done, 0 in flight, 7 failed, 0 infra "
                         r"errors, [0-9.]+ tasks/s, ETA -\r\nrollout: 20 tasks: 13 ok, 7 with ")

    def test_resume_skips_finished_tasks_and_reruns_interrupted_ones(self):
        tasks = write("res.jsonl", "".join(
            json.dumps({"id": i, "commands": ["exit 0"]}) + "\n" for i in range(4)))
        out_path = os.path.join(TMP, "res-out.jsonl")
        previous = json.dumps({"id": 1, "sandbox_id": "ok:previous", "ok": True,
                               "infra_error": None, "commands": []})
        with open(out_path, "w") as f:
            f.write(previous + "\n")
            f.write(json.dumps({"id": 2, "ok": False, "interrupted": True}) + "\n")
            f.write('{"id": 3, "ok": tr')  # torn by a kill mid-write
        rc, out, err = run("rollout", "--config", ok_config(), "--resume", "--output",
                           out_path, tasks)
        self.assertEqual((rc, out), (0, ""), err)
        self.assertIn("rollout: resuming: 1 of 4 tasks already done\n", err)
        self.assertIn("rollout: 3 tasks: 3 ok, ", err)
        with open(out_path) as f:
            lines = f.read().splitlines()
        self.assertEqual(lines[0], previous)
        rows = [json.loads(l) for l in lines[1:]]
        self.assertEqual(sorted(r["id"] for r in rows), [0, 2, 3])
        self.assertTrue(all(r["ok"] and "interrupted" not in r for r in rows))
        rc, out, err = run("rollout", "--config", ok_config(), "--resume", tasks)
        self.assertEqual((rc, out, err.splitlines()[0]),
                         (2, "", "sbx: rollout: --resume needs --output FILE"))

    def test_max_concurrency_queues_instead_of_failing(self):
        cfg = write("ok-cap.yaml", "data_source:\n  sandbox:\n    type: ok\n"
                    "    max_concurrency: 1\n")
        tasks = write("many.jsonl", "".join(
            json.dumps({"id": i, "commands": ["exit 0", "exit 0"]}) + "\n" for i in range(24)))
        rc, out, err = run("rollout", "--config", cfg, "--concurrency", "6", tasks)
        self.assertEqual(rc, 0, err)
        rows = [json.loads(l) for l in out.splitlines()]
        self.assertEqual(sorted(r["id"] for r in rows), list(range(24)))
        self.assertTrue(all(r["ok"] for r in rows), [r["infra_error"] for r in rows])


@unittest.skipUnless(local_available(), "the local plugin is not built")
class Local(unittest.TestCase):
    def test_shipped_example(self):
        self.check_example(os.path.join(SOURCE_DIR, "examples/local.yaml"), "plain")

    def test_shipped_example_isolated_by_one_value(self):
        """README: `isolation: namespaces` in examples/local.yaml runs every task isolated."""
        rc, out, _ = run("plugins", "--json", registry=BUILD_REGISTRY)
        local = [p for p in json.loads(out) if p["alias"] == "local"][0]
        levels = local["backend"]["backend"]["levels"]["namespaces"]
        if not levels["supported"]:
            self.skipTest("the isolated level is not supported here: " + levels["why"])
        with open(os.path.join(SOURCE_DIR, "examples/local.yaml")) as f:
            text = f.read()
        self.assertEqual(text.count("    isolation: plain\n"), 1)
        cfg = write("example-isolated.yaml",
                    text.replace("    isolation: plain\n", "    isolation: namespaces\n"))
        self.check_example(cfg, "namespaces")
        # The example's limited data source, named by a task.
        tasks = write("isolated.jsonl", json.dumps(
            {"id": "pid1", "data_source": "isolated", "commands": ["cat /proc/1/comm"]}) + "\n")
        rc, out, err = run("rollout", "--config", os.path.join(SOURCE_DIR, "examples/local.yaml"),
                           tasks, registry=BUILD_REGISTRY)
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["commands"][0]["stdout"], "sbx-init\n")

    def check_example(self, config, isolation):
        out_path = os.path.join(TMP, "example-results-%s.jsonl" % isolation)
        rc, out, err = run("rollout", "--config", config,
                           "--output", out_path, os.path.join(SOURCE_DIR, "examples/tasks.jsonl"),
                           registry=BUILD_REGISTRY, timeout=200)
        self.assertEqual((rc, out), (0, ""), err)
        self.assertRegex(err.splitlines()[-1], r"^rollout: 10 tasks: 8 ok, 2 with failing "
                         r"commands, 0 infrastructure errors; ")
        rows = rows_of(out_path)
        self.assertEqual(rows["files"]["commands"][1]["stdout"], "print('hi from a file')\n")
        self.assertEqual([c["exit_code"] for c in rows["failing-command"]["commands"]], [0, 3])
        t = rows["timeout"]["commands"][0]
        self.assertEqual((t["timed_out"], t["stdout"]), (True, "started\n"))
        self.assertLess(t["duration"], 2.0)
        u = rows["unicode"]["commands"]
        self.assertEqual((u[0]["stdout"], u[1]["stdout"]), ("héllo wörld ✓\n", "\ufffd not utf-8\n"))
        self.assertEqual(rows["argv"]["commands"][0]["stdout"], "no $shell|*splicing*|")
        self.assertEqual(rows["env-cwd"]["commands"][1]["stdout"], "hi in sub\n")
        big = rows["big-output"]["commands"][0]
        self.assertEqual((big["truncated"], big["original_stdout_length"], big["stdout_bytes"]),
                         (True, 108894, 108894))
        self.assertEqual(rows["heredoc"]["commands"][0]["stdout"], 'quoted "$HOME" stays\n')
        s = rows["stderr"]["commands"][0]
        self.assertEqual((s["stdout"], s["stderr"]), ("to-stdout\n", "to-stderr\n"))
        self.assertTrue(all(r["sandbox_id"].startswith("local:") for r in rows.values()))

    def test_sandboxes_are_deleted_on_every_path(self):
        root = os.path.join(TMP, "local-root")
        cfg = local_config("    max_concurrency: 2\n")
        tasks = write("local.jsonl", "".join(
            json.dumps(t) + "\n" for k in range(3) for t in [
                {"id": "w%d" % k, "files": {"a/b.txt": "B"}, "commands": ["cat a/b.txt"]},
                {"id": "cwd%d" % k, "commands": [{"cmd": "true", "cwd": "missing/dir"}]},
                {"id": "q%d" % k, "commands": ["exit 9"]},
                {"id": "dot%d" % k, "files": {"../escape.txt": "x"}, "commands": ["true"]},
            ]))
        rc, out, err = run("rollout", "--config", cfg, tasks, registry=BUILD_REGISTRY)
        rows = {r["id"]: r for r in map(json.loads, out.splitlines())}
        self.assertEqual(len(rows), 12, err)
        self.assertEqual(rc, 1)  # the refused writes
        for k in range(3):
            self.assertEqual(rows["w%d" % k]["commands"][0]["stdout"], "B")
            self.assertEqual((rows["q%d" % k]["ok"], rows["q%d" % k]["infra_error"]), (False, None))
            self.assertEqual(rows["dot%d" % k]["infra_error"]["stage"], "files")
            self.assertEqual(rows["dot%d" % k]["infra_error"]["status"], "SBX_E_PATH")
            # A cwd that does not exist is the backend's refusal, not a command failure.
            self.assertEqual((rows["cwd%d" % k]["infra_error"]["stage"],
                              rows["cwd%d" % k]["infra_error"]["status"]),
                             ("exec", "SBX_E_NO_FILE"))
        self.assertEqual(os.listdir(root) if os.path.isdir(root) else [], [])

    def test_interrupt_kills_running_commands_deletes_sandboxes_and_marks_the_rest(self):
        root = os.path.join(TMP, "local-root")
        cfg = local_config()
        # Task 0 runs a command that never ends on its own; tasks 1-5 must never start.
        marker = os.path.join(TMP, "started")
        if os.path.exists(marker):
            os.remove(marker)
        first = {"id": 0, "commands": [
            "echo $$ > %s.tmp; mv %s.tmp %s; while :; do sleep 0.05; done" % (marker, marker,
                                                                           marker),
            "echo never"]}
        tasks = write("intr.jsonl", json.dumps(first) + "\n" + "".join(
            json.dumps({"id": i, "commands": ["echo %d" % i]}) + "\n" for i in range(1, 6)))
        env = dict(os.environ, SBX_STATE_DIR=os.path.join(TMP, "state"))
        p = subprocess.Popen([SBX, "--registry", BUILD_REGISTRY, "rollout", "--config", cfg,
                              "--concurrency", "1", tasks], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env)
        while not os.path.exists(marker):
            self.assertIsNone(p.poll())
            time.sleep(0.02)
        with open(marker) as f:
            shell = int(f.read())
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
        took = time.monotonic() - t0
        self.assertEqual(p.returncode, 130, err)
        # 2 s is the promise; the bound is loose because the machine is shared.
        self.assertLess(took, 10.0)
        self.assertIn(b"rollout: interrupted: killing the running commands and deleting "
                      b"their sandboxes (interrupt again to abort)\n", err)
        rows = [json.loads(l) for l in out.decode().splitlines()]
        self.assertEqual([r["id"] for r in rows], [0, 1, 2, 3, 4, 5])
        self.assertEqual((rows[0]["commands"], rows[0]["ok"], rows[0]["interrupted"],
                          rows[0]["infra_error"]["stage"], rows[0]["infra_error"]["status"],
                          rows[0]["infra_error"]["message"]),
                         ([], False, True, "exec", "SBX_E_CANCELLED",
                          "rollout: interrupted during command 1 (killed)"))
        for r in rows[1:]:
            self.assertEqual((r["sandbox_id"], r["ok"], r["interrupted"], r["commands"],
                              r["infra_error"]["stage"], r["infra_error"]["message"]),
                             (None, False, True, [], "queued",
                              "rollout: interrupted before the task started"))
        self.assertIn(b"rollout: interrupted: 5 of 6 tasks not started\n", err)
        self.assertEqual(os.listdir(root), [])
        self.assertFalse(os.path.exists("/proc/%d" % shell), "the command still runs")

    def test_few_file_descriptors_lower_concurrency_instead_of_failing_tasks(self):
        root = os.path.join(TMP, "local-root")
        cfg = local_config()
        tasks = write("fds.jsonl", "".join(
            json.dumps({"id": i, "files": {"f.txt": str(i)}, "commands": ["cat f.txt"]}) + "\n"
            for i in range(12)))
        env = dict(os.environ, SBX_STATE_DIR=os.path.join(TMP, "state"))
        p = subprocess.run([SBX, "--registry", BUILD_REGISTRY, "rollout", "--config", cfg,
                            "--concurrency", "16", tasks], capture_output=True, env=env,
                           timeout=200, preexec_fn=lambda: resource.setrlimit(
                               resource.RLIMIT_NOFILE, (60, 60)))
        err = p.stderr.decode()
        self.assertEqual(p.returncode, 0, err)
        self.assertRegex(err, r"^rollout: each task needs up to 12 file descriptors \(ulimit -n "
                         r"is 60\): running at most [1-3] tasks at once instead of 16; raise "
                         r"the hard limit \('ulimit -Hn', which sbx raises it to\) to run "
                         r"more\n(rollout: ([1-9]|1[0-2])/12 done, [0-3] in flight, 0 "
                         r"failed, 0 infra errors, [0-9.]+ tasks/s, ETA [0-9s-]+\n){12}"
                         r"rollout: 12 tasks: 12 ok, 0 with failing commands, 0 "
                         r"infrastructure errors; ")
        rows = rows_of_text(p.stdout.decode())
        self.assertEqual({k: r["commands"][0]["stdout"] for k, r in rows.items()},
                         {i: str(i) for i in range(12)})
        self.assertEqual(os.listdir(root), [])

    def test_a_low_soft_limit_is_raised_for_sbx_and_kept_for_the_commands(self):
        # A shell's usual 1024 open files under a far higher hard limit: sbx raises its own
        # soft limit to the hard one and runs all 16 at once, and each command, in process
        # or in a runner, starts with the 40 the caller had.
        cfg = local_config()
        tasks = write("nofile.jsonl", "".join(
            json.dumps({"id": i, "commands": ["ulimit -Sn; ulimit -Hn"]}) + "\n"
            for i in range(16)))
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        if hard != resource.RLIM_INFINITY and hard < 16 * 12 + 100:
            self.skipTest("the hard open-files limit here is %d" % hard)
        for registry in (BUILD_REGISTRY, os.environ["SBX_PROCESS_REGISTRY"]):
            env = dict(os.environ, SBX_STATE_DIR=os.path.join(TMP, "state"))
            p = subprocess.run([SBX, "--registry", registry, "rollout", "--config", cfg,
                                "--concurrency", "16", tasks], capture_output=True, env=env,
                               timeout=200, preexec_fn=lambda: resource.setrlimit(
                                   resource.RLIMIT_NOFILE, (40, hard)))
            err = p.stderr.decode()
            self.assertEqual(p.returncode, 0, err)
            self.assertNotIn("file descriptors", err)
            rows = rows_of_text(p.stdout.decode())
            want = "40\n%s\n" % ("unlimited" if hard == resource.RLIM_INFINITY else hard)
            self.assertEqual({k: r["commands"][0]["stdout"] for k, r in rows.items()},
                             {i: want for i in range(16)}, registry)

    def test_a_cap_held_by_another_process_queues_the_rollout(self):
        root = os.path.join(TMP, "cap-root")
        os.makedirs(root, exist_ok=True)
        cfg = write("cap.yaml", "data_source:\n  sandbox:\n    type: local\n    root: %s\n"
                    "    max_concurrency: 1\n" % root)
        state = os.path.join(TMP, "state-cap")  # a fresh one: the cap counts its every row
        shutil.rmtree(state, ignore_errors=True)
        env = dict(os.environ, SBX_STATE_DIR=state)
        sbx = [SBX, "--registry", BUILD_REGISTRY, "--config", cfg]
        holder = subprocess.run(sbx + ["create"], capture_output=True, env=env, timeout=60)
        self.assertEqual(holder.returncode, 0, holder.stderr)
        held = holder.stdout.decode().strip()
        self.addCleanup(subprocess.run, sbx + ["rm", held], env=env, timeout=60)
        tasks = write("cap.jsonl", "".join(
            json.dumps({"id": i, "commands": ["echo %d" % i]}) + "\n" for i in range(3)))
        # --wait bounds the queueing: every task fails with the cap's own message.
        p = subprocess.run(sbx + ["rollout", "--wait", "0.2", tasks], capture_output=True,
                           env=env, timeout=120)
        self.assertEqual(p.returncode, 1, p.stderr)
        for r in rows_of_text(p.stdout.decode()).values():
            self.assertEqual((r["ok"], r["infra_error"]["stage"], r["infra_error"]["status"],
                              r["infra_error"]["message"]),
                             (False, "create", "SBX_E_LIMIT",
                              "create: data source 'default' has 1 live sandboxes, its "
                              "max_concurrency; destroy one first"))
            self.assertGreaterEqual(r["timings"]["queued"] + r["timings"]["create"], 0.2)
        # Without a bound it waits; an interrupt ends the wait at once and marks the task.
        p = subprocess.Popen(sbx + ["rollout", "--concurrency", "1", tasks],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        time.sleep(1.0)
        self.assertIsNone(p.poll())
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 130, err)
        self.assertLess(time.monotonic() - t0, 10.0)  # 2 s promised; the machine is shared
        rows = rows_of_text(out.decode())
        self.assertEqual((rows[0]["interrupted"], rows[0]["infra_error"]["status"],
                          rows[0]["infra_error"]["message"]),
                         (True, "SBX_E_CANCELLED", "rollout: interrupted while waiting for a "
                          "place under the data source's caps"))
        self.assertEqual([rows[i]["infra_error"]["stage"] for i in (1, 2)], ["queued"] * 2)
        # Once the other process lets its sandbox go, the rollout runs every task.
        p = subprocess.Popen(sbx + ["rollout", tasks], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env)
        time.sleep(1.0)
        self.assertIsNone(p.poll())
        self.assertEqual(subprocess.run(sbx + ["rm", held], env=env, timeout=60).returncode, 0)
        out, err = p.communicate(timeout=120)
        self.assertEqual(p.returncode, 0, err)
        self.assertEqual({k: r["commands"][0]["stdout"] for k, r in rows_of_text(
            out.decode()).items()}, {i: "%d\n" % i for i in range(3)})
        self.assertEqual(os.listdir(root), [])


def rows_of_text(text):
    return {r["id"]: r for r in map(json.loads, text.splitlines())}


if __name__ == "__main__":
    unittest.main()
