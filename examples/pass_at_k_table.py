#!/usr/bin/env python3
"""The held-out pass@k (k = 1..n) and maj@k of every evaluated iteration of a braid run,
from its metrics.jsonl, as a markdown table (the figures docs/tools/run.md quotes).

    examples/pass_at_k_table.py OUT
"""
import json
import sys

out = sys.argv[1]
rows = [json.loads(l) for l in open(f"{out}/metrics.jsonl")]
rows = [r for r in rows if "eval" in r]
n = len(rows[0]["eval"]["pass_at_k"])
ks = [k for k in (1, 2, 4, 8, 16, 32) if k <= n]
print("| iteration | mean reward | " + " | ".join(f"pass@{k}" for k in ks) + " | maj@" + str(n) + " |")
print("|---:|---:|" + "---:|" * len(ks) + "---:|")
for r in rows:
    e = r["eval"]
    reward = f"{r['mean_reward']:.3f}" if "mean_reward" in r else "(start)"
    print(f"| {r['iteration']} | {reward} | " + " | ".join(f"{e['pass_at_k'][k - 1]:.3f}" for k in ks) +
          f" | {e['maj_at_k'][n - 1]:.3f} |")
