"""Where Docker Engine (dockerd 20.10) and Podman's compatible service (4.3) answer the same
Engine API calls differently, pinned per engine: the raw answers the docker plugin has to
live with (plugins/docker/README.md, "Engine differences"). The plugin's own behaviour is the
same on both and is pinned by the other docker tests.

env: ENGINE_SOCK (the fixture's socket), SBX_TEST_ENGINE (podman or dockerd),
SBX_CONFORMANCE_IMAGE."""
import http.client
import io
import json
import os
import socket
import struct
import tarfile
import unittest

SOCK = os.environ["ENGINE_SOCK"]
ENGINE = os.environ["SBX_TEST_ENGINE"]
IMAGE = os.environ["SBX_CONFORMANCE_IMAGE"]
DOCKER = ENGINE == "dockerd"
ULIMITS = [{"Name": "nofile", "Soft": 1024, "Hard": 1024},
           {"Name": "nproc", "Soft": 1024, "Hard": 1024}]


class Conn(http.client.HTTPConnection):
    def __init__(self):
        super().__init__("localhost", timeout=120)

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(120)
        self.sock.connect(SOCK)


def call(method, path, body=None, ctype="application/json"):
    """(status, body bytes, headers) of one request to /v1.41 + path."""
    c = Conn()
    if body is not None and ctype == "application/json":
        body = json.dumps(body).encode()
    c.request(method, "/v1.41" + path, body=body, headers={"Content-Type": ctype})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data, {k.lower(): v for k, v in r.getheaders()}


def message(data):
    return json.loads(data)["message"]


def demux(data):
    """{1: stdout bytes, 2: stderr bytes} of a multiplexed exec stream."""
    out = {1: b"", 2: b""}
    while data:
        kind, size = struct.unpack(">BxxxI", data[:8])
        out[kind] += data[8:8 + size]
        data = data[8 + size:]
    return out


def tar_of(name, content):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        info = tarfile.TarInfo(name)
        info.size = len(content)
        t.addfile(info, io.BytesIO(content))
    return buf.getvalue()


