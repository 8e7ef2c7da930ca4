#!/usr/bin/env bash
# braid run with an LR schedule over the whole run and an adaptive KL coefficient
# (docs/formats-run.md): a 3-iteration PPO run of the tiny model, 2 optimizer steps an
# iteration, cosine decay after 1 warmup step to min_lr at global step 6, and
# score.kl_target. Checked: the lr braid-train's stats record at every step is the
# schedule's over the run's 6 steps (not restarted each iteration); metrics.jsonl records
# the kl_coef braid-score used, the first the run file's, each next one TRL's update from
# the line before; a run resumed after iteration 3 is deleted uses the same coefficient.
. "$BRAID_SOURCE/tests/common/cli.sh"
B="$BRAID_BIN/braid"
. "$BRAID_SOURCE/tests/driver/tiny_run.sh"  # the tiny model's config and prompts; this test's own run.json below
ppo_run '{"iterations": 3,
  "score": {"kl_coef": 0.1, "kl_target": 0.001, "kl_horizon": 20},
  "train": {"lr": 0.001, "critic_lr": 0.002, "mini_batch": 4, "lr_schedule": "cosine", "warmup_steps": 1, "min_lr": 0.0001}}' > run.json
"$B" run run.json -o out > /dev/null 2> log || { cat log >&2; fail "braid run failed"; }

check() {
python3 - <<'PY'
import json, math
lines = [json.loads(l) for l in open("out/metrics.jsonl")]
assert len(lines) == 3, lines
# Adaptive KL: TRL's controller on the previous iteration's KL a sequence.
coef = 0.1
for m in lines:
    assert abs(m["kl_coef"] - coef) <= 1e-12 * coef, (m["iteration"], m["kl_coef"], coef)
    kl_seq = m["kl"] * m["mean_response_length"]
    coef *= 1 + max(-0.2, min(0.2, kl_seq / 0.001 - 1)) * m["sequences"] / 20
assert lines[1]["kl_coef"] != lines[0]["kl_coef"], "the coefficient did not move"
# The LR schedule: 1 warmup step, cosine to 1e-4 at global step 6; the critic's scaled by 2.
def lr(step, peak):
    low = 1e-4 * peak / 1e-3
    if step < 1:
        return peak * (step + 1)
    return low + 0.5 * (peak - low) * (1 + math.cos(math.pi * min(1.0, (step - 1) / 5)))
for call, peak in (("actor_train", 1e-3), ("critic_train", 2e-3)):
    got = []
    for i in (1, 2, 3):
        stats = json.load(open(f"out/iter-000{i}/train.stats.json"))
        got += [s["lr"] for s in stats["calls"][call]["per_step"]]
    want = [lr(s, peak) for s in range(6)]
    assert len(got) == 6, (call, got)
    assert all(abs(g - w) <= 1e-9 * w for g, w in zip(got, want)), (call, got, want)
PY
}
check || fail "schedule or coefficients differ (first run)"
grep -q "kl_coef" log || fail "the summary line does not show kl_coef"
cp out/metrics.jsonl first.jsonl

# Resumed: iteration 3 done again from iteration 2's metrics, with the same coefficient.
rm -rf out/iter-0003
"$B" run run.json -o out > /dev/null 2> log || { cat log >&2; fail "resumed braid run failed"; }
check || fail "schedule or coefficients differ (resumed run)"
python3 - <<'PY' || fail "the resumed iteration 3 used another coefficient"
import json
a = [json.loads(l) for l in open("first.jsonl")]
b = [json.loads(l) for l in open("out/metrics.jsonl")]
assert a[2]["kl_coef"] == b[2]["kl_coef"], (a[2]["kl_coef"], b[2]["kl_coef"])
PY

# The dry run of a fresh folder shows where later coefficients come from.
"$B" run run.json -o fresh -n > dry.txt 2> /dev/null || fail "dry run failed"
grep -q -- "--kl-coef 0.1" dry.txt || fail "dry run: iteration 1's --kl-coef missing: $(cat dry.txt)"
grep -q "adaptive: from iteration 1" dry.txt || fail "dry run: iteration 2's --kl-coef source missing"
grep -q -- "--lr-calls 3" dry.txt || fail "dry run: --lr-calls missing"
echo OK
