#!/usr/bin/env python3
"""Sums ncu's per-kernel gpu__time_duration (CSV from `ncu --csv --metrics ...`) by kernel
name: total ms, count, mean us, share; the top 25 (bench/gpu/profile.sh)."""
import csv
import sys
from collections import defaultdict

rows = []
with open(sys.argv[1], newline="") as f:
    lines = [l for l in f if l.startswith('"')]   # ncu's own messages start with ==
for r in csv.DictReader(lines):
    if r.get("Metric Name") != "gpu__time_duration.sum":
        continue
    try:
        ns = float(r["Metric Value"].replace(",", ""))
    except (KeyError, ValueError):
        continue
    rows.append((r.get("Kernel Name", "?"), ns))
total = sum(ns for _, ns in rows)
by = defaultdict(lambda: [0.0, 0])
for name, ns in rows:
    short = name.split("(")[0][:90]
    by[short][0] += ns
    by[short][1] += 1
print(f"{len(rows)} kernels, {total / 1e6:.3f} ms in all")
print(f"{'kernel':<90} {'ms':>9} {'count':>6} {'mean us':>9} {'share':>6}")
for name, (ns, n) in sorted(by.items(), key=lambda kv: -kv[1][0])[:25]:
    print(f"{name:<90} {ns / 1e6:9.3f} {n:6d} {ns / n / 1e3:9.1f} {100 * ns / max(total, 1):5.1f}%")
