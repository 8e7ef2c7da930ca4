#!/usr/bin/python3
"""Compares two folders of scored shards (braid-score's outputs) shard by shard.

Usage: compare_scored.py A B [--atol X] [--rtol Y] [--pattern GLOB]

Both folders must hold the same scored-*.h5 names; in each pair every integer
dataset (tokens, offsets, prompt_len, sample_id, prompt lines) must be equal, and
every float dataset (logprobs, values, reward, advantages, returns) equal within
atol + rtol * |b|. Prints the largest difference seen; exit 1 on any mismatch.
--pattern (default scored-*.h5) compares other shards, e.g. braid-generate's gen-*.h5.
"""
import glob
import os
import sys

import h5py
import numpy as np


def datasets(path):
    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda n, o: out.__setitem__(n, np.array(o)) if isinstance(o, h5py.Dataset) else None)
    return out


def main():
    args = sys.argv[1:]
    atol, rtol = 1e-5, 1e-5
    if "--atol" in args:
        i = args.index("--atol"); atol = float(args[i + 1]); del args[i:i + 2]
    if "--rtol" in args:
        i = args.index("--rtol"); rtol = float(args[i + 1]); del args[i:i + 2]
    pattern = "scored-*.h5"
    if "--pattern" in args:
        i = args.index("--pattern"); pattern = args[i + 1]; del args[i:i + 2]
    a_dir, b_dir = args
    names_a = sorted(os.path.basename(p) for p in glob.glob(os.path.join(a_dir, pattern)))
    names_b = sorted(os.path.basename(p) for p in glob.glob(os.path.join(b_dir, pattern)))
    if not names_a or names_a != names_b:
        print(f"different shards: {names_a} / {names_b}")
        return 1
    worst, problems = 0.0, []
    for name in names_a:
        a, b = datasets(os.path.join(a_dir, name)), datasets(os.path.join(b_dir, name))
        if a.keys() != b.keys():
            problems.append(f"{name}: datasets {sorted(a)} / {sorted(b)}")
            continue
        for key in a:
            x, y = a[key], b[key]
            if x.shape != y.shape:
                problems.append(f"{name}: {key}: shapes {x.shape} / {y.shape}")
            elif np.issubdtype(x.dtype, np.floating):
                d = np.abs(x.astype(np.float64) - y.astype(np.float64))
                worst = max(worst, float(d.max(initial=0)))
                if np.any(d > atol + rtol * np.abs(y.astype(np.float64))):
                    problems.append(f"{name}: {key}: apart by up to {float(d.max()):.3g}")
            elif not np.array_equal(x, y):
                problems.append(f"{name}: {key}: differs")
    for p in problems:
        print(p)
    print(f"{len(names_a)} shards compared, largest float difference {worst:.3g}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
