#!/usr/bin/env python3
"""A stand-in Kubernetes API server for the k8s plugin tests (k8s.md section 4.2).

Python stdlib only. It serves HTTPS with a CA made at start, bearer auth, discovery, the pods
REST subset with resourceVersion/uid and Status error shapes, watch, a lifecycle simulation
with fault injection by image name, and pods/exec over WebSocket (v5.channel.k8s.io and/or
v4.channel.k8s.io) running real local processes with cwd = the pod's private directory.

Usage: standin.py --dir DIR [--port N] [--exec-mode both|v5|legacy] [--ready-delay S]
                  [--exec-start-delay S]
On start it writes DIR/ca.crt, DIR/token, DIR/kubeconfig, DIR/port and DIR/pid (last).

Fault injection:
  image contains "imagepullbackoff"  -> ErrImagePull, then ImagePullBackOff
  image contains "unschedulable"     -> PodScheduled=False reason Unschedulable
  image contains "configerror"       -> CreateContainerConfigError
  image contains "exits"             -> entrypoint exits 1, phase Failed
  image contains "never-ready"       -> Running but Ready=False forever
  POST /_standin/faults {"429": N, "503": N} (no auth) -> next N API requests get that status
  GET /_standin/stats -> counters (JSON)
"""
import argparse
import base64
import hashlib
import json
import os
import select
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
NODE = "standin-node"


def now_iso():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def status_obj(code, reason, message, details=None):
    o = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
         "message": message, "reason": reason, "code": code}
    if details is not None:
        o["details"] = details
    return o


class Store:
    """Pods keyed by (namespace, name), an event log for watches, and the faults."""

    def __init__(self, args):
        self.args = args
        self.lock = threading.Condition()
        self.pods = {}
        self.rv = 100
        self.events = []  # (rv, type, ns, obj)
        self.faults = {"429": 0, "503": 0}
        self.stats = {"requests": 0, "429": 0, "503": 0, "creates": 0, "deletes": 0,
                      "execs": 0, "watches": 0, "exec_protocols": {}, "request_times": []}
        self.procs = {}  # (ns, name) -> list of Popen
        self.timers = []

    def next_rv(self):
        self.rv += 1
        return str(self.rv)

    def emit(self, typ, ns, pod):
        """Caller holds the lock. Bumps the RV and records the event."""
        pod["metadata"]["resourceVersion"] = self.next_rv()
        self.events.append((int(pod["metadata"]["resourceVersion"]), typ, ns,
                            json.loads(json.dumps(pod))))
        if len(self.events) > self.args.history:
            del self.events[: len(self.events) - self.args.history]
        self.lock.notify_all()

    def later(self, delay, fn):
        t = threading.Timer(delay, fn)
        t.daemon = True
        t.start()

    def pod_dir(self, ns, name):
        return os.path.join(self.args.dir, "pods", ns, name)


STORE = None


def container_status(pod, state, ready):
    c = pod["spec"]["containers"][0]
    return [{"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": ready,
             "restartCount": 0, "started": "running" in state, "state": state,
             "lastState": {}}]


def set_cond(pod, typ, val, reason=None, message=None):
    conds = pod["status"].setdefault("conditions", [])
    conds[:] = [c for c in conds if c["type"] != typ]
    c = {"type": typ, "status": val, "lastProbeTime": None, "lastTransitionTime": now_iso()}
    if reason:
        c["reason"] = reason
    if message:
        c["message"] = message
    conds.append(c)


