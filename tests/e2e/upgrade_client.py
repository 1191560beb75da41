#!/usr/bin/env python3
"""A client of ProxmoxMachines through kube-apiserver while our provider is upgraded
(tests/e2e/upgrade.sh; docs/e2e.md, "Upgrading the provider").

    upgrade_client.py SERVER CA CERT KEY NAMESPACE REPORT STOPFILE

Until STOPFILE exists, one worker loops create -> merge-patch -> list (a ProxmoxMachine per round,
v1alpha2) and one thread watches ProxmoxMachines in NAMESPACE, resuming after every break from the
last resourceVersion it saw. Every answer is counted by operation and status ("error: ..." when there
was no HTTP answer). A 429 or 503 is retried only when it carries Retry-After (at most 5 times), and
whether the retry succeeded is counted. At the end: every object whose create succeeded must have
been seen as ADDED by the watch (otherwise a gap); the report (JSON) holds the counts, the failures
with their reasons, the longest run of failed requests (the unavailability) and the watch's breaks.
Standard library only.
"""
import json
import os
import ssl
import sys
import threading
import time
import urllib.error
import urllib.request

GROUP = "infrastructure.cluster.x-k8s.io"

server, ca, cert, key, ns, report_path, stop_file = sys.argv[1:8]
base = f"{server}/apis/{GROUP}/v1alpha2/namespaces/{ns}/proxmoxmachines"
ctx = ssl.create_default_context(cafile=ca)
ctx.load_cert_chain(cert, key)
t0 = time.monotonic()
lock = threading.Lock()
counts = {}  # "op status" -> n
failures = []  # [t, op, status, reason]
retries = {"retried": 0, "retry_succeeded": 0, "retry_failed": 0, "no_retry_after": 0}
events = []  # [t, ok] per request, for the unavailability
created = set()
added = set()
watch = {"breaks": [], "resumes": 0, "gone": 0, "errors": [], "events": 0}


def now():
    return round(time.monotonic() - t0, 3)


def stopped():
    return os.path.exists(stop_file)


def count(op, status, reason=""):
    with lock:
        counts[f"{op} {status}"] = counts.get(f"{op} {status}", 0) + 1
        ok = isinstance(status, int) and status < 400
        events.append([now(), ok])
        if not ok:
            failures.append([now(), op, status, reason[:300]])


def call(op, method, url, body=None, ctype="application/json", timeout=5):
    """One request, retried (and counted as such) only for a 429/503 with Retry-After."""
    attempt = 0
    while True:
        req = urllib.request.Request(url, method=method, data=None if body is None else json.dumps(body).encode())
        if body is not None:
            req.add_header("Content-Type", ctype)
        req.add_header("Accept", "application/json")
        status, reason, retry_after, data = None, "", None, None
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=timeout) as resp:
                status, data = resp.status, resp.read()
        except urllib.error.HTTPError as e:
            status, retry_after = e.code, e.headers.get("Retry-After")
            raw = e.read().decode(errors="replace")
            try:
                reason = f"{json.loads(raw).get('reason', '')}: {json.loads(raw).get('message', '')}"
            except ValueError:
                reason = raw.strip()
        except Exception as e:  # no HTTP answer: refused, reset, timeout
            status, reason = f"error: {type(e).__name__}", str(e)
        count(op, status, reason)
        if attempt:
            with lock:
                retries["retry_succeeded" if isinstance(status, int) and status < 400 else "retry_failed"] += 1
        if status in (429, 503):
            if retry_after is None:
                with lock:
                    retries["no_retry_after"] += 1
            elif attempt < 5 and not stopped():
                attempt += 1
                with lock:
                    retries["retried"] += 1
                time.sleep(min(float(retry_after), 5))
                continue
        return status, data


def machine(name):
    return {
        "apiVersion": f"{GROUP}/v1alpha2",
        "kind": "ProxmoxMachine",
        "metadata": {"name": name, "namespace": ns, "labels": {"capmox-e2e/upgrade": "client"}},
        "spec": {
            "sourceNode": "pve1",
            "templateID": 100,
            "format": "qcow2",
            "full": True,
            "numSockets": 1,
            "numCores": 2,
            "memoryMiB": 2048,
            "disks": {"bootVolume": {"disk": "scsi0", "sizeGb": 20}},
            "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0", "model": "virtio"}]},
        },
    }


