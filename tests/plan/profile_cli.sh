#!/usr/bin/env bash
# braid-profile end to end: analytic profiles feed meshplan, a measured profile
# of a micro model (engine) does too and calibrates the analytic one, and the
# MPI probe measures and checks an all-reduce between two ranks.
set -euo pipefail
prof=$BRAID_BIN/braid-profile
plan=$BRAID_BIN/braid-meshplan
fx=$BRAID_FIXTURES/plan
cd "$BRAID_SCRATCH"
rm -f *.json
fail() { echo "FAIL: $*" >&2; exit 1; }

"$prof" analytic --hardware h200 --experiment "$fx/ppo-tiny.json" -o h200.json -q
python3 - h200.json <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
assert p["format"] == "braid.profile" and p["source"] == "analytic"
assert p["hardware"]["mem_capacity_gb"] == 141
names = sorted(m["name"] for m in p["models"])
assert len(names) == 2, names  # actor = ref (LM head), critic = reward (value head)
for m in p["models"]:
    f = m["layer_fwd"]["seconds"]
    assert all(row == sorted(row) for row in f), "forward time must grow with seq_len"
    assert all(a <= b for a, b in zip([r[0] for r in f], [r[0] for r in f][1:])), "and with tokens"
PY
"$plan" "$fx/ppo-tiny.json" "$fx/cluster-1x2.json" --profile h200.json -o p1.json --max-micro 1 -q > s1.txt
"$plan" "$fx/ppo-tiny.json" "$fx/cluster-1x2.json" --hardware h200 -o p2.json --max-micro 1 -q > s2.txt
cmp s1.txt s2.txt || fail "the written profile and the in-memory one plan differently"

# A profile that lacks a model's shape is refused, naming the role.
"$prof" analytic --hardware h100 --model "$fx/small-config.json" -o partial.json -q
set +e
"$plan" "$fx/ppo-tiny.json" "$fx/cluster-1x2.json" --profile partial.json -o never.json 2> err.txt
rc=$?
set -e
[[ $rc -eq 2 ]] || fail "partial profile exit $rc"
grep -q "critic" err.txt || fail "no role named: $(cat err.txt)"

# Llama 3.1's rope_scaling changes RoPE's angles, not a layer's cost: the same figures;
# a scaling braid does not implement is refused naming the file and the field.
python3 - "$fx/small-config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192}
json.dump(c, open("scaled-config.json", "w"))
c["rope_scaling"] = {"rope_type": "longrope", "factor": 4.0}
json.dump(c, open("yarn-config.json", "w"))
PY
"$prof" analytic --hardware h100 --model scaled-config.json -o scaled.json -q
python3 - partial.json scaled.json <<'PY' || fail "rope_scaling changed the analytic profile"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
assert [m["layer_fwd"] for m in a["models"]] == [m["layer_fwd"] for m in b["models"]]
assert [m["bs_max"] for m in a["models"]] == [m["bs_max"] for m in b["models"]]
PY
set +e
"$prof" analytic --hardware h100 --model yarn-config.json -o never.json -q 2> err.txt
rc=$?
set -e
[[ $rc -eq 2 ]] || fail "rope_scaling longrope: exit $rc"
grep -q "yarn-config.json: rope_scaling.rope_type" err.txt || fail "rope_scaling longrope: not named: $(cat err.txt)"

# Measured on this machine with the engine: a micro model, smallest grids.
# Decode batches up to the generator's --max-batch, past --quick's 16; the host costs start
# their MPI jobs with --mpirun's words (a launcher option as --mpirun=--option); the
# backend runs --threads threads.
printf '#!/bin/sh\necho "$@" >> "%s/mpirun.log"\nexec mpirun "$@"\n' "$PWD" > logged-mpirun
chmod +x logged-mpirun
rm -f mpirun.log
"$prof" measure --experiment "$fx/ppo-micro.json" --quick --max-batch 32 --repeats 1 --threads 1 \
  --mpirun "$PWD/logged-mpirun" --mpirun=--oversubscribe -o measured.json 2> err.txt