class EngineDifferences(unittest.TestCase):
    def container(self, **host_config):
        hc = {"Ulimits": ULIMITS}
        hc.update(host_config)
        status, data, _ = call("POST", "/containers/create", {
            "Image": IMAGE, "Entrypoint": ["/bin/sh", "-c", "while :; do sleep 3600; done"],
            "Cmd": [], "Labels": {"sbx.owner": "docker-test", "sbx.run": "t-engines",
                       "sbx.test-tree": os.environ.get("SBX_TEST_TREE", "")},
            "HostConfig": hc})
        self.assertEqual(status, 201, data)
        cid = json.loads(data)["Id"]
        self.addCleanup(call, "DELETE", "/containers/%s?force=true&v=true" % cid)
        status, data, _ = call("POST", "/containers/%s/start" % cid)
        self.assertEqual(status, 204, data)
        return cid

    def exec(self, cid, cmd, **extra):
        """(exit code, {1: stdout, 2: stderr}) of an exec without stdin."""
        body = {"AttachStdout": True, "AttachStderr": True, "Cmd": cmd}
        body.update(extra)
        status, data, _ = call("POST", "/containers/%s/exec" % cid, body)
        self.assertEqual(status, 201, data)
        eid = json.loads(data)["Id"]
        status, data, _ = call("POST", "/exec/%s/start" % eid, {"Detach": False, "Tty": False})
        self.assertEqual(status, 200, data)
        _, info, _ = call("GET", "/exec/%s/json" % eid)
        return json.loads(info)["ExitCode"], demux(data)

    def test_ping_names_the_engine_and_api_1_41(self):
        status, data, headers = call("GET", "/_ping")
        self.assertEqual((status, data), (200, b"OK"))
        self.assertEqual(headers["api-version"], "1.41")
        want = "Docker/20.10." if DOCKER else "Libpod/4."
        self.assertTrue(headers["server"].startswith(want), headers["server"])

    def test_pausing_twice_and_resuming_a_running_container(self):
        cid = self.container()
        self.assertEqual(call("POST", "/containers/%s/pause" % cid)[0], 204)
        status, data, _ = call("POST", "/containers/%s/pause" % cid)
        if DOCKER:
            self.assertEqual((status, message(data)),
                             (409, "Container %s is already paused" % cid))
        else:
            self.assertEqual(status, 500)
            self.assertIn("is already paused: container state improper", message(data))
        self.assertEqual(call("POST", "/containers/%s/unpause" % cid)[0], 204)
        status, data, _ = call("POST", "/containers/%s/unpause" % cid)
        self.assertEqual(status, 500)
        if DOCKER:
            self.assertEqual(message(data), "Container %s is not paused" % cid)
        else:
            self.assertIn("is not paused, can't unpause", message(data))

    def test_archive_under_a_read_only_root(self):
        """Docker's archive endpoint works on the container's files as seen from the host: a
        tmpfs does not show there, and uploads outside volumes are refused. Podman works inside
        the container's mounts. Both take an anonymous volume, which the plugin mounts on /tmp
        for read_only: true."""
        cid = self.container(ReadonlyRootfs=True, Tmpfs={"/scratch": "mode=1777"},
                             Mounts=[{"Type": "volume", "Target": "/tmp"}])
        self.assertEqual(self.exec(cid, ["sh", "-c", "echo hi >/scratch/f"])[0], 0)
        status, _, _ = call("HEAD", "/containers/%s/archive?path=/scratch/f" % cid)
        self.assertEqual(status, 404 if DOCKER else 200)
        status, data, _ = call("PUT", "/containers/%s/archive?path=/scratch" % cid,
                               tar_of("up", b"x"), "application/x-tar")
        if DOCKER:
            self.assertEqual((status, message(data)),
                             (500, "container rootfs is marked read-only"))
        else:
            self.assertEqual(status, 200, data)
        status, data, _ = call("PUT", "/containers/%s/archive?path=/tmp" % cid,
                               tar_of("up", b"x"), "application/x-tar")
        self.assertEqual(status, 200, data)
        self.assertEqual(self.exec(cid, ["cat", "/tmp/up"]), (0, {1: b"x", 2: b""}))
        status, data, _ = call("PUT", "/containers/%s/archive?path=/" % cid,
                               tar_of("up", b"x"), "application/x-tar")
        self.assertEqual(status, 500)
        self.assertIn("read-only", message(data))

    def test_anonymous_volume_goes_with_the_container(self):
        def volumes():
            return {v["Name"] for v in json.loads(call("GET", "/volumes")[1])["Volumes"] or []}
        before = volumes()
        cid = self.container(Mounts=[{"Type": "volume", "Target": "/tmp"}])
        self.assertEqual(len(volumes() - before), 1)
        status, _, _ = call("DELETE", "/containers/%s?force=true&v=true" % cid)
        self.assertEqual(status, 204)
        self.assertEqual(volumes() - before, set())

    def test_background_child_holding_the_stream(self):
        """Docker keeps an exec's stream open while anything holds its stdout; Podman ends
        it when the exec's process exits."""
        cid = self.container()
        code, out = self.exec(cid, ["sh", "-c", "(sleep 1; echo late) & echo early"])
        self.assertEqual(code, 0)
        self.assertEqual(out[1], b"early\nlate\n" if DOCKER else b"early\n")

    def test_missing_cwd_and_missing_command(self):
        """The runtime's refusal: Docker exits 126 and reports on stdout, Podman 127 on
        stderr. The plugin checks a cwd itself and runs commands under /bin/sh, so users see
        neither."""
        cid = self.container()
        code, out = self.exec(cid, ["pwd"], WorkingDir="/no/such")
        stream = 1 if DOCKER else 2
        self.assertEqual(code, 126 if DOCKER else 127)
        self.assertIn(b'chdir to cwd ("/no/such")', out[stream])
        self.assertEqual(out[3 - stream], b"")
        code, out = self.exec(cid, ["/no/such"])
        self.assertEqual(code, 126 if DOCKER else 127)
        self.assertIn(b'exec: "/no/such": stat /no/such: no such file or directory', out[stream])

    def test_the_same_on_both(self):
        """Signal deaths read as 128+N, an exec leads its own session, a missing container is
        a 404 on both."""
        cid = self.container()
        self.assertEqual(self.exec(cid, ["sh", "-c", "kill -9 $$"])[0], 137)
        code, out = self.exec(cid, ["sh", "-c", "cut -d' ' -f1,6 /proc/$$/stat"])
        pid, sid = out[1].split()
        self.assertEqual((code, pid), (0, sid))
        call("DELETE", "/containers/%s?force=true&v=true" % cid)
        self.assertEqual(call("DELETE", "/containers/%s?force=true" % cid)[0], 404)


if __name__ == "__main__":
    unittest.main()
