"""Two checkpoints (or optimizer-state files) hold the same tensors, bit for bit; their
attributes (the paths they were written to, the command line) may differ. Exit 1 when not.

    same_tensors.py A.h5 B.h5
"""
import sys

import h5py
import numpy as np


def tensors(path):
    out = {}
    with h5py.File(path) as f:
        f.visititems(lambda n, o: out.__setitem__(n, np.array(o)) if isinstance(o, h5py.Dataset) else None)
    return out


a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
if a.keys() != b.keys() or not all(np.array_equal(a[k], b[k]) for k in a):
    sys.exit(f"{sys.argv[1]} and {sys.argv[2]}: the tensors differ")
