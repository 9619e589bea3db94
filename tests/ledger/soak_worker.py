"""One worker of the soak test (test_soak.py), a process of its own on the Python binding:
until the STOP file exists it creates a sandbox (waiting for a place under the data
source's max_concurrency), writes and reads a file, runs a command, runs a background job to
its end, leaves a second job running, and deletes the sandbox (which must end that job).
Every step is journalled (one JSON line, flushed) before and after it, so the driver can
account for every sandbox even when it SIGKILLs this process at any moment.

usage: soak_worker.py CONFIG JOURNAL NAME STOP MARK (digits: the running job is
`sleep 600.MARK`, for the driver to find)"""
import json
import os
import sys
import time

import sbx


def main():
    cfg, journal, name, stop, mark = sys.argv[1:6]
    with open(journal, "a", encoding="utf-8") as j, sbx.Host(cfg) as h:
        def note(step, **kw):
            j.write(json.dumps(dict(kw, step=step, pid=os.getpid(), t=time.time())) + "\n")
            j.flush()

        k = 0
        while not os.path.exists(stop):
            k += 1
            tag = "%s-%d-%d" % (name, os.getpid(), k)
            note("creating")
            try:
                sid = h.create(wait=300)
            except sbx.SbxError as e:
                note("failed", what="create", error=str(e))
                continue
            note("created", id=sid)
            try:
                h.write_file(sid, "in.txt", tag.encode())
                r = h.exec(sid, "cat in.txt; echo", timeout=120)
                if (r.exit_code, r.stdout) != (0, tag + "\n"):
                    note("failed", id=sid, what="exec", got=[r.exit_code, r.stdout, r.stderr])
                job = h.exec(sid, "sleep 0.05; echo job-" + tag, background=True)
                st = job.wait(120)
                out = job.read_output()
                if (st.state, st.exit_code, out) != ("exited", 0, "job-%s\n" % tag):
                    note("failed", id=sid, what="job", got=[st.state, st.exit_code, out])
                # Left running on purpose: the delete must end it.
                h.exec(sid, "exec sleep 600.%s" % mark, background=True)
            except sbx.SbxError as e:
                note("failed", id=sid, what="use", error=str(e))
            note("removing", id=sid)
            try:
                h.destroy(sid)
            except sbx.SbxError as e:
                note("failed", id=sid, what="rm", error=str(e))
                continue
            note("removed", id=sid)
        note("stopped", rounds=k)


if __name__ == "__main__":
    main()
