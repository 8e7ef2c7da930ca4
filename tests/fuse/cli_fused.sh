#!/usr/bin/env bash
# The fused rollout (braid-generate ... -- SCORE-OPTIONS, lib/fuse) against the unfused
# braid-generate | braid-score, and braid-score under mpirun against the single process:
#  * PPO with critic and reference under mpirun -np 2 with migration: the fused run's
#    scored shards equal braid-score's on the same generated shards to 1e-6 (absolute +
#    relative; measured bit for bit), and an independent unfused pipe (its own
#    generation) gives the same tokens and values to 1e-4 (the generation's logprobs
#    may round differently after a migration, docs/tools/generate.md);
#  * every shard is scored exactly once: each output written once (one "wrote" line),
#    printed once, counted once in the stats; ranks freed by migration scored some;
#    also with 3 ranks and 2 receivers;
#  * a rerun skips every scored shard and rewrites nothing;
#  * GRPO fused equals GRPO unfused; a shard size that splits groups is refused;
#  * braid-score under mpirun -np 2 writes each output once and equals the single
#    process (PPO, and GRPO with groups that straddle shards); '-' is refused there.
. "$BRAID_SOURCE/tests/common/cli.sh"
B="${BRAID_BIN:?}"
PY=/usr/bin/python3
CMP=("$PY" "$BRAID_SOURCE/tests/fuse/compare_scored.py")
needs_mpirun

CONFIG="$BRAID_SOURCE/examples/tiny/config.json"
# --init-std 0.08: responses of very different lengths (a long tail to migrate).
"$B/braid" init -q --config "$CONFIG" --init-std 0.08 --seed 3 -o actor.h5 > /dev/null
"$B/braid" init -q --config "$CONFIG" --seed 2 --value-head --no-lm-head -o critic.h5 > /dev/null
questions 1 24 > p.jsonl
GEN=(--actor actor.h5 --prompts p.jsonl --max-new-tokens 96 --max-batch 8 --threads 1)
SCORE=(--ref actor.h5 --critic critic.h5 --reward-rule digits --threads 1)
MIG=(--migrate-threshold 0.3 --migrate-to 1)
S4=(--shard-size 4)

# ---- PPO, fused, two ranks with migration.
mpirun -np 2 "$B/braid-generate" "${GEN[@]}" "${S4[@]}" "${MIG[@]}" -o gen --stats gen.json -- -o scored "${SCORE[@]}" \
  --stats score.json > fused.out 2> fused.err || { cat fused.err; fail "the fused rollout failed"; }
n=$(ls gen/gen-*.h5 | wc -l)
[[ $n == 6 ]] || fail "expected 6 generated shards, found $n"
[[ $(wc -l < fused.out) == "$n" && $(sort -u fused.out | wc -l) == "$n" ]] || fail "stdout: $(cat fused.out)"
grep -qvx 'scored/scored-0000[0-5].h5' fused.out && fail "stdout holds other lines than the scored shards"
[[ $(grep -c 'wrote scored/scored-' fused.err) == "$n" ]] || fail "each scored shard should be written once"
"$B/braid-score" gen/gen-*.h5 -q -o unfused "${SCORE[@]}" > /dev/null
"${CMP[@]}" scored unfused --atol 1e-6 --rtol 1e-6 || fail "fused and unfused scoring of the same shards differ"
mpirun -np 2 "$B/braid-generate" -q "${GEN[@]}" "${S4[@]}" "${MIG[@]}" -o gen_pipe \
  | "$B/braid-score" - -q -o piped "${SCORE[@]}" > /dev/null
"${CMP[@]}" scored piped --atol 1e-4 --rtol 1e-4 || fail "the fused rollout differs from generate | score"
"$PY" - <<'PY' || fail "stats"
import json
g, s = json.load(open("gen.json")), json.load(open("score.json"))
assert g["migration"] is not None, "no migration happened"
fusion = {r["rank"]: r["fusion"] for r in g["ranks"]}
assert sum(f["shards_scored"] for f in fusion.values()) == 6, fusion
senders = [r["rank"] for r in g["ranks"] if r["role"] == "handed over"]
assert senders and all(fusion[r]["shards_scored"] > 0 for r in senders), ("a freed rank scored nothing", fusion)
for f in fusion.values():
    assert f["generate_seconds"] > 0 and f["score_seconds"] > 0 and f["idle_seconds"] >= 0, f
    assert abs(f["generate_seconds"] + f["score_seconds"] + f["idle_seconds"] - f["wall_seconds"]) < 0.05, f
    assert all(a <= b for a, b in f["score_spans"]) and len(f["score_spans"]) == f["shards_scored"], f
assert s["stage"] == "score" and s["shards_scored"] == 6 and s["sequences"] == 24, s
assert len(s["ranks"]) == 2 and sum(r["shards_scored"] for r in s["ranks"]) == 6, s
assert abs(s["mean_kl"]) < 1e-4, s  # the reference is the actor
PY

# ---- Three ranks, two receivers: a receiver that is not rank 0 reports its shards too.
mpirun -np 3 "$B/braid-generate" -q "${GEN[@]}" "${S4[@]}" --migrate-threshold 0.5 --migrate-to 2 -o gen3 \
  --stats gen3.json -- -o scored3 "${SCORE[@]}" > three.out
