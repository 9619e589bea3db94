#!/usr/bin/env python3
"""An exec credential plugin (client.authentication.k8s.io) for the k8s tests, run by the k8s
plugin and by kubectl from the same kubeconfig. It appends one JSON line per run to
$CRED_LOG (its argv, the CRED_* environment, KUBERNETES_EXEC_INFO, whether stdin is a
terminal and what it held) and prints an ExecCredential whose token is the content of
$CRED_TOKEN_FILE.

$CRED_MODE: ok (the default), wrong-first (a wrong token on the first run, then the right one),
fail (exit 3 with a message on stderr), garbage (not JSON), wrong-api (apiVersion v1alpha1),
no-status, cert-only (a certificate without its key).
$CRED_EXPIRY: seconds from now for expirationTimestamp (negative: already expired), or
"none" (the default) for no expiry."""
import datetime
import json
import os
import sys


def main():
    log = os.environ["CRED_LOG"]
    info = os.environ.get("KUBERNETES_EXEC_INFO")
    tty = os.isatty(0)
    record = {
        "argv": sys.argv[1:],
        "env": {k: v for k, v in os.environ.items() if k.startswith("CRED_")},
        "exec_info": json.loads(info) if info else None,
        "stdin_tty": tty,
        "stdin": "" if tty else sys.stdin.read(),
    }
    runs = 0
    if os.path.exists(log):
        with open(log) as f:
            runs = sum(1 for _ in f)
    with open(log, "a") as f:
        f.write(json.dumps(record, sort_keys=True) + "\n")

    mode = os.environ.get("CRED_MODE", "ok")
    api = json.loads(info)["apiVersion"] if info else "client.authentication.k8s.io/v1"
    with open(os.environ["CRED_TOKEN_FILE"]) as f:
        token = f.read().strip()
    if mode == "fail":
        sys.stderr.write("credential helper: the cloud said no\nsecond line\n")
        return 3
    if mode == "garbage":
        print("this is not json")
        return 0
    status = {"token": token if mode != "wrong-first" or runs > 0 else "wrong-token"}
    expiry = os.environ.get("CRED_EXPIRY", "none")
    if expiry != "none":
        at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(
            seconds=int(expiry))
        status["expirationTimestamp"] = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    if mode == "cert-only":
        status = {"clientCertificateData": "-----BEGIN CERTIFICATE-----\n"}
    out = {"apiVersion": api, "kind": "ExecCredential", "status": status}
    if mode == "wrong-api":
        out["apiVersion"] = "client.authentication.k8s.io/v1alpha1"
    if mode == "no-status":
        del out["status"]
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