def worker():
    i = 0
    while not stopped():
        i += 1
        name = f"upgrade-{i:05d}"
        status, _ = call("create", "POST", base, machine(name))
        if status == 201:
            with lock:
                created.add(name)
        call("patch", "PATCH", f"{base}/{name}", {"metadata": {"labels": {"round": str(i)}}},
             "application/merge-patch+json")
        call("list", "GET", f"{base}?labelSelector=capmox-e2e%2Fupgrade%3Dclient&limit=500")
        time.sleep(0.1)


def watcher(rv):
    while not stopped():
        url = f"{base}?watch=1&allowWatchBookmarks=true&resourceVersion={rv}&timeoutSeconds=30"
        try:
            req = urllib.request.Request(url, headers={"Accept": "application/json"})
            opened = time.monotonic()
            with urllib.request.urlopen(req, context=ctx, timeout=40) as resp:
                count("watch", resp.status)
                for line in resp:
                    ev = json.loads(line)
                    obj = ev.get("object", {})
                    if ev["type"] == "ERROR":
                        with lock:
                            watch["errors"].append([now(), obj.get("code"), obj.get("message", "")[:200]])
                        if obj.get("code") == 410:
                            watch["gone"] += 1
                            rv = relist()
                        break
                    rv = obj["metadata"]["resourceVersion"]
                    if ev["type"] == "ADDED":
                        with lock:
                            added.add(obj["metadata"]["name"])
                    watch["events"] += 1
                    if stopped():
                        return
            # A server-side timeout (timeoutSeconds) ends the stream after 30 s; earlier is a break.
            if time.monotonic() - opened < 29 and not stopped():
                with lock:
                    watch["breaks"].append([now(), "stream ended early"])
        except urllib.error.HTTPError as e:
            count("watch", e.code, e.read().decode(errors="replace")[:300])
            with lock:
                watch["breaks"].append([now(), e.code])
            if e.code == 410:
                watch["gone"] += 1
                rv = relist()
            time.sleep(0.5)
        except Exception as e:
            with lock:
                watch["breaks"].append([now(), f"{type(e).__name__}: {e}"[:200]])
            time.sleep(0.5)
        watch["resumes"] += 1


def relist():
    """After 410 Gone: a list from which the watch restarts; objects created meanwhile that only the
    list shows are a gap of the watch (reported as such)."""
    while not stopped():
        status, data = call("list(relist)", "GET", f"{base}?labelSelector=capmox-e2e%2Fupgrade%3Dclient")
        if status == 200:
            return json.loads(data)["metadata"]["resourceVersion"]
        time.sleep(0.5)
    return "0"


def main():
    status, data = call("list", "GET", base)
    if status != 200:
        sys.exit(f"listing ProxmoxMachines failed: {status}")
    rv = json.loads(data)["metadata"]["resourceVersion"]
    threads = [threading.Thread(target=worker), threading.Thread(target=watcher, args=(rv,), daemon=True)]
    for t in threads:
        t.start()
    threads[0].join()
    time.sleep(3)  # the last ADDED events
    # The longest run of consecutive failed requests, from the last success before to the first after.
    gap, start, last_ok = 0.0, None, 0.0
    for t, ok in sorted(events):
        if ok:
            if start is not None:
                gap = max(gap, t - start)
                start = None
            last_ok = t
        elif start is None:
            start = last_ok
    with lock:
        missing = sorted(created - added)
        report = {
            "seconds": now(),
            "requests": sum(counts.values()),
            "by_status": dict(sorted(counts.items())),
            "failed": len(failures),
            "retries": retries,
            "unavailable_seconds": round(gap, 3),
            "first_failure": failures[0][0] if failures else None,
            "last_failure": failures[-1][0] if failures else None,
            "failures": failures[:40],
            "created": len(created),
            "watch": {**watch, "added_seen": len(added & created), "missing_added": missing[:20],
                      "gaps": len(missing)},
            "t0_epoch": time.time() - now(),
        }
    with open(report_path, "w") as f:
        json.dump(report, f, indent=1)


main()
