"""The Proxmox calls of each controller, per machine, side by side (tests/e2e/controllers.sh).

Usage: pve_calls.py [--profile NAME] RUN_DIR SIDE...

Reads, for every SIDE, the simulator's request log (pve-requests-SIDE.jsonl, format in
docs/proxmox.md, "Request log"), the Machines and ProxmoxMachines as they were when all were
ready (machines-SIDE.json) and the side's timings (timings-SIDE.json). Every request is
attributed to the machine whose VM it concerns: by the VMID in its path, by the UPID a
request on that VM returned (task polls), by the VMID in an uploaded or deleted seed's name;
the rest (cluster resources, nextid, node and storage lists) is shared and divided by the
number of machines. Paths are reduced to their class (`/nodes/{node}/qemu/{vmid}/clone`).
When pve-requests-SIDE.switch exists (the side moved to the other controller, controllers.sh's
controllers_migrate), it holds how many requests were this side's: only those are counted.

Exits 1 when a side cloned some machine more than once or not at all, or reported a machine
ready whose VM was not running (pve-state-SIDE.json, read when all were ready): each
machine's VM is cloned once and powered on, by either controller, or the run did not do
what it claims.
"""

import argparse
import collections
import datetime
import json
import re
import sys
from pathlib import Path

VMID = re.compile(r"^\d+$")
SEED_VMID = re.compile(r"(\d+)\.iso$")


def path_class(method, path, params):
    """`POST /nodes/{node}/qemu/{vmid}/clone`; nextid with a vmid probe is its own class."""
    parts = path.strip("/").split("/")
    out = []
    for i, part in enumerate(parts):
        before = parts[i - 1] if i else ""
        if before == "content":
            # A volid's own `/` (`local:iso/user-data-100.iso`) splits it in the log.
            out.append("{volume}")
            break
        if before == "nodes":
            out.append("{node}")
        elif before == "qemu" and VMID.match(part):
            out.append("{vmid}")
        elif before == "tasks":
            out.append("{upid}")
        elif before == "storage" and i >= 3:
            out.append("{storage}")
        else:
            out.append(part)
    klass = f"{method} /" + "/".join(out)
    if path.endswith("/cluster/nextid") and "vmid" in params:
        klass += "?vmid"
    if klass.endswith("/cluster/resources") and "type" in params:
        klass += f"?type={params['type']}"
    return klass


def vmid_of(path, params):
    """The VMID a request concerns, if its path or a seed's name says."""
    parts = path.strip("/").split("/")
    for before, part in zip(parts, parts[1:]):
        if before == "qemu" and VMID.match(part):
            return int(part)
    for text in (params.get("filename", ""), parts[-1] if "content" in parts else ""):
        match = SEED_VMID.search(str(text))
        if match:
            return int(match.group(1))
    return None


