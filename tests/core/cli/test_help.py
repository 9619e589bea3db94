"""The manual pages and --help come from one source (core/cli/help.c) and agree; bash
completion completes commands, ids from the ledger, aliases and data sources; `sbx ls` has -q,
--filter, AGE and short ids."""
import json
import os
import re
import shutil
import subprocess
import unittest

from clitest import BUILD_REGISTRY, SBX, SOURCE_DIR, TMP, run, write

MAN_DIR = os.environ["SBX_MAN_DIR"]
COMPLETION = os.environ["SBX_COMPLETION"]


def man_text(path):
    """The no-fill text of a page, roff escapes undone: what `man` shows of it."""
    with open(path) as f:
        src = f.read()
    body = src.split(".nf\n", 1)[1].split(".fi\n", 1)[0]
    return body.replace("\\&", "").replace("\\-", "-").replace("\\e", "\\")


def pages():
    """{page file: the `sbx` arguments whose --help it holds}: sbx.1 and one page per command
    that `sbx --help` lists."""
    out = {"sbx.1": []}
    _, text, _ = run("--help")
    for line in text.split("commands:", 1)[1].split("\n\n", 1)[0].splitlines():
        m = re.match(r"  ([a-z]+)[ ,]", line)
        if m:
            out["sbx-%s.1" % m.group(1)] = [m.group(1)]
    return out


class Manual(unittest.TestCase):
    def test_every_command_has_a_page_that_is_its_help(self):
        listed = pages()
        self.assertIn("sbx-exec.1", listed)
        self.assertIn("sbx-pause.1", listed)
        self.assertIn("sbx-config.1", listed)
        self.assertIn("sbx-job.1", listed)
        self.assertEqual(len(listed), 13, sorted(listed))
        for page, args in listed.items():
            rc, out, err = run(*(args + ["--help"]))
            self.assertEqual((rc, err), (0, ""), page)
            self.assertEqual(man_text(os.path.join(MAN_DIR, page)), out, page)

    def test_resume_and_status_share_pause_s_page(self):
        for name in ("resume", "status"):
            with open(os.path.join(MAN_DIR, "sbx-%s.1" % name)) as f:
                self.assertEqual(f.read(), ".so man1/sbx-pause.1\n")
            self.assertEqual(run(name, "--help")[1], run("pause", "--help")[1])

    def test_pages_render_without_warnings(self):
        if not shutil.which("man"):
            self.skipTest("man is not installed")
        for page in sorted(os.listdir(MAN_DIR)):
            with open(os.path.join(MAN_DIR, page)) as f:
                if f.read().startswith(".so "):
                    continue  # links, checked above
            p = subprocess.run(["man", "--warnings", "-l", os.path.join(MAN_DIR, page)],
                               capture_output=True, env=dict(os.environ, MANWIDTH="100"),
                               timeout=60)
            self.assertEqual((p.returncode, p.stderr), (0, b""), page)

    def test_section_5_and_7_name_what_they_document(self):
        cfg = man_text(os.path.join(MAN_DIR, "sbx-config.5"))
        for word in ("max_concurrency", "registry.d", "$SBX_STATE_DIR", "$SBX_LOG"):
            self.assertIn(word, cfg)
        plug = man_text(os.path.join(MAN_DIR, "sbx-plugin.7"))
        for word in ("sbx_plugin_register", "pkg-config --cflags sbx", "Sbx::headers"):
            self.assertIn(word, plug)