def lifecycle(ns, name, uid):
    """Drives one pod from Pending to its simulated end state."""
    s = STORE
    d = s.args.ready_delay

    def step(fn):
        with s.lock:
            pod = s.pods.get((ns, name))
            if not pod or pod["metadata"]["uid"] != uid or "deletionTimestamp" in pod["metadata"]:
                return False
            r = fn(pod)
            if r is not False:
                s.emit("MODIFIED", ns, pod)
            return True

    image = s.pods[(ns, name)]["spec"]["containers"][0].get("image", "")

    def schedule(pod):
        if "unschedulable" in image:
            set_cond(pod, "PodScheduled", "False", "Unschedulable",
                     "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are "
                     "available: 1 No preemption victims found for incoming pod.")
            return
        pod["spec"]["nodeName"] = NODE
        pod["status"]["hostIP"] = "127.0.0.1"
        pod["status"]["startTime"] = now_iso()
        set_cond(pod, "PodScheduled", "True")
        set_cond(pod, "Initialized", "True")
        set_cond(pod, "Ready", "False", "ContainersNotReady",
                 "containers with unready status: [%s]" % pod["spec"]["containers"][0]["name"])
        pod["status"]["containerStatuses"] = container_status(
            pod, {"waiting": {"reason": "ContainerCreating"}}, False)

    def start(pod):
        if "unschedulable" in image:
            return False
        if "imagepullbackoff" in image:
            pod["status"]["containerStatuses"] = container_status(pod, {"waiting": {
                "reason": "ErrImagePull",
                "message": 'failed to pull and unpack image "%s": not found' % image}}, False)
            s.later(d, lambda: step(lambda p: p["status"].__setitem__(
                "containerStatuses", container_status(p, {"waiting": {
                    "reason": "ImagePullBackOff",
                    "message": 'Back-off pulling image "%s"' % image}}, False))))
            return
        if "configerror" in image:
            pod["status"]["containerStatuses"] = container_status(pod, {"waiting": {
                "reason": "CreateContainerConfigError",
                "message": 'secret "sandbox-env" not found'}}, False)
            return
        if "exits" in image:
            pod["status"]["phase"] = "Failed"
            pod["status"]["containerStatuses"] = container_status(pod, {"terminated": {
                "exitCode": 1, "reason": "Error", "startedAt": now_iso(),
                "finishedAt": now_iso()}}, False)
            return
        os.makedirs(s.pod_dir(ns, name), exist_ok=True)
        pod["status"]["phase"] = "Running"
        pod["status"]["podIP"] = "10.0.0.%d" % (hash(name) % 200 + 2)
        ready = "never-ready" not in image
        pod["status"]["containerStatuses"] = container_status(
            pod, {"running": {"startedAt": now_iso()}}, ready)
        if ready:
            set_cond(pod, "ContainersReady", "True")
            set_cond(pod, "Ready", "True")
        ads = pod["spec"].get("activeDeadlineSeconds")
        if isinstance(ads, int) and ads > 0:
            s.later(ads, lambda: step(deadline))

    def deadline(pod):
        if pod["status"].get("phase") != "Running":
            return False
        pod["status"]["phase"] = "Failed"
        pod["status"]["reason"] = "DeadlineExceeded"
        pod["status"]["message"] = "Pod was active on the node longer than the specified deadline"
        kill_pod_procs(ns, name)

    def run():
        time.sleep(d / 2)
        if not step(schedule):
            return
        time.sleep(d / 2)
        step(start)

    threading.Thread(target=run, daemon=True).start()


def pod_pids(name):
    """Every process of a pod, as its container holds them: whatever carries the HOSTNAME
    the kubelet gives the pod's processes (children inherit it), including what an exec
    left running in a session of its own."""
    want = b"\0HOSTNAME=" + name.encode() + b"\0"
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open("/proc/%s/environ" % d, "rb") as f:
                env = b"\0" + f.read()
        except OSError:
            continue
        if want in env:
            pids.append(int(d))
    return pids


def kill_pod_procs(ns, name):
    """Deleting a pod ends its container: every process in it."""
    for p in STORE.procs.pop((ns, name), []):
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
    for _ in range(50):  # until a pass finds none: a process may fork meanwhile
        pids = pod_pids(name)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def valid_name(n):
    if not n or len(n) > 253:
        return False
    ok = set("abcdefghijklmnopqrstuvwxyz0123456789-.")
    return all(ch in ok for ch in n) and n[0].isalnum() and n[-1].isalnum()


def validate_pod(pod, name):
    causes = []
    if not valid_name(name):
        causes.append({"reason": "FieldValueInvalid", "field": "metadata.name",
                       "message": "Invalid value: %s: a lowercase RFC 1123 subdomain must "
                                  "consist of lower case alphanumeric characters, '-' or '.'"
                                  % json.dumps(name)})
    spec = pod.get("spec") or {}
    cs = spec.get("containers") or []
    if not cs:
        causes.append({"reason": "FieldValueRequired", "field": "spec.containers",
                       "message": "Required value"})
    for i, c in enumerate(cs):
        if not c.get("name"):
            causes.append({"reason": "FieldValueRequired", "field": "spec.containers[%d].name"
                           % i, "message": "Required value"})
        if not c.get("image"):
            causes.append({"reason": "FieldValueRequired", "field": "spec.containers[%d].image"
                           % i, "message": "Required value"})
    rp = spec.get("restartPolicy", "Always")
    if rp not in ("Always", "OnFailure", "Never"):
        causes.append({"reason": "FieldValueNotSupported", "field": "spec.restartPolicy",
                       "message": "Unsupported value: %s" % json.dumps(rp)})
    for k, v in ((pod.get("metadata") or {}).get("labels") or {}).items():
        if not isinstance(v, str) or len(v) > 63 or any(
                not (ch.isalnum() or ch in "-_.") for ch in v) or (
                v and not (v[0].isalnum() and v[-1].isalnum())):
            causes.append({"reason": "FieldValueInvalid", "field": "metadata.labels",
                           "message": "Invalid value: %s: a valid label must be an empty string "
                                      "or consist of alphanumeric characters, '-', '_' or '.'"
                                      % json.dumps(v)})
    return causes