def timestamp(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def load_side(run, side):
    objects = json.loads((run / f"machines-{side}.json").read_text())["items"]
    machines = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Machine"}
    vmids = {}
    for o in objects:
        if o["kind"] == "ProxmoxMachine" and o["spec"].get("virtualMachineID") is not None:
            vmids[int(o["spec"]["virtualMachineID"])] = o["metadata"]["name"]
    ready = []
    for m in machines.values():
        conditions = {c["type"]: c for c in m.get("status", {}).get("conditions", [])}
        infra = conditions.get("InfrastructureReady")
        if infra and infra["status"] == "True":
            created = timestamp(m["metadata"]["creationTimestamp"])
            ready.append((timestamp(infra["lastTransitionTime"]) - created).total_seconds())
    timings = json.loads((run / f"timings-{side}.json").read_text())
    state = json.loads((run / f"pve-state-{side}.json").read_text())
    power = {vm["vmid"]: vm["status"] for vm in state["vms"]}
    return vmids, ready, timings, power


def count_calls(run, side, vmids):
    """(per-machine counts by class, shared counts by class, clones per VMID)."""
    per_vm = collections.defaultdict(collections.Counter)
    shared = collections.Counter()
    clones = collections.Counter()
    upid_vm = {}
    lines = (run / f"pve-requests-{side}.jsonl").read_text().splitlines()
    switch = run / f"pve-requests-{side}.switch"
    if switch.exists():
        lines = lines[: int(switch.read_text())]
    for line in lines:
        entry = json.loads(line)
        method, path, params = entry["method"], entry["path"], entry.get("params") or {}
        klass = path_class(method, path, params)
        vmid = vmid_of(path, params)
        if method == "POST" and path.endswith("/clone"):
            # A clone's path names the template; the new VM is `newid`.
            vmid = int(params["newid"])
            if entry["status"] == 200:
                clones[vmid] += 1
        if "/tasks/" in path:
            upid = path.split("/tasks/")[1].split("/")[0]
            vmid = upid_vm.get(upid)
        if vmid is not None and isinstance(entry.get("data"), str) and entry["data"].startswith("UPID:"):
            upid_vm[entry["data"]] = vmid
        if vmid in vmids:
            per_vm[vmid][klass] += 1
        else:
            # Also requests about other VMIDs (the template's config, a probe of a VMID
            # the controller then did not take): work for all machines.
            shared[klass] += 1
    return per_vm, shared, clones


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--profile", default="?")
    parser.add_argument("run", type=Path)
    parser.add_argument("sides", nargs="+")
    args = parser.parse_args()

    table = {}
    summary = {}
    failures = []
    for side in args.sides:
        vmids, ready, timings, power = load_side(args.run, side)
        per_vm, shared, clones = count_calls(args.run, side, vmids)
        n = max(len(vmids), 1)
        classes = collections.Counter()
        for counts in per_vm.values():
            classes.update(counts)
        for klass, count in classes.items():
            table.setdefault(klass, {})[side] = count / n
        for klass, count in shared.items():
            table.setdefault(klass, {}).setdefault(side, 0.0)
            table[klass][side] += count / n
        for vmid, name in vmids.items():
            if clones[vmid] != 1:
                failures.append(f"{side}: {name} (VM {vmid}) was cloned {clones[vmid]} times")
            if power.get(vmid) != "running":
                failures.append(f"{side}: {name} was ready while its VM {vmid} was {power.get(vmid)}")
        total = sum(v.get(side, 0.0) for v in table.values())
        summary[side] = {
            "machines": len(vmids),
            "calls_per_machine": round(total, 1),
            "ready_seconds_mean": round(sum(ready) / len(ready), 1) if ready else None,
            "ready_seconds_max": max(ready) if ready else None,
            **timings,
        }

    width = max(len(k) for k in table) if table else 10
    header = "".join(f"{s:>10}" for s in args.sides)
    sides = ", ".join("%s: %d machines" % (s, summary[s]["machines"]) for s in args.sides)
    print(f"Proxmox calls per machine, simulator profile {args.profile} ({sides})")
    print(f"  {'method and path class':<{width}}{header}")
    for klass in sorted(table, key=lambda k: (k.split(" ", 1)[1], k)):
        row = "".join(f"{table[klass].get(s, 0.0):>10.1f}" for s in args.sides)
        print(f"  {klass:<{width}}{row}")
    print(f"  {'total':<{width}}" + "".join(f"{summary[s]['calls_per_machine']:>10.1f}" for s in args.sides))
    for label, key in (
        ("created → InfrastructureReady, mean s", "ready_seconds_mean"),
        ("created → InfrastructureReady, max s", "ready_seconds_max"),
        ("cluster applied → all ready, s", "provisioned_seconds"),
        ("cluster deleted → all VMs gone, s", "deleted_seconds"),
    ):
        print(f"  {label:<{width}}" + "".join(f"{str(summary[s][key]):>10}" for s in args.sides))
    (args.run / "pve-calls.json").write_text(json.dumps({"summary": summary, "per_machine": table}, indent=1))
    for failure in failures:
        print(f"FAIL: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
