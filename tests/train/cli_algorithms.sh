#!/usr/bin/env bash
# The named algorithms from the command line and from braid run (docs/tools/train.md):
# shards generated once, scored by braid-score --algorithm NAME, trained by braid-train
# NAME; the entropy bonus changes GRPO's update (it was once ignored); truncated
# importance sampling recomputes the actor's logprobs, which match the generator's here;
# bad settings exit 2 naming the option or the run file's field; braid runs of DAPO and
# REINFORCE++ complete two iterations.
. "$BRAID_SOURCE/tests/common/cli.sh"
B="$BRAID_BIN"
PY=/usr/bin/python3  # with h5py and numpy

cp "$BRAID_SOURCE/examples/tiny/config.json" config.json
printf '%s\n' '{"text": "Call 555"}' '{"text": "Year"}' '{"text": "Pi is"}' '{"text": "Total:"}' > prompts.jsonl
"$B/braid" init --config config.json --seed 1 -o actor.h5 -q > /dev/null
"$B/braid-generate" --actor actor.h5 --prompts prompts.jsonl -o gen --samples-per-prompt 4 --max-new-tokens 8 \
  --shard-size 8 --temperature 1.5 --seed 3 --threads 1 -q > /dev/null

for algo in grpo dr-grpo dapo gspo rloo reinforce++ reinforce++-baseline; do
  "$B/braid-score" gen/*.h5 -o "scored-$algo" --algorithm "$algo" --ref actor.h5 --reward-rule digits --threads 1 -q \
    > /dev/null || fail "braid-score --algorithm $algo"
  "$B/braid-train" "$algo" "scored-$algo"/*.h5 --actor actor.h5 --actor-out "a-$algo.h5" --lr 0.01 --threads 1 \
    --stats "stats-$algo.json" -q > /dev/null || fail "braid-train $algo"
  "$PY" - "$algo" <<'PY' || fail "$algo: scored shards or stats not as the algorithm says"
import json, sys
import h5py, numpy as np
algo = sys.argv[1]
stats = json.load(open(f"stats-{algo}.json"))
call = stats["calls"]["actor_train"]
assert np.isfinite(call["loss"]) and call["grad_norm"] > 0, call
with h5py.File(f"scored-{algo}/scored-00000.h5") as f:
    cfg = json.loads(f.attrs["config"])["score"]
    assert cfg["algorithm"] == algo, cfg
    adv, off, plen = np.array(f["advantages"]), np.array(f["offsets"]), np.array(f["prompt_len"])
    rew = np.array(f["reward"])
# Group estimators: one advantage per sequence; under RLOO it is R - mean of the others.
first = [adv[off[i] + plen[i]:off[i + 1]] for i in range(len(plen))]
if algo in ("grpo", "dr-grpo", "dapo", "gspo", "rloo", "reinforce++-baseline"):
    assert all(len(set(a.tolist())) <= 1 for a in first), first
if algo == "rloo":
    ref_kl = cfg["kl_coef"]
    assert ref_kl == 0.01, cfg
if algo == "reinforce++":
    assert cfg["kl_coef"] == 0.01 and "std_normalize" not in cfg, cfg
if algo == "dr-grpo":
    assert cfg["std_normalize"] is False, cfg
PY
done

# The entropy bonus moves GRPO's update: the same shards at --entropy-coef 0 and 0.5.
"$B/braid-train" grpo scored-grpo/*.h5 --actor actor.h5 --actor-out e0.h5 --lr 0.01 --threads 1 -q > /dev/null
"$B/braid-train" grpo scored-grpo/*.h5 --actor actor.h5 --actor-out e5.h5 --lr 0.01 --entropy-coef 0.5 --threads 1 \
  --stats e5.json -q > /dev/null
"$PY" - <<'PY' || fail "--entropy-coef did not change GRPO's weights"
import h5py, numpy as np
with h5py.File("e0.h5") as a, h5py.File("e5.h5") as b:
    w = "model.embed_tokens.weight"
    apart = np.abs(np.array(a[w]) - np.array(b[w])).max()
assert apart > 1e-6, apart
PY

# Truncated importance sampling: the trainer's own logprobs of the generator's weights
# give weights of 1 (to float rounding), none capped.
"$B/braid-train" grpo scored-grpo/*.h5 --actor actor.h5 --actor-out tis.h5 --lr 0.01 --tis-cap 2 --threads 1 \
  --stats tis.json -q > /dev/null || fail "--tis-cap"
"$PY" - <<'PY' || fail "TIS figures"
import json
t = json.load(open("tis.json"))["tis"]
assert t["cap"] == 2 and t["truncated"] == 0 and t["tokens"] > 0, t
assert abs(t["mean_weight"] - 1) < 1e-4 and t["max_abs_log_ratio"] < 1e-3, t
PY

# Bad settings: exit 2, naming the option.
expect_bad bad "--clip-high" -- "$B/braid-train" dapo scored-dapo/*.h5 --actor actor.h5 --actor-out x.h5 --clip-low 0.3 --clip-high 0.2
expect_bad bad "--loss-agg" -- "$B/braid-train" grpo scored-grpo/*.h5 --actor actor.h5 --actor-out x.h5 --loss-agg seq-sum
expect_bad bad "--algorithm" -- "$B/braid-score" gen/*.h5 -o bad --algorithm sppo --reward-rule digits
[[ ! -e x.h5 ]] || fail "a refused call wrote its output"

# braid run: a group and a returns-to-go algorithm for two iterations, every kind of run-file
# setting passed on; bad run files refused by field.
. "$BRAID_SOURCE/tests/driver/tiny_run.sh"
for algo in dapo reinforce++; do
  "$PY" - "$algo" <<'PY'
import json, sys
r = json.load(open("run.json"))
r["algorithm"] = sys.argv[1]
del r["models"]["critic"]
r["train"] = {"lr": 0.001, "clip_high": 0.3, "loss_agg": "token-mean", "kl_coef": 0.01, "kl_estimator": "k2",
              "normalize_advantages": False}
r["score"] = {"kl_coef": 0.01, "kl_estimator": "k3"}
if sys.argv[1] in ("dapo", "gspo"):
    r["score"]["norm_by_std"] = False
if sys.argv[1] == "dapo":
    r["score"]["overlong_buffer"] = 2
json.dump(r, open(f"run-{sys.argv[1]}.json", "w"))
PY
  "$B/braid" run "run-$algo.json" -o "out-$algo" -q > /dev/null 2> log || { cat log >&2; fail "braid run $algo"; }
  [[ $(wc -l < "out-$algo/metrics.jsonl") == 2 ]] || fail "braid run $algo: not two iterations"
  "$B/braid" run "run-$algo.json" -o dry -n > dry.txt
  grep -q -- "braid-train $algo " dry.txt || fail "$algo: not braid-train's $algo mode: $(cat dry.txt)"
  grep -q -- "--algorithm $algo" dry.txt || fail "$algo: braid-score not given --algorithm $algo"
  grep -q -- "--no-normalize-advantages" dry.txt || fail "$algo: a false switch not passed as --no-..."
  if [[ $algo == dapo ]]; then
    grep -q -- "--overlong-buffer 2" dry.txt || fail "score.overlong_buffer not passed"
    grep -q -- "--no-norm-by-std" dry.txt || fail "score.norm_by_std not passed"
  fi
done

"$PY" - <<'PY'
import json
r = json.load(open("run-dapo.json"))
r["algorithm"] = "sppo"
json.dump(r, open("bad-algo.json", "w"))
r["algorithm"] = "dapo"
r["train"] = {"clip_low": 0.3}
json.dump(r, open("bad-clip.json", "w"))
r["train"] = {"loss_agg": "sum"}
json.dump(r, open("bad-agg.json", "w"))
r["train"] = {}
r["algorithm"] = "rloo"
r["score"] = {"norm_by_std": True}
json.dump(r, open("bad-std.json", "w"))
PY
expect_bad bad "algorithm: " -- "$B/braid" run bad-algo.json -o never
expect_bad bad "train.clip_low" -- "$B/braid" run bad-clip.json -o never
expect_bad bad "train.loss_agg" -- "$B/braid" run bad-agg.json -o never
expect_bad bad "score.norm_by_std" -- "$B/braid" run bad-std.json -o never

# DAPO's dynamic sampling under braid run: an iteration rolls out again over the next
# prompts while fewer than data.batch_prompts groups have unequal rewards (3 rounds at
# most); braid-train drops the groups of equal rewards and keeps a batch; the next
# iteration starts where this one stopped; a rerun does nothing; a Makefile is refused.
printf '%s\n' '{"text": "a"}' '{"text": "b"}' '{"text": "c"}' '{"text": "d"}' '{"text": "e"}' '{"text": "f"}' > six.jsonl
"$PY" - <<'PY'
import json
r = json.load(open("run-dapo.json"))
r["prompts"] = "six.jsonl"
r["models"]["reward"] = {"rule": "regex:[0-4]"}
r["generate"] = {"samples_per_prompt": 2, "max_new_tokens": 3, "shard_size": 4, "temperature": 2.0}
r["score"] = {}
r["train"] = {"lr": 0.001}
r["data"] = {"batch_prompts": 2, "shuffle": False}
json.dump(r, open("dyn.json", "w"))
PY
"$B/braid" run dyn.json -o dyn -q > /dev/null 2> log || { cat log >&2; fail "braid run with dynamic sampling"; }
"$PY" - <<'PY' || fail "dynamic sampling's rounds"
import glob, json
import h5py
first = 0
for i in (1, 2):
    d = json.load(open(f"dyn/iter-{i:04d}/data.json"))
    assert d["first_prompt"] == first and 1 <= d["rounds"] <= 3, d
    assert d["next_prompt"] == first + 2 * d["rounds"], d
    assert d["kept"] >= 2 or d["rounds"] == 3, d
    # A round ran only while too few groups had unequal rewards: count round 0 alone.
    if d["rounds"] > 1:
        groups = {}
        for p in glob.glob(f"dyn/iter-{i:04d}/scored/scored-0*.h5"):
            with h5py.File(p) as f:
                for sid, r in zip(f["sample_id"], f["reward"]):
                    groups.setdefault(sid // 2, set()).add(float(r))
        assert sum(len(v) > 1 for v in groups.values()) < 2, groups
    g = json.load(open(f"dyn/iter-{i:04d}/train.stats.json"))["groups"]
    assert g["kept"] == min(2, d["kept"]) and g["kept"] + g["all_equal"] + g["beyond_max"] == g["groups"] == d["groups"], (g, d)
    gen = json.load(open(f"dyn/iter-{i:04d}/generate.stats.json"))["data"]
    assert gen["first_prompt"] == first, gen
    m = json.load(open(f"dyn/iter-{i:04d}/metrics.json"))
    assert m["dynamic_sampling"]["rounds"] == d["rounds"], m
    first = d["next_prompt"]
PY
"$B/braid" run dyn.json -o dyn -n > dry.txt
[[ ! -s dry.txt ]] || fail "a finished dynamic-sampling run has steps to do: $(cat dry.txt)"
expect_bad bad "data.dynamic_sampling" -- "$B/braid" makefile dyn.json -d dyn -o dyn.mk
"$PY" - <<'PY'
import json
r = json.load(open("dyn.json"))
r["algorithm"] = "reinforce++"
r["data"]["dynamic_sampling"] = True
json.dump(r, open("dyn-bad.json", "w"))
PY
expect_bad bad "data.dynamic_sampling" -- "$B/braid" run dyn-bad.json -o never
echo OK
