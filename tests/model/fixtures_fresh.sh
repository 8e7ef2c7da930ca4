#!/usr/bin/env bash
# The committed PyTorch fixtures of the parity suites are what their scripts write: each
# script (tests/fixtures/model/make_family_fixtures.py, make_torch_fixture.py) is run into
# the scratch folder and its file compared with the committed one, array by array: integer
# arrays and attributes equal (the torch version apart), float arrays within 1e-9 of the
# array's largest magnitude (float attributes within 1e-9 relative) (f64 references; weights and gradients stored as f32 are equal
# unless a sum's order rounds their last bit: 1e-9 still catches any change of the maths,
# the weights' seeds or the inputs). A script edited without its fixture fails here.
#
# Needs a python3 with torch and h5py (Debian's python3-torch, python3-h5py); without one
# the test is skipped (exit 77): the parity suites themselves read only the committed files.
. "$BRAID_SOURCE/tests/common/cli.sh"
py=""
for p in python3 /usr/bin/python3; do
  if command -v "$p" > /dev/null && "$p" -c "import torch, h5py" 2> /dev/null; then py=$p; break; fi
done
[[ -n $py ]] || { echo "SKIP: no python3 with torch and h5py"; exit 77; }

src="$BRAID_SOURCE/tests/fixtures/model"
for pair in make_family_fixtures.py:family_parity.h5 make_torch_fixture.py:llama_torch_fixture.h5; do
  script=${pair%%:*} fixture=${pair#*:}
  # No __pycache__ in the source tree (the scripts import each other).
  rc=0
  PYTHONDONTWRITEBYTECODE=1 "$py" "$src/$script" "$S/$fixture" > "$S/$script.log" 2>&1 || rc=$?
  (( rc == 0 )) || { cat "$S/$script.log" >&2; fail "$script: exit $rc"; }
  "$py" - "$S/$fixture" "$src/$fixture" <<'PY' || fail "$fixture: not what $script writes (regenerate it)"
import sys
import h5py
import numpy as np

fresh, committed = (h5py.File(p, "r") for p in sys.argv[1:])
bad = []


def attrs(name, a, b):
    ka, kb = set(a.attrs) - {"torch_version"}, set(b.attrs) - {"torch_version"}
    if ka != kb:
        bad.append(f"{name or '/'}: attributes {sorted(ka ^ kb)} in one file only")
    for k in ka & kb:
        x, y = np.asarray(a.attrs[k]), np.asarray(b.attrs[k])
        same = np.allclose(x, y, rtol=1e-9, atol=0) if x.dtype.kind == "f" else np.array_equal(x, y)
        if not same:
            bad.append(f"{name or '/'}: attribute {k} differs")


def items(f):
    out = {}
    f.visititems(lambda n, o: out.__setitem__(n, o))
    return out


a, b = items(fresh), items(committed)
attrs("", fresh, committed)
if set(a) != set(b):
    bad.append(f"objects in one file only: {sorted(set(a) ^ set(b))}")
worst = 0.0
for name in sorted(set(a) & set(b)):
    attrs(name, a[name], b[name])
    if not isinstance(a[name], h5py.Dataset):
        continue
    x, y = a[name][()], b[name][()]
    if x.shape != y.shape or x.dtype != y.dtype:
        bad.append(f"{name}: {x.dtype}{x.shape} against {y.dtype}{y.shape}")
    elif x.dtype.kind == "f":
        scale = max(float(np.max(np.abs(y))), 1e-30) if y.size else 1.0
        d = float(np.max(np.abs(x.astype(np.float64) - y))) / scale if y.size else 0.0
        worst = max(worst, d)
        if not d <= 1e-9:
            bad.append(f"{name}: differs by {d:.3g} of its largest magnitude")
    elif not np.array_equal(x, y):
        bad.append(f"{name}: differs")
print(f"{sys.argv[2]}: {len(b)} objects, worst float difference {worst:.3g} (bound 1e-9)")
for line in bad:
    print("  " + line, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
done
