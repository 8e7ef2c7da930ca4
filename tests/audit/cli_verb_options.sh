#!/usr/bin/env bash
# The option audit for the driver's verbs (tests/audit/option_effects.tsv names this test):
# each option no other test exercises shown to act on an output, or refused where nothing
# reads it. braid synth's --format, --tail and counts; braid init's --init-std; braid
# export's --dtype and --value-head; braid eval's --limit, --correct-at, --max-new-tokens, --top-k,
# --top-p, --max-batch, --threads, --reward-cmd (+ --reward-cmd-dir, --reward-cmd-timeout),
# --length-normalize, --micro-tokens, --dtype, and its refusals; braid tokenize --decode,
# braid makefile --iterations. A tiny untrained model: seconds.
. "$BRAID_SOURCE/tests/common/cli.sh"
B="$BRAID_BIN/braid"
llama_config 32 2 2 1 64 259 64 > config.json

# braid synth: --format gsm8k writes question/answer lines ("#### N"); --tail 0.5 is a
# heavier tail than --tail 4 (longer items); --prompts/--sft/--pairs/--heldout count lines.
SYNTH=(--task sort --min-digits 2 --max-digits 12 --prompts 64 --sft 2 --pairs 8 --heldout 6 --seed 1)
"$B" -q synth -o plain "${SYNTH[@]}" --tail 0.5 > /dev/null
"$B" -q synth -o gsm "${SYNTH[@]}" --tail 4 --format gsm8k > /dev/null
python3 - <<'PY' || fail "braid synth --format / --tail / the counts"
import json, re
def lines(p): return [json.loads(l) for l in open(p)]
plain, gsm = lines("plain/prompts.jsonl"), lines("gsm/prompts.jsonl")
assert "prompt" in plain[0] and "question" in gsm[0] and "#### " in gsm[0]["answer"], (plain[0], gsm[0])
def mean_digits(rows, key): return sum(len(re.sub(r"\D", "", r[key].split("=")[0])) for r in rows) / len(rows)
assert mean_digits(plain, "prompt") > mean_digits(gsm, "question"), "--tail 0.5 drew no longer items than --tail 4"
assert [len(lines(f"plain/{f}.jsonl")) for f in ("prompts", "sft", "pairs", "heldout", "heldout-pairs")] == [64, 2, 8, 6, 6]
PY

# braid init --init-std: the matrices' spread, 10 times the default's at 0.2.
"$B" -q init -c config.json -o a0.h5 --seed 1 > /dev/null
"$B" -q init -c config.json -o wide.h5 --seed 1 --init-std 0.2 > /dev/null
spread() {
  h5dump -y -w0 -d /model.embed_tokens.weight "$1" | python3 -c '
import re, statistics, sys
data = sys.stdin.read().split("DATA {", 1)[1].split("}", 1)[0]
print(statistics.pstdev(float(x) for x in re.findall(r"-?\d+\.?\d*(?:e[-+]?\d+)?", data)))'
}
python3 -c "import sys; r = $(spread wide.h5) / $(spread a0.h5); sys.exit(0 if 9 < r < 11 else 1)" \
  || fail "--init-std 0.2: the embedding's spread is not 10 times the default's"

# braid export --dtype bf16 stores BF16; --value-head token / sequence name the class.
"$B" -q init -c config.json -o rm.h5 --seed 2 --value-head --no-lm-head > /dev/null
"$B" -q export rm.h5 --dtype bf16 --value-head token -o rm-token > /dev/null
"$B" -q export rm.h5 --value-head sequence -o rm-sequence > /dev/null
python3 - <<'PY' || fail "braid export --dtype / --value-head"
import json, struct
def dtypes(d):
    with open(f"{d}/model.safetensors", "rb") as f:
        header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
    return {v["dtype"] for k, v in header.items() if k != "__metadata__"}
assert dtypes("rm-token") == {"BF16"} and dtypes("rm-sequence") == {"F32"}, (dtypes("rm-token"), dtypes("rm-sequence"))
arch = lambda d: json.load(open(f"{d}/config.json"))["architectures"][0]
assert arch("rm-token").endswith("ForTokenClassification"), arch("rm-token")
assert arch("rm-sequence").endswith("ForSequenceClassification"), arch("rm-sequence")
PY

# braid eval of a policy, every sample scored by a scorer command in --reward-cmd-dir whose
# reward is a fingerprint of the response in [0, 1): the figures tell samples apart.
mkdir scorer
cat > scorer/fingerprint.py <<'PY'
import json, sys, zlib
for line in sys.stdin:
    print(zlib.crc32(json.loads(line)["response"].encode()) % 1000 / 1000)
PY
E=("$B" -q eval a0.h5 --prompts plain/heldout.jsonl --max-new-tokens 6 --reward-cmd "python3 fingerprint.py"
   --reward-cmd-dir scorer --reward-cmd-timeout 60)
"${E[@]}" -o greedy.json
"${E[@]}" --limit 2 -o limit.json
"${E[@]}" --correct-at 0 -o at0.json
"${E[@]}" --temperature 1 --seed 3 -o sampled.json
"${E[@]}" --temperature 1 --seed 3 --max-batch 1 --threads 1 -o batch1.json
"${E[@]}" --temperature 1 --seed 3 --top-k 1 -o topk.json
"${E[@]}" --temperature 1 --seed 3 --top-p 1e-6 -o topp.json
"$B" -q eval a0.h5 --prompts plain/heldout.jsonl --max-new-tokens 2 --reward-rule math -o short.json
python3 - <<'PY' || fail "braid eval's options"
import json
g, lim, at0, s, b1, tk, tp = (json.load(open(f + ".json")) for f in
                              ("greedy", "limit", "at0", "sampled", "batch1", "topk", "topp"))
