"""Two braid-train checkpoints (and their .optim.h5 beside them) are the same run's
results: weights within 2e-5, optimizer state within 1e-4 of its largest entry; and, when
two --stats files follow, the same steps with losses (and any --keys) within 1e-5
relative, the same tokens and sequences each step.

    compare_checkpoints.py A.h5 B.h5 [STATS_A STATS_B] [--keys loss,grad_norm]
"""
import json
import sys

import h5py
import numpy as np

args = sys.argv[1:]
keys = ["loss"]
if "--keys" in args:
    i = args.index("--keys")
    keys = args[i + 1].split(",")
    del args[i:i + 2]
a, b = args[0], args[1]


def tensors(path):
    out = {}
    with h5py.File(path, "r") as f:
        f.visit(lambda n: out.__setitem__(n, np.array(f[n], dtype=np.float64)) if isinstance(f[n], h5py.Dataset) else None)
    return out


wa, wb = tensors(a), tensors(b)
assert wa.keys() == wb.keys(), (sorted(wa), sorted(wb))
dw = max(float(np.max(np.abs(wa[k] - wb[k]))) for k in wa)
oa, ob = tensors(a[:-3] + ".optim.h5"), tensors(b[:-3] + ".optim.h5")
assert oa.keys() == ob.keys()
top = max(float(np.max(np.abs(v))) for v in oa.values())
do = max(float(np.max(np.abs(oa[k] - ob[k]))) for k in oa)
print(f"{b}: weights apart {dw:.3g}, optimizer state apart {do:.3g} (largest {top:.3g})")
assert dw <= 2e-5, f"weights apart by {dw}"
assert do <= 1e-4 * top, f"optimizer state apart by {do}"
if len(args) > 3:
    sa, sb = json.load(open(args[2])), json.load(open(args[3]))
    for call, ca in sa["calls"].items():
        cb = sb["calls"][call]
        assert len(ca["per_step"]) == len(cb["per_step"]) > 0
        for s, (x, y) in enumerate(zip(ca["per_step"], cb["per_step"])):
            for k in keys:
                assert abs(x[k] - y[k]) <= 1e-5 * max(abs(x[k]), 1e-3), (call, s, k, x[k], y[k])
            assert x["tokens"] == y["tokens"] and x["sequences"] == y["sequences"], (call, s)
        print(f"  {call}: {len(ca['per_step'])} steps, losses {[round(x['loss'], 6) for x in ca['per_step']]}")