grep -q "probing this machine (1 threads)" err.txt || fail "--threads 1: $(cat err.txt)"
grep -q -- "^--oversubscribe -np 1 " mpirun.log || fail "--mpirun not used: $(cat mpirun.log)"
"$prof" measure --experiment "$fx/ppo-micro.json" --quick --max-batch 0 -o never.json -q 2> err.txt && fail "--max-batch 0 accepted"
grep -q "max-batch" err.txt || fail "--max-batch 0 not named: $(cat err.txt)"
python3 - measured.json <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
assert p["source"] == "measured" and p["hardware"]["name"] == "cpu" and p["hardware"]["dtype_bytes"] == 4
assert "host" in p, "no host costs"
for m in p["models"]:
    for t in ("layer_fwd", "layer_bwd", "layer_prefill", "layer_decode"):
        assert all(v > 0 for row in m[t]["seconds"] for v in row), t
    assert m["spread"]["repeats"] == 1
    assert m["layer_decode"]["batch"] == [1, 2, 4, 8, 16, 32], m["layer_decode"]["batch"]
    assert m["layer_prefill"]["tokens"] == m["layer_fwd"]["tokens"] and m["layer_prefill"]["seq_len"] == m["layer_fwd"]["seq_len"]
    # --quick: tokens to 1024, lengths to 256.
    assert max(m["layer_fwd"]["tokens"]) <= 1024 and max(m["layer_fwd"]["seq_len"]) <= 256, m["layer_fwd"]
PY
# A value model alone, without the host costs (--no-host): no host block.
"$prof" measure --value-model "$fx/micro-config.json" --quick --repeats 1 --threads 1 --no-host -o value.json -q
python3 - value.json <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
assert "host" not in p, "--no-host measured the host costs"
assert [m["shape"]["value_head"] for m in p["models"]] == [True], p["models"]
PY
"$plan" "$fx/ppo-micro.json" "$fx/cluster-1x2.json" --profile measured.json -o pm.json --max-micro 1 -q > /dev/null
"$prof" analytic --hardware measured_hw.json --experiment "$fx/ppo-micro.json" -o never.json -q 2> err.txt && fail "missing hardware file accepted"
python3 -c "import json; json.dump(json.load(open('measured.json'))['hardware'], open('cpu.json', 'w'))"
"$prof" analytic --hardware cpu.json --calibrate measured.json --experiment "$fx/ppo-micro.json" -o cal.json -q
# --calibrate takes the measured efficiency factors over a preset's: other layer times.
"$prof" analytic --hardware h100 --experiment "$fx/ppo-micro.json" -o h100-micro.json -q
"$prof" analytic --hardware h100 --calibrate measured.json --experiment "$fx/ppo-micro.json" -o h100-cal.json -q
python3 - h100-micro.json h100-cal.json <<'PY' || fail "--calibrate changed nothing"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
assert a["hardware"]["efficiency"] != b["hardware"]["efficiency"]
assert [m["layer_fwd"] for m in a["models"]] != [m["layer_fwd"] for m in b["models"]]
PY

# Two ranks: the probe verifies its all-reduce sums and reports positive rates.
mpirun -np 2 --oversubscribe "$prof" comm --max-mb 1 --repeats 3 -o comm.json -q
python3 - comm.json <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
assert c["ranks"] == 2 and c["same_host"]
for k in ("p2p", "allreduce"):
    assert c[k]["gbs"] > 0 and c[k]["latency_us"] > 0, c[k]
    assert [p["bytes"] for p in c[k]["points"]] == sorted(p["bytes"] for p in c[k]["points"])
    assert max(p["bytes"] for p in c[k]["points"]) <= 1e6, "--max-mb 1"
PY
# measure under mpirun: the links measured (not the CPU's defaults: 2 us), the tables by rank 0
# alone while rank 1 waits for it asleep (comm::release_from), the profile written once.
mpirun -np 2 --oversubscribe "$prof" measure --experiment "$fx/ppo-micro.json" --quick --max-batch 4 --repeats 1 \
  --threads 1 --no-host -o linked.json -q
python3 - linked.json <<'PY' || fail "measure under mpirun: links not measured"
import json, sys
p = json.load(open(sys.argv[1]))
assert p["source"] == "measured" and len(p["models"]) >= 1
assert p["comm"]["allreduce_intra"]["latency_us"] != 2.0, p["comm"]
PY
set +e
"$prof" comm -o never.json 2> err.txt
rc=$?
set -e
[[ $rc -eq 2 ]] || fail "comm on one rank exit $rc"
echo ok