class Completion(unittest.TestCase):
    def complete(self, line, config=None):
        """The words bash completion offers for `line` (completing its last word)."""
        words = line.split(" ")
        script = ('source %s\nCOMP_WORDS=(%s)\nCOMP_CWORD=%d\n_sbx\nprintf "%%s\\n" '
                  '"${COMPREPLY[@]}"\n') % (
            COMPLETION, " ".join("'%s'" % w for w in words), len(words) - 1)
        env = dict(os.environ, SBX_STATE_DIR=os.path.join(TMP, "state-complete"),
                   SBX_REGISTRY=BUILD_REGISTRY, PATH=os.path.dirname(SBX) + ":" +
                   os.environ["PATH"])
        env.pop("SBX_CONFIG", None)
        p = subprocess.run(["bash", "-c", script], capture_output=True, env=env, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        return [w for w in p.stdout.decode().split("\n") if w]

    def test_commands(self):
        self.assertEqual(self.complete("sbx r"), ["rm", "resume", "rollout"])
        self.assertEqual(self.complete("sbx file "), ["read", "write", "ls", "stat", "mkdir",
                                                      "rm"])
        self.assertEqual(self.complete("sbx j"), ["job"])
        self.assertEqual(self.complete("sbx job "), ["ls", "status", "logs", "wait", "kill"])

    def test_ids_from_the_ledger(self):
        env = {"SBX_STATE_DIR": os.path.join(TMP, "state-complete")}
        rc, sid, err = run("create", registry=BUILD_REGISTRY, env_extra=env)
        self.assertEqual(rc, 0, err)
        sid = sid.strip()
        try:
            self.assertEqual(self.complete("sbx exec " + sid[:8]), [sid])
            self.assertEqual(self.complete("sbx file read " + sid[:8]), [sid])
        finally:
            self.assertEqual(run("rm", sid, registry=BUILD_REGISTRY, env_extra=env)[0], 0)
        self.assertEqual(self.complete("sbx exec " + sid[:8]), [])

    def test_aliases_and_data_sources(self):
        self.assertEqual(self.complete("sbx ls --alias d"), ["docker"])
        cfg = write("complete.yaml", "data_source:\n  sandbox:\n    type: local\n"
                    "data_sources:\n  - name: swe\n  - name: math\n")
        self.assertEqual(self.complete("sbx --config %s create --data-source " % cfg),
                         ["default", "swe", "math"])


class Ls(unittest.TestCase):
    def test_quiet_filter_age_and_short_ids(self):
        env = {"SBX_STATE_DIR": os.path.join(TMP, "state-ls")}
        ids = []
        for _ in range(2):
            rc, out, err = run("create", registry=BUILD_REGISTRY, env_extra=env)
            self.assertEqual(rc, 0, err)
            ids.append(out.strip())
        try:
            rc, out, _ = run("ls", "-q", registry=BUILD_REGISTRY, env_extra=env)
            self.assertEqual(out.split(), ids)
            rc, out, _ = run("ls", "-q", "--filter", "state=paused", registry=BUILD_REGISTRY,
                             env_extra=env)
            self.assertEqual(out, "")
            rc, out, err = run("ls", "--filter", "colour=red", registry=BUILD_REGISTRY,
                               env_extra=env)
            self.assertEqual(rc, 2)
            self.assertIn("bad filter 'colour=red'", err)
            rc, out, _ = run("ls", registry=BUILD_REGISTRY, env_extra=env)
            lines = out.splitlines()
            self.assertEqual(lines[0].split()[:3], ["ID", "STATE", "AGE"])
            short = ids[0].split(":")[0] + ":" + ids[0].split(":", 1)[1][:12]
            self.assertTrue(lines[1].startswith(short + " "), lines[1])
            self.assertRegex(lines[1].split()[2], r"^\d+[smhd]$")
            rc, out, _ = run("ls", "--no-trunc", registry=BUILD_REGISTRY, env_extra=env)
            self.assertTrue(out.splitlines()[1].startswith(ids[0] + " "))
        finally:
            for sid in ids:
                run("rm", sid, registry=BUILD_REGISTRY, env_extra=env)


class Habits(unittest.TestCase):
    """One prefix per message, JSON errors with --json, -v/--log-level, plugins --check."""

    def test_one_prefix_per_message(self):
        rc, out, err = run("frobnicate")
        self.assertEqual(rc, 2)
        self.assertTrue(err.startswith("sbx: unknown command 'frobnicate'\nusage: sbx "), err)
        missing = os.path.join(TMP, "no-such.yaml")
        for args in (["--config", missing, "create"], ["config", "check", missing]):
            rc, out, err = run(*args, registry=BUILD_REGISTRY)
            self.assertEqual(err, "sbx: config: %s: cannot open: No such file or directory\n"
                             % missing, args)

    def test_json_errors_are_json_objects(self):
        rc, out, err = run("exec", "--json", "nosuch:1", "--", "true", registry=BUILD_REGISTRY)
        self.assertEqual((rc, err), (2, ""))
        self.assertEqual(json.loads(out), {"error": {
            "status": "SBX_E_UNKNOWN_ALIAS",
            "message": "exec: unknown sandbox type 'nosuch'; known: custom, docker, e2b, k8s, "
                       "local"}})
        rc, out, err = run("ls", "--json", "--filter", "x=y", registry=BUILD_REGISTRY)
        self.assertEqual((rc, err), (2, ""))
        self.assertEqual(json.loads(out)["error"]["status"], "SBX_E_INVAL")
        # After -- or -c, --json belongs to the command run.
        rc, out, err = run("exec", "nosuch:1", "--", "x", "--json", registry=BUILD_REGISTRY)
        self.assertEqual((rc, out), (2, ""))
        self.assertTrue(err.startswith("sbx: exec: unknown sandbox type"), err)

    def test_verbose_and_log_level(self):
        # local logs its root and kill mechanism at debug when --check starts it.
        env = {"SBX_LOG": ""}
        args = ("plugins", "--check")
        quiet = run(*args, registry=BUILD_REGISTRY, env_extra=env)[2]
        self.assertNotIn("sbx: debug local: root ", quiet)
        rc, out, err = run("--log-level", "debug", *args, registry=BUILD_REGISTRY,
                           env_extra=env)
        self.assertEqual(rc, 0)
        self.assertIn("sbx: debug local: root ", err)
        self.assertEqual(run("-v", "-v", *args, registry=BUILD_REGISTRY, env_extra=env)[2], err)
        self.assertNotIn("sbx: debug", run("-v", *args, registry=BUILD_REGISTRY,
                                           env_extra=env)[2])
        rc, out, err = run("--log-level", "loud", "plugins")
        self.assertEqual(rc, 2)
        self.assertTrue(err.startswith("sbx: --log-level needs a level: error, warn, info or "
                                       "debug\n"), err)

    def test_plugins_check_tells_reachability(self):
        env = {"DOCKER_HOST": "unix://" + os.path.join(TMP, "no-engine.sock"),
               "E2B_API_KEY": "", "KUBECONFIG": os.path.join(TMP, "no-kubeconfig")}
        rc, out, err = run("plugins", "--check", registry=BUILD_REGISTRY, env_extra=env)
        self.assertEqual(rc, 0, err)
        rows = {l.split()[0]: l.split()[3] for l in out.splitlines()[1:]}
        self.assertEqual(rows, {"custom": "ok", "docker": "unreachable", "e2b": "unusable",
                                "k8s": "unusable", "local": "ok"})
        self.assertIn("engine at unix://%s does not answer" % env["DOCKER_HOST"][7:], out)
        rc, out, err = run("plugins", "--check", "--json", registry=BUILD_REGISTRY,
                           env_extra=env)
        checks = {e["alias"]: (e["check"], e["check_reason"]) for e in json.loads(out)}
        self.assertEqual(checks["docker"][0], "unreachable")
        self.assertEqual(checks["local"], ("ok", None))
        self.assertIn("no API key", checks["e2b"][1])


class Examples(unittest.TestCase):
    """The README's `sbx` block and examples/python_rollout.py run as written (build/ being
    this test's build tree) and leave no file in the repository."""

    def status(self):
        p = subprocess.run(["git", "-C", SOURCE_DIR, "status", "--porcelain",
                            "--untracked-files=all"], capture_output=True, timeout=60)
        return p.stdout if p.returncode == 0 else None

    def shell(self, script, preload=False):
        build = os.path.relpath(os.path.dirname(SBX), SOURCE_DIR)
        env = dict(os.environ, SBX_STATE_DIR=os.path.join(TMP, "state-examples"))
        if preload and os.environ.get("SBX_PY_PRELOAD"):
            env["LD_PRELOAD"] = os.environ["SBX_PY_PRELOAD"]
            env["ASAN_OPTIONS"] = "detect_leaks=0"
        for k in ("SBX_REGISTRY", "SBX_CONFIG", "SBX_LIBRARY"):
            env.pop(k, None)
        return subprocess.run(["bash", "-c", "set -e\n" + script.replace("build/", build + "/")],
                              cwd=SOURCE_DIR, capture_output=True, env=env, timeout=240)

    def test_readme_block(self):
        with open(os.path.join(SOURCE_DIR, "README.md")) as f:
            block = f.read().split("## The `sbx` command", 1)[1].split("```sh\n", 1)[1]
        block = block.split("```", 1)[0]
        before = self.status()
        p = self.shell(block)
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        self.assertIn(b"hi\n", p.stdout)
        self.assertEqual(self.status(), before)

    def test_python_rollout_docstring_command(self):
        with open(os.path.join(SOURCE_DIR, "examples", "python_rollout.py")) as f:
            cmd = [l.strip() for l in f if "python3 examples/python_rollout.py" in l][0]
        before = self.status()
        p = self.shell(cmd, preload=True)
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        rows = p.stdout.decode().splitlines()
        self.assertEqual(len(rows), 8, rows)
        self.assertIn("'id': 't0', 'ok': True", rows[0])
        self.assertIn("'id': 't7', 'ok': False", rows[7])
        self.assertEqual(self.status(), before)


if __name__ == "__main__":
    unittest.main()