def match_labels(pod, sel):
    if not sel:
        return True
    labels = pod["metadata"].get("labels") or {}
    for term in sel.split(","):
        term = term.strip()
        if not term:
            continue
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k) == v:
                return False
        elif "=" in term:
            k, v = term.replace("==", "=").split("=", 1)
            if labels.get(k) != v:
                return False
        elif term not in labels:
            return False
    return True


def match_fields(pod, sel):
    if not sel:
        return True
    for term in sel.split(","):
        if "=" not in term:
            continue
        k, v = term.replace("==", "=").split("=", 1)
        if k == "metadata.name" and pod["metadata"]["name"] != v:
            return False
        if k == "metadata.namespace" and pod["metadata"]["namespace"] != v:
            return False
        if k == "status.phase" and pod["status"].get("phase") != v:
            return False
    return True


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "standin-apiserver"

    def log_message(self, fmt, *a):
        if STORE.args.verbose:
            sys.stderr.write("standin: " + (fmt % a) + "\n")

    # ---- plumbing ----
    def send_json(self, code, obj, extra=None):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Kubernetes-PF-FlowSchema-UID", "standin-flowschema")
        self.send_header("X-Kubernetes-PF-PriorityLevel-UID", "standin-plevel")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_status(self, code, reason, message, details=None):
        self.send_json(code, status_obj(code, reason, message, details))

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def do_GET(self):
        self.route("GET")

    def do_POST(self):
        self.route("POST")

    def do_DELETE(self):
        self.route("DELETE")

    def do_PUT(self):
        self.route("PUT")

    def do_PATCH(self):
        self.route("PATCH")

    def route(self, method):
        u = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(u.query, keep_blank_values=True)
        parts = [p for p in u.path.split("/") if p]
        s = STORE
        if parts[:1] == ["_standin"]:
            return self.control(method, parts[1:], q)
        auth = self.headers.get("Authorization", "")
        tok = auth[7:] if auth.startswith("Bearer ") else None
        if tok not in (s.args.token_value, "readonly"):
            self.body()
            return self.send_status(401, "Unauthorized", "Unauthorized")
        is_exec = len(parts) == 7 and parts[6] in ("exec", "attach")
        with s.lock:
            if not is_exec:
                s.stats["requests"] += 1
                s.stats["request_times"].append(time.monotonic())
                for code in ("429", "503"):
                    if s.faults[code] > 0:
                        s.faults[code] -= 1
                        s.stats[code] += 1
                        fault = code
                        break
                else:
                    fault = None
            else:
                fault = None
        if fault == "429":
            self.body()
            body = b"Too many requests, please try again later.\n"
            self.send_response(429)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Retry-After", "1")
            self.send_header("X-Kubernetes-PF-FlowSchema-UID", "standin-flowschema")
            self.send_header("X-Kubernetes-PF-PriorityLevel-UID", "standin-plevel")
            self.end_headers()
            self.wfile.write(body)
            return
        if fault == "503":
            self.body()
            return self.send_json(503, status_obj(503, "ServiceUnavailable",
                                                  "the server is currently unable to handle "
                                                  "the request"), {"Retry-After": "1"})
        readonly = tok == "readonly"
        if parts == ["version"]:
            return self.send_json(200, {"major": "1", "minor": "31", "gitVersion": "v1.31.0",
                                        "gitCommit": "standin", "gitTreeState": "clean",
                                        "buildDate": "2026-01-01T00:00:00Z",
                                        "goVersion": "go1.22", "compiler": "gc",
                                        "platform": "linux/amd64"})
        if parts == ["api"]:
            return self.send_json(200, {"kind": "APIVersions", "versions": ["v1"],
                                        "serverAddressByClientCIDRs": [
                                            {"clientCIDR": "0.0.0.0/0",
                                             "serverAddress": "127.0.0.1"}]})
        if parts == ["apis"]:
            return self.send_json(200, {"kind": "APIGroupList", "apiVersion": "v1",
                                        "groups": []})
        if parts == ["api", "v1"]:
            verbs = ["create", "delete", "deletecollection", "get", "list", "patch",
                     "update", "watch"]
            return self.send_json(200, {
                "kind": "APIResourceList", "groupVersion": "v1", "resources": [
                    {"name": "pods", "singularName": "pod", "namespaced": True,
                     "kind": "Pod", "verbs": verbs, "shortNames": ["po"],
                     "categories": ["all"]},
                    {"name": "pods/exec", "singularName": "", "namespaced": True,
                     "kind": "PodExecOptions", "verbs": ["create", "get"]},
                    {"name": "pods/status", "singularName": "", "namespaced": True,
                     "kind": "Pod", "verbs": ["get", "patch", "update"]},
                    {"name": "namespaces", "singularName": "namespace", "namespaced": False,
                     "kind": "Namespace", "verbs": ["get", "list"], "shortNames": ["ns"]}]})
        if len(parts) == 4 and parts[:3] == ["api", "v1", "namespaces"] and method == "GET":
            return self.send_json(200, {"kind": "Namespace", "apiVersion": "v1", "metadata": {
                "name": parts[3], "uid": str(uuid.uuid5(uuid.NAMESPACE_DNS, parts[3])),
                "resourceVersion": "1"}, "spec": {"finalizers": ["kubernetes"]},
                "status": {"phase": "Active"}})
        if len(parts) >= 5 and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "pods":
            ns = parts[3]
            if len(parts) == 5:
                if method == "POST":
                    return self.create(ns, q, readonly)
                if method == "GET":
                    if q.get("watch", [""])[0] in ("1", "true"):
                        return self.watch(ns, q)
                    return self.list(ns, q)
                if method == "DELETE":
                    return self.delete_collection(ns, q, readonly)
            elif len(parts) == 6:
                if method == "GET":
                    return self.get(ns, parts[5])
                if method == "DELETE":
                    return self.delete(ns, parts[5], q, readonly)
            elif len(parts) == 7 and parts[6] == "exec":
                return self.exec_(method, ns, parts[5], q, readonly)
        self.body()
        return self.send_status(404, "NotFound", "the server could not find the requested "
                                                 "resource")

    def control(self, method, parts, q):
        s = STORE
        if parts == ["faults"] and method == "POST":
            req = json.loads(self.body() or b"{}")
            with s.lock:
                for k in ("429", "503"):
                    if k in req:
                        s.faults[k] = int(req[k])
            return self.send_json(200, s.faults)
        if parts == ["stats"]:
            with s.lock:
                st = dict(s.stats)
                since = int(q.get("since", ["0"])[0] or 0)
                times = st.pop("request_times")[since:]
                # Most requests seen in any one-second window (after the first `since`).
                mx, j = 0, 0
                for i in range(len(times)):
                    while times[i] - times[j] >= 1.0:
                        j += 1
                    mx = max(mx, i - j + 1)
                st["max_requests_per_second"] = mx
                st["pods"] = sorted("%s/%s" % k for k in s.pods)
            return self.send_json(200, st)
        self.send_json(404, {})

    # ---- pods ----
    def create(self, ns, q, readonly):
        s = STORE
        raw = self.body()
        if readonly:
            return self.send_status(403, "Forbidden", 'pods is forbidden: User "readonly" '
                                    'cannot create resource "pods" in API group "" in the '
                                    'namespace "%s"' % ns, {"kind": "pods"})
        try:
            pod = json.loads(raw)
        except ValueError as e:
            return self.send_status(400, "BadRequest", "error decoding body: %s" % e)
        md = pod.setdefault("metadata", {})
        name = md.get("name") or ""
        if not name and md.get("generateName"):
            name = md["generateName"] + uuid.uuid4().hex[:5]
        causes = validate_pod(pod, name)
        if causes:
            return self.send_status(422, "Invalid", 'Pod "%s" is invalid: %s' % (
                name, "; ".join("%s: %s" % (c["field"], c["message"]) for c in causes)),
                {"name": name, "kind": "Pod", "causes": causes})
        dry = q.get("dryRun", [""])[0] == "All"
        with s.lock:
            if (ns, name) in s.pods:
                return self.send_status(409, "AlreadyExists", 'pods "%s" already exists' % name,
                                        {"name": name, "kind": "pods"})
            md["name"] = name
            md["namespace"] = ns
            md["uid"] = str(uuid.uuid4())
            md["creationTimestamp"] = now_iso()
            md.pop("generateName", None)
            spec = pod.setdefault("spec", {})
            spec.setdefault("restartPolicy", "Always")
            spec.setdefault("terminationGracePeriodSeconds", 30)
            spec.setdefault("dnsPolicy", "ClusterFirst")
            spec.setdefault("schedulerName", "default-scheduler")
            for c in spec["containers"]:
                c.setdefault("imagePullPolicy", "IfNotPresent")
                c.setdefault("terminationMessagePath", "/dev/termination-log")
            pod["apiVersion"] = "v1"
            pod["kind"] = "Pod"
            pod["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
            if dry:
                pod["metadata"]["resourceVersion"] = str(s.rv)
                return self.send_json(201, pod)
            s.pods[(ns, name)] = pod
            s.stats["creates"] += 1
            s.emit("ADDED", ns, pod)
            out = json.loads(json.dumps(pod))
        lifecycle(ns, name, out["metadata"]["uid"])
        self.send_json(201, out)

    def get(self, ns, name):
        with STORE.lock:
            pod = STORE.pods.get((ns, name))
            out = json.loads(json.dumps(pod)) if pod else None
        if not out:
            return self.send_status(404, "NotFound", 'pods "%s" not found' % name,
                                    {"name": name, "kind": "pods"})
        self.send_json(200, out)

    def list(self, ns, q):
        ls = q.get("labelSelector", [""])[0]
        fs = q.get("fieldSelector", [""])[0]
        with STORE.lock:
            items = [json.loads(json.dumps(p)) for (n, _), p in sorted(STORE.pods.items())
                     if n == ns and match_labels(p, ls) and match_fields(p, fs)]
            rv = str(STORE.rv)
        self.send_json(200, {"kind": "PodList", "apiVersion": "v1",
                             "metadata": {"resourceVersion": rv}, "items": items})

    def watch(self, ns, q):
        s = STORE
        ls = q.get("labelSelector", [""])[0]
        fs = q.get("fieldSelector", [""])[0]
        timeout = float(q.get("timeoutSeconds", ["300"])[0] or 300)
        bookmarks = q.get("allowWatchBookmarks", [""])[0] in ("1", "true")
        rv = q.get("resourceVersion", [""])[0]
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def chunk(obj):
            data = (json.dumps(obj) + "\n").encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        deadline = time.monotonic() + timeout
        with s.lock:
            s.stats["watches"] += 1
            if rv in ("", "0"):
                # No RV: synthetic ADDED for current state, then changes.
                last = s.rv
                initial = [json.loads(json.dumps(p)) for (n, _), p in sorted(s.pods.items())
                           if n == ns and match_labels(p, ls) and match_fields(p, fs)]
            else:
                last = int(rv)
                initial = []
                if s.events and last < s.events[0][0] - 1:
                    initial = None
        try:
            if initial is None:
                chunk({"type": "ERROR", "object": status_obj(
                    410, "Expired", "too old resource version: %d (%d)" % (
                        last, s.events[0][0] - 1))})
                self.wfile.write(b"0\r\n\r\n")
                return
            for p in initial:
                chunk({"type": "ADDED", "object": p})
            sent_bookmark = False
            while True:
                with s.lock:
                    evs = [e for e in s.events if e[0] > last]
                    if not evs:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            break
                        s.lock.wait(min(left, 0.5))
                        evs = [e for e in s.events if e[0] > last]
                for (erv, typ, ens, obj) in evs:
                    last = erv
                    if ens == ns and match_labels(obj, ls) and match_fields(obj, fs):
                        chunk({"type": typ, "object": obj})
                if bookmarks and not sent_bookmark:
                    sent_bookmark = True
                    chunk({"type": "BOOKMARK", "object": {
                        "kind": "Pod", "apiVersion": "v1",
                        "metadata": {"resourceVersion": str(last)}}})
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True

    def delete(self, ns, name, q, readonly):
        s = STORE
        raw = self.body()
        if readonly:
            return self.send_status(403, "Forbidden", 'pods "%s" is forbidden: User '
                                    '"readonly" cannot delete resource "pods"' % name,
                                    {"name": name, "kind": "pods"})
        opts = {}
        if raw:
            try:
                opts = json.loads(raw)
            except ValueError:
                return self.send_status(400, "BadRequest", "error decoding body")
        grace = q.get("gracePeriodSeconds", [None])[0]
        grace = int(grace) if grace not in (None, "") else opts.get("gracePeriodSeconds")
        with s.lock:
            pod = s.pods.get((ns, name))
            if not pod:
                return self.send_status(404, "NotFound", 'pods "%s" not found' % name,
                                        {"name": name, "kind": "pods"})
            pre = (opts.get("preconditions") or {}).get("uid")
            if pre and pre != pod["metadata"]["uid"]:
                return self.send_status(409, "Conflict", 'Operation cannot be fulfilled on '
                                        'Pod "%s": Precondition failed: UID in precondition: '
                                        '%s, UID in object meta: %s' % (
                                            name, pre, pod["metadata"]["uid"]),
                                        {"name": name, "kind": "Pod"})
            if grace is None:
                grace = pod["spec"].get("terminationGracePeriodSeconds", 30)
            if grace < 0:
                grace = 1
            if not pod["spec"].get("nodeName") or pod["status"].get("phase") in (
                    "Failed", "Succeeded"):
                grace = 0
            s.stats["deletes"] += 1
            if grace == 0:
                self.remove(ns, name)
                out = json.loads(json.dumps(pod))
            else:
                if "deletionTimestamp" not in pod["metadata"]:
                    pod["metadata"]["deletionTimestamp"] = now_iso()
                    pod["metadata"]["deletionGracePeriodSeconds"] = grace
                    s.emit("MODIFIED", ns, pod)
                    uid = pod["metadata"]["uid"]

                    def finish():
                        with s.lock:
                            p = s.pods.get((ns, name))
                            if p and p["metadata"]["uid"] == uid:
                                self.remove(ns, name)

                    # The simulated entrypoint traps TERM, so the kubelet finishes early.
                    s.later(min(grace, s.args.term_delay), finish)
                out = json.loads(json.dumps(pod))
        self.send_json(200, out)

    def remove(self, ns, name):
        """Caller holds the lock."""
        s = STORE
        pod = s.pods.pop((ns, name))
        s.emit("DELETED", ns, pod)
        kill_pod_procs(ns, name)
        shutil.rmtree(s.pod_dir(ns, name), ignore_errors=True)

    def delete_collection(self, ns, q, readonly):
        self.body()
        if readonly:
            return self.send_status(403, "Forbidden", "pods is forbidden")
        ls = q.get("labelSelector", [""])[0]
        with STORE.lock:
            names = [n for (pns, n), p in STORE.pods.items() if pns == ns and match_labels(p, ls)]
            items = []
            for n in names:
                items.append(STORE.pods[(ns, n)])
                self.remove(ns, n)
        self.send_json(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {},
                             "items": items})

    # ---- exec ----
    def exec_(self, method, ns, name, q, readonly):
        s = STORE
        self.body()
        if method == "POST" or self.headers.get("Upgrade", "").lower() != "websocket":
            return self.send_status(400, "BadRequest", "Upgrade request required")
        if readonly:
            return self.send_status(403, "Forbidden", 'pods "%s" is forbidden: User "readonly" '
                                    'cannot get resource "pods/exec"' % name,
                                    {"name": name, "kind": "pods"})
        with s.lock:
            pod = s.pods.get((ns, name))
            pod = json.loads(json.dumps(pod)) if pod else None
        if not pod:
            return self.send_status(404, "NotFound", 'pods "%s" not found' % name,
                                    {"name": name, "kind": "pods"})
        if not pod["spec"].get("nodeName"):
            return self.send_status(400, "BadRequest", "pod %s does not have a host assigned"
                                    % name)
        cname = q.get("container", [pod["spec"]["containers"][0]["name"]])[0]
        if cname not in [c["name"] for c in pod["spec"]["containers"]]:
            return self.send_status(400, "BadRequest", "container %s is not valid for pod %s"
                                    % (cname, name))
        flag = lambda k: q.get(k, [""])[0] in ("1", "true")
        want_in, want_out, want_err = flag("stdin"), flag("stdout"), flag("stderr")
        if not (want_in or want_out or want_err):
            return self.send_status(400, "BadRequest", "you must specify at least 1 of stdin, "
                                    "stdout, stderr")
        command = q.get("command", [])
        if not command:
            return self.send_status(400, "BadRequest", "you must specify at least one command "
                                    "for the container")
        supported = {"v5": ["v5.channel.k8s.io"],
                     "legacy": ["v4.channel.k8s.io", "channel.k8s.io"],
                     "both": ["v5.channel.k8s.io", "v4.channel.k8s.io", "channel.k8s.io"]}[
            s.args.exec_mode]
        offered = [p.strip() for h in self.headers.get_all("Sec-WebSocket-Protocol") or []
                   for p in h.split(",") if p.strip()]
        proto = next((p for p in offered if p in supported), None)
        if proto is None:
            self.send_response(403)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        key = self.headers.get("Sec-WebSocket-Key", "")
        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        self.send_response(101, "Switching Protocols")
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.send_header("Sec-WebSocket-Protocol", proto)
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True
        with s.lock:
            s.stats["execs"] += 1
            s.stats["exec_protocols"][proto] = s.stats["exec_protocols"].get(proto, 0) + 1
        ExecSession(self, ns, name, pod, command, proto, want_in, want_out, want_err).run()


