#!/usr/bin/env bash
# braid run with verifiable rewards: GRPO on prompts that carry answers, scored by the
# math rule, then by an external scorer that lives beside the run file (it runs in the
# run file's folder, whatever the driver's working directory); a prompt line without an
# answer refuses the run file before anything runs, and a scorer that dies stops the run
# with exit 2 naming it.
. "$BRAID_SOURCE/tests/common/cli.sh"
B="$BRAID_BIN/braid"
mkdir -p exp
cp "$BRAID_SOURCE/examples/tiny/config.json" exp/config.json
printf '%s\n' '{"prompt": "1+1=", "answer": 2, "id": "a"}' '{"prompt": "2+3=", "answer": "5"}' \
  '{"text": "9-4=", "answer": "#### 5"}' '{"prompt": "half of 1:", "answer": "\\frac{1}{2}"}' > exp/prompts.jsonl
write_run() {  # write_run FILE REWARD_JSON
  cat > "$1" <<JSON
{"format": "braid.run", "version": 1, "algorithm": "grpo",
 "models": {"actor": {"init": {"config": "config.json", "seed": 1}}, "reward": $2},
 "prompts": "prompts.jsonl", "iterations": 1, "threads": 1,
 "generate": {"samples_per_prompt": 2, "max_new_tokens": 6, "shard_size": 4},
 "train": {"lr": 0.001}}
JSON
}

# The math rule: every response scored 0 or 1, the prompts' fields in the scored shards.
write_run exp/math.json '{"rule": "math"}'
"$B" run exp/math.json -o math_out > /dev/null 2> math.log || { cat math.log >&2; fail "braid run (math) failed"; }
grep -q '"mean_reward":' math_out/metrics.jsonl || fail "no metrics"
"$B" inspect --json -n 8 math_out/iter-0001/scored/scored-00001.h5 > math.json
python3 - <<'PY' || fail "the math run's scored shard"
import json
s = json.load(open("math.json"))
assert [x["prompt_line"] for x in s["first_samples"]] == [3, 3, 4, 4], s["first_samples"]
assert s["first_samples"][2]["extra"] == {"answer": "\\frac{1}{2}"}, s["first_samples"][2]
assert all(x["reward"] in (0.0, 1.0) for x in s["first_samples"])
assert json.loads(json.dumps(s["config"]))["score"]["reward"]["rule"] == "math", s["config"]
PY

# An external scorer beside the run file, the driver started from elsewhere.
cat > exp/scorer.py <<'PY'
import json, sys
for line in sys.stdin:
    d = json.loads(line)
    print(len(d["response"]) + (10 if d.get("id") == "a" else 0))
PY
write_run exp/cmd.json '{"command": "python3 scorer.py", "timeout": 60}'
mkdir -p elsewhere
(cd elsewhere && "$B" run ../exp/cmd.json -o ../cmd_out > /dev/null 2> ../cmd.log) || { cat cmd.log >&2; fail "braid run (command) failed"; }
"$B" inspect --json -n 4 cmd_out/iter-0001/scored/scored-00000.h5 > cmd.json
python3 - <<'PY' || fail "the scorer's rewards"
import json
s = json.load(open("cmd.json"))
for x in s["first_samples"]:
    bonus = 10 if x["extra"].get("id") == "a" else 0
    # The scorer counts characters of the decoded response (EOS skipped): at most 6 tokens.
    assert bonus <= x["reward"] <= bonus + 6 * 4, x
assert [x["reward"] >= 10 for x in s["first_samples"]] == [True, True, False, False], s["first_samples"]
PY

# Refused up front: a prompt line without an answer under the math rule (nothing runs).
cp exp/prompts.jsonl exp/prompts.good
printf '%s\n' '{"prompt": "no answer here"}' >> exp/prompts.jsonl
expect_bad no_answer "prompts: exp/prompts.jsonl:5: answer: is missing" -- "$B" run exp/math.json -o bad_out
[[ ! -e bad_out ]] || fail "a refused run file left bad_out"
mv exp/prompts.good exp/prompts.jsonl

# A scorer that dies stops the run: exit 2, its command named.
write_run exp/dies.json '{"command": "read l; exit 3"}'
set +e
"$B" run exp/dies.json -o dies_out > /dev/null 2> dies.log
rc=$?
set -e
[[ $rc == 2 ]] || { cat dies.log >&2; fail "a dying scorer: exit $rc, expected 2"; }
grep -qF -- "--reward-cmd: 'read l; exit 3' ended its output after 0 of 4 rewards (exit code 3)" dies.log \
  || { cat dies.log >&2; fail "the dying scorer is not named"; }
echo "cli_run_rewards: ok"
