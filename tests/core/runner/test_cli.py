"""Faulty plugins through the `sbx` command: in a runner (the default for a plugin that does not
ship with sbx) a crash, an exit() or a hang is exit status 125 with a message naming the alias
and the signal or status, the plugin's own output never reaches the command's, and one
crashing task of a rollout leaves every other task's result in place."""
import json
import os
import re
import subprocess
import time
import unittest

SBX = os.environ["SBX_BIN"]
PROCESS = os.environ["ROGUE_PROCESS_REGISTRY"]
BUILD_REGISTRY = os.environ["SBX_BUILD_REGISTRY"]
BUILD_PROCESS_REGISTRY = os.environ["SBX_PROCESS_REGISTRY"]
TMP = os.environ["RUNNER_CLI_TMP"]

CRASHED = r"rogue: exec: plugin crashed: its runner \(pid \d+\) "


def run(*args, registry=PROCESS, stdin=None, timeout=120):
    env = dict(os.environ)
    env["SBX_STATE_DIR"] = os.path.join(TMP, "state")
    env.pop("SBX_REGISTRY", None)
    p = subprocess.run([SBX, "--registry", registry] + list(args), input=stdin,
                       capture_output=True, env=env, timeout=timeout)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def write(name, text):
    os.makedirs(TMP, exist_ok=True)
    path = os.path.join(TMP, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def config(extra=""):
    return write("rogue.yaml", "data_source:\n  sandbox:\n    type: rogue\n"
                 "data_sources:\n  - name: good\n    sandbox:\n      type: ok\n" + extra)


def create():
    rc, out, err = run("--config", config(), "create")
    if rc != 0:
        raise AssertionError("create: %d %s" % (rc, err))
    return out.strip()


class Exec(unittest.TestCase):
    def exec_fails(self, command, tail, *extra):
        rc, out, err = run("exec", *extra, create(), "-c", command)
        self.assertEqual((rc, out), (125, ""), err)
        self.assertRegex(err, r"(?m)^sbx: exec: " + CRASHED + tail + r"$")

    def test_segfault_is_125_naming_the_signal(self):
        self.exec_fails("segv", r"was killed by signal 11 \(SIGSEGV\)")

    def test_abort_is_125_naming_the_signal(self):
        self.exec_fails("abort", r"was killed by signal 6 \(SIGABRT\)")

    def test_exit_in_the_plugin_is_125_not_the_commands_status(self):
        self.exec_fails("exit 3", r"exited with status 3")

    def test_a_hang_ends_at_the_timeout_plus_the_grace_period(self):
        t0 = time.monotonic()
        rc, out, err = run("exec", "--timeout", "0.5", create(), "-c", "hang")
        self.assertEqual((rc, out), (125, ""), err)
        self.assertRegex(err, r"(?m)^sbx: exec: rogue: exec: plugin hung: its runner \(pid \d+\) "
                         r"was killed: a call to exec did not return within its timeout "
                         r"\(0\.5 s\) plus the grace period \(1 s\)$")
        self.assertLess(time.monotonic() - t0, 60)

    def test_the_plugins_own_stdout_and_stderr_stay_out_of_the_result(self):
        rc, out, err = run("exec", "--json", create(), "-c", "garbage")
        self.assertEqual(rc, 0, err)
        res = json.loads(out)
        self.assertEqual((res["exit_code"], res["stdout"], res["stderr"]), (0, "clean\n", ""))

    def test_late_callbacks_and_kept_memory_change_nothing(self):
        sid = create()
        self.assertEqual(run("exec", sid, "-c", "late")[:2], (0, "on time\n"))
        self.assertEqual(run("exec", sid, "-c", "leak")[:2], (0, "leaked\n"))

    def test_built_in_plugins_run_in_process_unless_the_registry_says_otherwise(self):
        for registry, parent in ((BUILD_REGISTRY, "sbx"), (BUILD_PROCESS_REGISTRY, "sbx-runner")):
            work = os.path.join(TMP, "local-root")
            os.makedirs(work, exist_ok=True)
            cfg = write("local.yaml", "data_source:\n  sandbox:\n    type: local\n"
                        "    work_dir: %s\n" % work)
            rc, sid, err = run("--config", cfg, "create", registry=registry)
            self.assertEqual(rc, 0, err)
            rc, out, err = run("exec", sid.strip(), "-c", "cat /proc/$PPID/comm",
                               registry=registry)
            self.assertEqual((rc, out), (0, parent + "\n"), err)
            self.assertEqual(run("rm", sid.strip(), registry=registry)[0], 0)


class Rollout(unittest.TestCase):
    def rows(self, path):
        with open(path, encoding="utf-8") as f:
            return {r["id"]: r for r in map(json.loads, f)}

    def test_one_crashing_task_leaves_every_other_result(self):
        # One at a time on the same runner: the task after the crash gets a fresh one.
        tasks = write("crash.jsonl", "".join(
            json.dumps({"id": i, "commands": ["segv" if i == 7 else "task-%d" % i]}) + "\n"
            for i in range(20)))
        out_path = os.path.join(TMP, "crash-results.jsonl")
        if os.path.exists(out_path):
            os.unlink(out_path)
        rc, out, err = run("rollout", "--config", config(), "--concurrency", "1",
                           "--output", out_path, tasks)
        self.assertEqual((rc, out), (1, ""), err)
        self.assertRegex(err, r"(?m)^rollout: 20 tasks: 19 ok, 0 with failing commands, 1 "
                         r"infrastructure errors; ")
        rows = self.rows(out_path)
        self.assertEqual(set(rows), set(range(20)))
        bad = rows[7]["infra_error"]
        self.assertEqual((bad["stage"], bad["status"]), ("exec", "SBX_E_PLUGIN_CRASHED"))
        self.assertRegex(bad["message"], "^" + CRASHED + r"was killed by signal 11 \(SIGSEGV\)$")
        for i in set(range(20)) - {7}:
            self.assertEqual((rows[i]["ok"], rows[i]["commands"][0]["stdout"]),
                             (True, "task-%d\n" % i), rows[i])

    def test_other_aliases_keep_working_beside_a_crash(self):
        tasks = write("mixed.jsonl", "".join(
            json.dumps({"id": i, "data_source": "default" if i == 3 else "good",
                        "commands": ["abort" if i == 3 else "exit 0"]}) + "\n"
            for i in range(12)))
        out_path = os.path.join(TMP, "mixed-results.jsonl")
        if os.path.exists(out_path):
            os.unlink(out_path)
        rc, out, err = run("rollout", "--config", config(), "--concurrency", "4",
                           "--output", out_path, tasks)
        self.assertEqual((rc, out), (1, ""), err)
        rows = self.rows(out_path)
        self.assertEqual(set(rows), set(range(12)))
        self.assertRegex(rows[3]["infra_error"]["message"],
                         "^" + CRASHED + r"was killed by signal 6 \(SIGABRT\)$")
        self.assertTrue(all(rows[i]["ok"] for i in range(12) if i != 3))


if __name__ == "__main__":
    unittest.main()