class ExecSession:
    """One exec over WebSocket: a single loop multiplexes the socket and the pipes, so the
    TLS object is only ever used from this thread."""

    def __init__(self, h, ns, name, pod, command, proto, want_in, want_out, want_err):
        self.h, self.ns, self.name, self.pod = h, ns, name, pod
        self.command, self.proto = command, proto
        self.want_in, self.want_out, self.want_err = want_in, want_out, want_err
        self.sock = h.connection
        self.buf = bytearray()
        self.closed = False

    def container_env(self, cwd):
        """What an exec sees: the image's PATH plus the container's env entries."""
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": cwd,
               "HOSTNAME": self.name}
        for e in self.pod["spec"]["containers"][0].get("env") or []:
            if "name" in e:
                env[e["name"]] = e.get("value", "")
        return env

    def send_frame(self, opcode, payload):
        n = len(payload)
        if n < 126:
            hdr = struct.pack("!BB", 0x80 | opcode, n)
        elif n < 65536:
            hdr = struct.pack("!BBH", 0x80 | opcode, 126, n)
        else:
            hdr = struct.pack("!BBQ", 0x80 | opcode, 127, n)
        self.sock.sendall(hdr + payload)

    def send_chan(self, ch, data):
        # Split big output so the client must reassemble many messages.
        step = 32768
        if not data:
            self.send_frame(2, bytes([ch]))
        for i in range(0, len(data), step):
            self.send_frame(2, bytes([ch]) + data[i:i + step])

    def parse_frames(self):
        """Yields (opcode, payload) for complete frames in self.buf."""
        out = []
        frag_op, frag = None, bytearray()
        while True:
            b = self.buf
            if len(b) < 2:
                break
            fin, op = b[0] & 0x80, b[0] & 0x0F
            masked, n = b[1] & 0x80, b[1] & 0x7F
            off = 2
            if n == 126:
                if len(b) < 4:
                    break
                n = struct.unpack("!H", b[2:4])[0]
                off = 4
            elif n == 127:
                if len(b) < 10:
                    break
                n = struct.unpack("!Q", b[2:10])[0]
                off = 10
            if not masked:
                raise ValueError("unmasked client frame")
            if len(b) < off + 4 + n:
                break
            mask = b[off:off + 4]
            payload = bytes(x ^ mask[i % 4] for i, x in enumerate(b[off + 4:off + 4 + n])) \
                if n < 4096 else self.unmask(b[off + 4:off + 4 + n], mask)
            del b[:off + 4 + n]
            if op == 0:
                frag += payload
                if fin:
                    out.append((frag_op, bytes(frag)))
                    frag_op, frag = None, bytearray()
            elif op >= 8 or fin:
                out.append((op, payload))
            else:
                frag_op, frag = op, bytearray(payload)
        return out

    @staticmethod
    def unmask(data, mask):
        m = int.from_bytes(bytes(mask) * (len(data) // 4 + 1), "little")
        d = int.from_bytes(bytes(data) + b"\0" * (4 - len(data) % 4), "little")
        return (d ^ m).to_bytes(len(data) + 4 - len(data) % 4, "little")[:len(data)]

    def run(self):
        s = STORE
        lowest = 1 if self.want_out else 2 if self.want_err else 3
        try:
            self.send_frame(2, bytes([lowest]))
        except OSError:
            return
        if s.args.exec_start_delay > 0:
            time.sleep(s.args.exec_start_delay)
        cwd = s.pod_dir(self.ns, self.name)
        try:
            proc = subprocess.Popen(self.command, cwd=cwd, stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    start_new_session=True,
                                    env=self.container_env(cwd))
        except OSError as e:
            self.finish({"metadata": {}, "status": "Failure", "reason": "InternalError",
                         "message": "Internal error occurred: error executing command in "
                                    "container: failed to exec in container: starting "
                                    "container process caused: exec: %s: %s" % (
                                        json.dumps(self.command[0]), e.strerror),
                         "details": {"causes": [{"message": "exec: %s" % e.strerror}]},
                         "code": 500})
            return
        with s.lock:
            s.procs.setdefault((self.ns, self.name), []).append(proc)
        stdin_q = []
        stdin_cv = threading.Condition()

        def stdin_writer():
            while True:
                with stdin_cv:
                    while not stdin_q:
                        stdin_cv.wait()
                    item = stdin_q.pop(0)
                try:
                    if item is None:
                        proc.stdin.close()
                        return
                    proc.stdin.write(item)
                    proc.stdin.flush()
                except (OSError, ValueError):
                    pass

        threading.Thread(target=stdin_writer, daemon=True).start()

        def feed(item):
            with stdin_cv:
                stdin_q.append(item)
                stdin_cv.notify()

        if not self.want_in:
            feed(None)
        pipes = {proc.stdout.fileno(): 1, proc.stderr.fileno(): 2}
        sock_open = True
        try:
            while pipes:
                if sock_open and self.sock.pending():
                    r = [self.sock]
                else:
                    fds = list(pipes) + ([self.sock] if sock_open else [])
                    r, _, _ = select.select(fds, [], [], 1.0)
                for f in r:
                    if f is self.sock:
                        try:
                            data = self.sock.recv(65536)
                        except (OSError, ssl.SSLError):
                            data = b""
                        if not data:
                            sock_open = False
                            continue
                        self.buf += data
                        for op, payload in self.parse_frames():
                            if op == 8:
                                try:
                                    self.send_frame(8, payload[:2])
                                except OSError:
                                    pass
                                sock_open = False
                                self.closed = True
                            elif op == 9:
                                self.send_frame(10, payload)
                            elif op in (1, 2) and payload:
                                ch = payload[0]
                                if ch == 0 and self.want_in:
                                    feed(payload[1:])
                                elif ch == 255 and self.proto.startswith("v5"):
                                    if len(payload) != 3 - 1 or payload[1] > 4:
                                        raise ValueError("bad close signal")
                                    if payload[1] == 0:
                                        feed(None)
                    else:
                        data = os.read(f, 65536)
                        if not data:
                            del pipes[f]
                            continue
                        ch = pipes[f]
                        if (ch == 1 and self.want_out) or (ch == 2 and self.want_err):
                            if not self.closed:
                                try:
                                    self.send_chan(ch, data)
                                except OSError:
                                    self.closed = True
                                    sock_open = False
        except ValueError:
            # Protocol violation: drop the connection, as wsstream does.
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            proc.wait()
            return
        rc = proc.wait()
        if self.closed:
            return
        if rc < 0:
            rc = 128 - rc
        if rc == 0:
            st = {"metadata": {}, "status": "Success"}
        else:
            st = {"metadata": {}, "status": "Failure",
                  "message": "command terminated with non-zero exit code: error executing "
                             "command [%s], exit code %d" % (" ".join(self.command), rc),
                  "reason": "NonZeroExitCode",
                  "details": {"causes": [{"reason": "ExitCode", "message": str(rc)}]}}
        self.finish(st)

    def finish(self, st):
        try:
            self.send_chan(3, json.dumps(st).encode())
            self.send_frame(8, struct.pack("!H", 1000))
            # Wait briefly for the client's close reply, then drop the connection.
            self.sock.settimeout(2)
            try:
                self.sock.recv(1024)
            except OSError:
                pass
        except OSError:
            pass


def make_certs(d):
    def run(*a):
        subprocess.run(a, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
        os.path.join(d, "ca.key"), "-out", os.path.join(d, "ca.crt"), "-days", "2",
        "-subj", "/CN=sbx-standin-ca", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout",
        os.path.join(d, "server.key"), "-out", os.path.join(d, "server.csr"),
        "-subj", "/CN=kube-apiserver")
    ext = os.path.join(d, "server.ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                "extendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n")
    run("openssl", "x509", "-req", "-in", os.path.join(d, "server.csr"), "-CA",
        os.path.join(d, "ca.crt"), "-CAkey", os.path.join(d, "ca.key"), "-CAcreateserial",
        "-out", os.path.join(d, "server.crt"), "-days", "2", "-extfile", ext)


def main():
    global STORE
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--exec-mode", choices=["both", "v5", "legacy"], default="both")
    ap.add_argument("--ready-delay", type=float, default=0.2)
    ap.add_argument("--term-delay", type=float, default=0.2)
    # Seconds between an exec's upgrade and its command's start, as a container runtime
    # takes to start an exec. kubectl's WebSocket client (v5) starts reading before it has
    # made its streams and drops what arrives in between ("Unknown stream id 1, discarding
    # message"): a command that answers within microseconds of the upgrade loses its output.
    ap.add_argument("--exec-start-delay", type=float, default=0.0)
    ap.add_argument("--history", type=int, default=100000)
    ap.add_argument("--namespace", default="sbx")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--alpn-h2", action="store_true")
    args = ap.parse_args()
    d = os.path.abspath(args.dir)
    args.dir = d
    os.makedirs(os.path.join(d, "pods"), exist_ok=True)
    make_certs(d)
    args.token_value = base64.b16encode(os.urandom(16)).decode().lower()
    STORE = Store(args)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(d, "server.crt"), os.path.join(d, "server.key"))
    # A real apiserver offers h2 too. This one only speaks HTTP/1.1; with --alpn-h2 it offers
    # h2 first anyway and drops connections that take it, so a client that does not force
    # HTTP/1.1 (fatal for the exec Upgrade on a real cluster) fails here as well.
    ctx.set_alpn_protocols(["h2", "http/1.1"] if args.alpn_h2 else ["http/1.1"])

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 128

        def get_request(self):
            sock, addr = self.socket.accept()
            return ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

        def finish_request(self, request, client_address):
            try:
                request.do_handshake()
                if request.selected_alpn_protocol() == "h2":
                    request.close()
                    return
            except (OSError, ssl.SSLError):
                return
            super().finish_request(request, client_address)

        def handle_error(self, request, client_address):
            pass

    srv = Server(("127.0.0.1", args.port), Handler)
    port = srv.server_address[1]
    with open(os.path.join(d, "ca.crt"), "rb") as f:
        ca_b64 = base64.b64encode(f.read()).decode()
    with open(os.path.join(d, "token"), "w") as f:
        f.write(args.token_value)
    kc = """apiVersion: v1
kind: Config
clusters:
- name: standin
  cluster:
    server: https://127.0.0.1:%d
    certificate-authority-data: %s
users:
- name: standin-user
  user:
    token: %s
contexts:
- name: standin
  context:
    cluster: standin
    user: standin-user
    namespace: %s
current-context: standin
""" % (port, ca_b64, args.token_value, args.namespace)
    fd = os.open(os.path.join(d, "kubeconfig"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(kc)
    with open(os.path.join(d, "port"), "w") as f:
        f.write(str(port))

    def stop(*_):
        with STORE.lock:
            for k in list(STORE.procs):
                kill_pod_procs(*k)
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    with open(os.path.join(d, "pid.tmp"), "w") as f:
        f.write(str(os.getpid()))
    os.rename(os.path.join(d, "pid.tmp"), os.path.join(d, "pid"))
    srv.serve_forever()


if __name__ == "__main__":
    main()
