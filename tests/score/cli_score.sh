#!/usr/bin/env bash
# braid-score end to end: shards in through a pipe, every array checked against the
# formulas (score_fixture check), stats, a rerun that skips finished outputs, GRPO with
# groups that straddle shards, and bad inputs that exit 2 naming the file and field.
set -euo pipefail
S="$BRAID_SCRATCH"
BRAID="$BRAID_BIN/braid"
SCORE="$BRAID_BIN/braid-score"
FIX="$SCORE_FIXTURE"
CONFIG="$BRAID_SOURCE/examples/tiny/config.json"
rm -rf "$S" && mkdir -p "$S" && cd "$S"

. "$BRAID_SOURCE/tests/common/expect.sh"
"$BRAID" init -q --config "$CONFIG" --seed 1 -o actor.h5 > /dev/null
"$BRAID" init -q --config "$CONFIG" --seed 2 --value-head --no-lm-head -o critic.h5 > /dev/null
"$BRAID" init -q --config "$CONFIG" --seed 3 --value-head --no-lm-head -o rm.h5 > /dev/null

# 6 prompts x 2 samples in shards of 5: groups 2 and 4 straddle shards.
"$FIX" make actor.h5 gen 6 2 5 11 > gen.list
[[ $(wc -l < gen.list) == 3 ]] || fail "expected 3 generated shards"

# --- PPO from a pipe, the reference being the actor (so logprobs_ref must equal the decode path's).
cat gen.list | "$SCORE" - -o scored --ref actor.h5 --critic critic.h5 --reward rm.h5 \
  --kl-coef 0.1 --gamma 0.99 --lambda 0.9 --micro-tokens 40 --threads 2 --stats stats.json > ppo.out 2> ppo.err
printf '%s\n' scored/scored-00000.h5 scored/scored-00001.h5 scored/scored-00002.h5 > want.out
diff want.out ppo.out || fail "stdout is not the three outputs in order"
"$FIX" check ppo 0.1 0.99 0.9 12 scored/*.h5 || fail "PPO arrays"
python3 - <<'PY' || fail "stats"
import json
s = json.load(open("stats.json"))
assert s["format"] == "braid.stagestats" and s["version"] == 1 and s["stage"] == "score", s
assert s["sequences"] == 12 and s["shards_scored"] == 3, s
for call in ("ref_inf", "critic_inf", "reward_inf"):
    c = s["calls"][call]
    assert c["tokens"] == s["tokens"] and c["seconds"] > 0, (call, c)
assert abs(s["mean_kl"]) < 1e-3, s  # the reference is the actor
PY

# --- Rerun after an interruption: only the missing output is scored; all are reported.
rm scored/scored-00001.h5
touch -d '2000-01-01' scored/scored-00000.h5
"$SCORE" $(cat gen.list) -o scored --ref actor.h5 --critic critic.h5 --reward rm.h5 \
  --kl-coef 0.1 --gamma 0.99 --lambda 0.9 > rerun.out 2> rerun.err
diff want.out rerun.out || fail "the rerun does not report every output"
[[ $(grep -c "skipped$" rerun.err) == 2 ]] || { cat rerun.err; fail "the rerun should skip two shards"; }
[[ $(stat -c %Y scored/scored-00000.h5) == $(date -d 2000-01-01 +%s) ]] || fail "a finished output was rewritten"
"$FIX" check ppo 0.1 0.99 0.9 12 scored/*.h5 || fail "PPO arrays after the rerun"

# --- GRPO with a rule reward, shards arriving out of order through the pipe.
tac gen.list | "$SCORE" - -o grpo --algorithm grpo --ref actor.h5 --reward-rule digits -q > grpo.out
[[ $(sort grpo.out | tr '\n' ' ') == "grpo/scored-00000.h5 grpo/scored-00001.h5 grpo/scored-00002.h5 " ]] \
  || fail "GRPO outputs: $(cat grpo.out)"
"$FIX" check grpo 0 1 1 12 grpo/*.h5 || fail "GRPO arrays"

# --- The real pipe: braid-generate's shards (groups of 3 in shards of 5) scored as they stream in.
# The reference is the actor, so /logprobs/ref must equal generate's /logprobs/actor (check).
printf '%s\n' '{"text":"12+3="}' '{"text":"hello"}' '{"text":"abc"}' '{"tokens":[256,50,51]}' > prompts.jsonl
"$BRAID_BIN/braid-generate" --actor actor.h5 --prompts prompts.jsonl -o pipe_gen --samples-per-prompt 3 \
    --shard-size 5 --max-new-tokens 12 --threads 2 -q \
  | "$SCORE" - -o pipe_scored --algorithm grpo --ref actor.h5 --reward-rule digits --threads 2 -q > pipe.out
[[ $(wc -l < pipe.out) == 3 ]] || fail "the pipe gave $(wc -l < pipe.out) outputs, expected 3"
"$FIX" check grpo 0 1 1 12 pipe_scored/*.h5 || fail "GRPO arrays of braid-generate's shards"
"$BRAID_BIN/braid-generate" --actor actor.h5 --prompts prompts.jsonl -o pipe_gen2 --shard-size 2 \
    --max-new-tokens 12 --threads 2 -q \
  | "$SCORE" - -o pipe_ppo --ref actor.h5 --critic critic.h5 --reward rm.h5 --threads 2 -q > /dev/null
"$FIX" check ppo 0.05 1 0.95 4 pipe_ppo/*.h5 || fail "PPO arrays of braid-generate's shards"

# --- Bad inputs: exit 2, naming the file and the field; nothing half-written.
"$FIX" make actor.h5 nolp 1 2 2 5 no-actor-logprobs > /dev/null
expect_bad no_logprobs nolp/gen-00000.h5 /logprobs/actor -- \
  "$SCORE" nolp/gen-00000.h5 -o bad1 --critic critic.h5 --reward-rule digits
expect_bad critic_without_value_head actor.h5 score.weight -- \
  "$SCORE" gen/gen-00000.h5 -o bad2 --critic actor.h5 --reward-rule digits
expect_bad kl_without_ref --kl-coef --ref -- \
  "$SCORE" gen/gen-00000.h5 -o bad3 --critic critic.h5 --reward-rule digits --kl-coef 0.1
expect_bad unknown_rule --reward-rule bogus -- \
  "$SCORE" gen/gen-00000.h5 -o bad4 --critic critic.h5 --reward-rule bogus
expect_bad incomplete_group gen/gen-00000.h5 "group 2" -- \
  "$SCORE" gen/gen-00000.h5 -o bad5 --algorithm grpo --reward-rule digits
expect_bad missing_shard nothere.h5 -- \
  "$SCORE" nothere.h5 -o bad6 --critic critic.h5 --reward-rule digits
for d in bad1 bad2 bad3 bad4 bad5 bad6; do
  [[ ! -d $d ]] || [[ -z $(ls -A "$d") ]] || fail "$d: a failed run left files: $(ls -A "$d")"
done
echo "cli_score: ok"