[[ $(wc -l < three.out) == 6 && $(sort -u three.out | wc -l) == 6 ]] || fail "3 ranks: stdout $(cat three.out)"
"$B/braid-score" gen3/gen-*.h5 -q -o unfused3 "${SCORE[@]}" > /dev/null
"${CMP[@]}" scored3 unfused3 --atol 1e-6 --rtol 1e-6 || fail "3 ranks: fused and unfused scoring differ"
"$PY" -c 'import json; g = json.load(open("gen3.json")); assert sum(r["fusion"]["shards_scored"] for r in g["ranks"]) == 6, g["ranks"]' \
  || fail "3 ranks: the ranks' shards_scored"

# ---- A rerun: nothing generated or scored again, every scored shard reported again.
touch -d 2000-01-01 scored/*.h5
mpirun -np 2 "$B/braid-generate" "${GEN[@]}" "${S4[@]}" "${MIG[@]}" -o gen -- -o scored "${SCORE[@]}" --stats again.json \
  > again.out 2> again.err || { cat again.err; fail "the rerun failed"; }
[[ $(sort -u again.out | wc -l) == "$n" ]] || fail "the rerun reported $(sort -u again.out | wc -l) shards"
[[ $(find scored -newer p.jsonl -name '*.h5' | wc -l) == 0 ]] || fail "the rerun rewrote a scored shard"
"$PY" -c 'import json; s = json.load(open("again.json")); assert s["shards_skipped"] == 6 and s["shards_scored"] == 0, s' \
  || fail "the rerun's stats"

# ---- GRPO: groups of 4 in shards of 8, fused; the same as scoring those shards unfused.
mpirun -np 2 "$B/braid-generate" -q "${GEN[@]}" "${MIG[@]}" --samples-per-prompt 4 --shard-size 8 --limit 8 \
  -o grpo_gen -- -o grpo --algorithm grpo --ref actor.h5 --reward-rule digits --threads 1 > grpo.out
[[ $(sort -u grpo.out | wc -l) == 4 ]] || fail "GRPO: $(cat grpo.out)"
"$B/braid-score" grpo_gen/*.h5 -q -o grpo_unfused --algorithm grpo --ref actor.h5 --reward-rule digits --threads 1 > /dev/null
"${CMP[@]}" grpo grpo_unfused --atol 1e-6 --rtol 1e-6 || fail "GRPO fused and unfused differ"
expect_bad grpo_split "--shard-size 6 is not a multiple of --samples-per-prompt 4" -- \
  mpirun -np 2 "$B/braid-generate" "${GEN[@]}" --samples-per-prompt 4 --shard-size 6 -o bad_gen -- -o bad \
  --algorithm grpo --reward-rule digits
[[ ! -e bad_gen ]] || [[ -z $(ls bad_gen) ]] || fail "a refused fused run left shards behind"
expect_bad score_options "the braid-score options after '--'" -- \
  "$B/braid-generate" "${GEN[@]}" "${S4[@]}" -o bad_gen2 -- -o bad --critc critic.h5 --reward-rule digits

# ---- braid-score under mpirun: disjoint parts, each output written once, = the single process.
mpirun -np 2 "$B/braid-score" gen/gen-*.h5 -o mpi_scored "${SCORE[@]}" --stats mpi.json > mpi.out 2> mpi.err \
  || { cat mpi.err; fail "braid-score under mpirun failed"; }
[[ $(wc -l < mpi.out) == "$n" && $(sort -u mpi.out | wc -l) == "$n" ]] || fail "mpirun braid-score stdout: $(cat mpi.out)"
[[ $(grep -c 'wrote mpi_scored/' mpi.err) == "$n" ]] || fail "mpirun braid-score should write each output once"
[[ $(grep -c '^braid-score: rank [01]: scored' mpi.err) == 2 || $(grep -c 'rank [01]: scored' mpi.err) == 2 ]] \
  || fail "both ranks should score: $(cat mpi.err)"
"${CMP[@]}" mpi_scored unfused --atol 1e-6 --rtol 1e-6 || fail "braid-score under mpirun differs from one process"
"$PY" -c 'import json; s = json.load(open("mpi.json")); assert s["shards_scored"] == 6 and len(s["ranks"]) == 2 and min(r["shards_scored"] for r in s["ranks"]) > 0, s' \
  || fail "mpirun braid-score stats"
expect_bad mpi_stdin "only rank 0 has stdin" -- mpirun -np 2 "$B/braid-score" - -o x "${SCORE[@]}"
# GRPO with groups of 3 in shards of 5: groups straddle shards, each unit stays on one rank.
"$B/braid-generate" -q "${GEN[@]}" --samples-per-prompt 3 --shard-size 5 --limit 8 -o straddle > /dev/null
mpirun -np 2 "$B/braid-score" straddle/*.h5 -q -o straddle_mpi --algorithm grpo --reward-rule digits --threads 1 > /dev/null
"$B/braid-score" straddle/*.h5 -q -o straddle_one --algorithm grpo --reward-rule digits --threads 1 > /dev/null
"${CMP[@]}" straddle_mpi straddle_one --atol 1e-6 --rtol 1e-6 || fail "GRPO under mpirun differs from one process"
echo "fuse_cli: ok"