assert g["prompts"] == 6 and lim["prompts"] == 2, "--limit 2"
short = json.load(open("short.json"))
assert short["mean_response_length"] <= 2 < g["mean_response_length"] <= 6, "--max-new-tokens"
assert g["pass@1"] == 0 and at0["pass@1"] == 1, "--correct-at 0: every reward in [0, 1) is right"
assert s["mean_reward"] != g["mean_reward"], "sampling at temperature 1 gave the greedy responses"
assert b1["mean_reward"] == s["mean_reward"], "--max-batch 1 --threads 1 changed the samples"
for name, d in (("--top-k 1", tk), ("--top-p 1e-6", tp)):
    assert d["mean_reward"] == g["mean_reward"], name + ": not the greedy responses"
PY
# Without --reward-cmd-dir the scorer is not found; a scorer silent past --reward-cmd-timeout is refused.
expect_bad eval_cmd_dir "--reward-cmd" -- "$B" -q eval a0.h5 --prompts plain/heldout.jsonl --max-new-tokens 2 \
  --reward-cmd "python3 fingerprint.py"
expect_bad eval_cmd_timeout "gave no answer for 0.3 s" -- "$B" -q eval a0.h5 --prompts plain/heldout.jsonl \
  --max-new-tokens 2 --reward-cmd "sleep 5" --reward-cmd-timeout 0.3

# braid eval of a DPO policy: --length-normalize changes the implicit rewards, --dtype bf16
# moves them a little, --micro-tokens cuts the forward without changing them.
"$B" -q init -c config.json -o a1.h5 --seed 3 > /dev/null
P=("$B" -q eval a0.h5 --pairs plain/heldout-pairs.jsonl --ref a1.h5)
"${P[@]}" -o dpo.json
"${P[@]}" --length-normalize -o dpo_norm.json
"${P[@]}" --dtype bf16 -o dpo_bf16.json
"${P[@]}" --micro-tokens 40 -o dpo_micro.json
python3 - <<'PY' || fail "braid eval of a DPO policy: --length-normalize / --dtype / --micro-tokens"
import json
d, n, bf, m = (json.load(open(f + ".json")) for f in ("dpo", "dpo_norm", "dpo_bf16", "dpo_micro"))
assert n["length_normalize"] and abs(n["mean_chosen"] - d["mean_chosen"]) > 1e-6, (n, d)
assert bf["mean_chosen"] != d["mean_chosen"] and abs(bf["mean_chosen"] - d["mean_chosen"]) < 0.05 * abs(d["mean_chosen"]) + 0.05, (bf, d)
for k in ("mean_chosen", "mean_rejected", "loss"):
    assert abs(m[k] - d[k]) <= 1e-5 * max(1, abs(d[k])), (k, m[k], d[k])
PY

# Options a kind of evaluation does not read are refused, naming them; bad values too.
expect_bad eval_micro_prompts "--micro-tokens" -- "$B" eval a0.h5 --prompts plain/heldout.jsonl --reward-rule math \
  --micro-tokens 64
expect_bad eval_top_p_pairs "--top-p" -- "$B" eval a0.h5 --pairs plain/heldout-pairs.jsonl --ref a1.h5 --top-p 0.5
expect_bad eval_cmd_dir_rule "--reward-cmd-dir" -- "$B" eval a0.h5 --prompts plain/heldout.jsonl --reward-rule math \
  --reward-cmd-dir scorer
expect_bad eval_timeout_rule "--reward-cmd-timeout" -- "$B" eval a0.h5 --prompts plain/heldout.jsonl --reward-rule math \
  --reward-cmd-timeout 5
expect_bad eval_device "--device" -- "$B" eval a0.h5 --prompts plain/heldout.jsonl --reward-rule math --device tpu
expect_bad eval_tools "nosuch.json" -- "$B" eval a0.h5 --prompts plain/heldout.jsonl --reward-rule math \
  --tools nosuch.json
expect_bad eval_kwargs "--chat-template-kwargs" -- "$B" eval a0.h5 --prompts plain/heldout.jsonl --reward-rule math \
  --chat-template-kwargs '[1]'
# braid tokenize --decode: ids to text; braid makefile --iterations: the rules of that many.
[[ "$("$B" tokenize --decode 104,105)" == *'"decoded":"hi"'* ]] || fail "braid tokenize --decode 104,105 is not hi"
mkdir -p models && cp config.json models/ && printf '{"text": "1 2"}\n' > prompts.jsonl
cat > run.json <<'JSON'
{"format": "braid.run", "version": 1, "algorithm": "grpo", "prompts": "prompts.jsonl", "iterations": 3,
 "models": {"actor": {"init": {"config": "models/config.json"}}, "reward": {"rule": "digits"}}}
JSON
"$B" -q makefile run.json -d out -o three.mk
"$B" -q makefile run.json -d out --iterations 1 -o one.mk
grep -q "iter-0003" three.mk && ! grep -q "iter-0002" one.mk || fail "braid makefile --iterations 1 wrote other iterations"
echo "verb options ok"
