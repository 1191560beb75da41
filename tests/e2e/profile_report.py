#!/usr/bin/env python3
"""Where each process's CPU went per request, from the recordings `PEER_BENCH_PROFILE=DIR
tests/e2e/run peer-bench` leaves in DIR (docs/benchmarks.md, "What a request costs in the pair").

    profile_report.py DIR [GO_SYMBOLS]

DIR holds `<side>-<phase>-<process>.data` (perf record, cpu-clock samples with call graphs) and
`phases.tsv` (side, phase, requests, sampling frequency). kube-apiserver is built stripped; its
frames are named from GO_SYMBOLS, a build of the same package without `-s -w`, whose text is
identical (the harness builds it beside the stripped one). Each sample is put in the first
category one of its frames matches, so a TLS write inside the proxy counts as TLS; the table
gives microseconds of CPU per request of the phase.
"""

import bisect
import csv
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

# Where a Go binary's text is mapped: perf reports its frames relative to that.
GO_TEXT_BASE = 0x400000

GO_CATEGORIES = [
    ("garbage collector", r"^runtime\.(gcBgMarkWorker|bgsweep|bgscavenge|gcAssist|gcDrain|markroot|scanobject)"),
    ("client certificate check", r"authentication/request/x509"),
    ("TLS", r"^crypto/|^vendor/golang\.org/x/crypto"),
    ("HTTP/2", r"http2"),
    ("proxy", r"proxy\.|httputil"),
    ("priority and fairness", r"flowcontrol"),
    ("other filters", r"authentication|authoriz|audit|endpoints/filters|server/filters"),
    ("idle threads, scheduler", r"^runtime\.(mstart|schedule|findRunnable|park_m|mcall|stopm)"),
]

RUST_CATEGORIES = [
    ("controller", r"capmox_apiserver::(controller|management)"),
    # A LIST looks its items up in the cache inside the store's read (`Store::list_with`).
    ("read path, cache", r"cached_json|encoded_cache"),
    ("store (redb, commit)", r"capmox_storage|redb::"),
    ("managedFields", r"registry::apply"),
    ("admission, validation", r"admission|validat|schema"),
    ("write path, other", r"rest::write|create_object"),
    ("read path, cache", r"rest::read"),
    ("authn, authz", r"server::authn|server::authz"),
    ("TLS", r"rustls|aws_lc|ring::"),
    ("HTTP/2", r"h2::"),
    ("hyper, axum, tower", r"hyper|axum|tower"),
    ("tokio runtime", r"tokio::"),
]


def go_symbols(binary):
    """Sorted start addresses and names of a Go binary's text symbols."""
    listing = subprocess.run(
        ["go", "tool", "nm", "-n", binary], capture_output=True, text=True, check=True
    ).stdout
    addresses, names = [], []
    for line in listing.splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3 and parts[1] in ("T", "t"):
            addresses.append(int(parts[0], 16))
            names.append(parts[2])
    return addresses, names


def stacks(data, symbols):
    """Samples of a recording as (frames root first, count)."""
    script = subprocess.run(
        ["perf", "script", "-i", str(data), "-F", "ip,sym,dso"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    folded = Counter()
    frames = []
    for line in script.splitlines() + [""]:
        line = line.strip()
        if not line:
            if frames:
                folded[tuple(reversed(frames))] += 1
            frames = []
            continue
        match = re.match(r"([0-9a-f]+) (.*) \((.*)\)$", line)
        if not match:
            continue
        ip, symbol, dso = match.groups()
        symbol = re.sub(r"\+0x[0-9a-f]+$", "", symbol)
        if symbol == "[unknown]" and symbols and "kube-apiserver" in dso:
            addresses, names = symbols
            index = bisect.bisect_right(addresses, int(ip, 16) + GO_TEXT_BASE) - 1
            symbol = names[index] if index >= 0 else symbol
        frames.append(symbol)
    return folded


def by_category(folded, categories):
    totals = Counter()
    for frames, count in folded.items():
        for name, pattern in categories:
            if any(re.search(pattern, frame) for frame in frames):
                totals[name] += count
                break
        else:
            totals["other (kernel, allocator, rest)"] += count
    return totals


def main():
    directory = Path(sys.argv[1])
    symbols = go_symbols(sys.argv[2]) if len(sys.argv) > 2 else None
    with open(directory / "phases.tsv") as phases_file:
        phases = list(csv.reader(phases_file, delimiter="\t"))
    for process, categories in (("kube-apiserver", GO_CATEGORIES), ("capmox-apiserver", RUST_CATEGORIES)):
        columns = []
        for side, phase, requests, frequency in phases:
            data = directory / f"{side}-{phase}-{process}.data"
            if not data.exists():
                continue
            folded = stacks(data, symbols if process == "kube-apiserver" else None)
            micros_per_sample = 1e6 / float(frequency)
            totals = by_category(folded, categories)
            if not totals:
                print(f"{data.name}: no samples (perf attached too late?)", file=sys.stderr)
                continue
            columns.append((f"{side} {phase}", {k: v * micros_per_sample / int(requests) for k, v in totals.items()}))
        rows = list(dict.fromkeys(name for name, _ in categories)) + ["other (kernel, allocator, rest)"]
        print(f"\n{process}: µs of CPU per request")
        print("| category | " + " | ".join(title for title, _ in columns) + " |")
        print("|---|" + "---|" * len(columns))
        for row in rows:
            print(f"| {row} | " + " | ".join(f"{values.get(row, 0):.1f}" for _, values in columns) + " |")
        print("| **total** | " + " | ".join(f"**{sum(values.values()):.1f}**" for _, values in columns) + " |")


main()
