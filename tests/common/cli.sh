# The start of a CLI test script, shared by them all:
#   . "$BRAID_SOURCE/tests/common/cli.sh"
# sets bash's strict mode and S, the test's scratch folder: ctest's BRAID_SCRATCH (a test run
# by hand must name one; the source tree, or a folder holding it, is refused), emptied and
# made the working folder. It brings fail and expect_bad (expect.sh) and
#   llama_config HIDDEN LAYERS HEADS KV_HEADS INTERMEDIATE VOCAB POSITIONS
#                    a Llama config.json on stdout (rms_norm_eps 1e-5)
#   ppo_run [JSON]   a run file on stdout: PPO of actor and critic made from config.json (seeds
#                    1 and 2) on prompts.jsonl by the digits rule, 2 iterations, 1 thread, 2
#                    samples a prompt of 6 new tokens, shards of 4, lr 0.001 for both; each
#                    top-level key of the JSON object given replaces the run file's own
#   questions FIRST LAST [FACTOR]
#                    prompt lines {"text": "Question I: what is I times FACTOR?"} (FACTOR 7)
#   sft_examples N   N SFT lines of sums ({"prompt": "Q3: add 3 and 21", "response": " 24!!!"}),
#                    of different lengths, on stdout
#   needs_mpirun     skips the test (exit 77, ctest's Skipped) where there is no mpirun
#   tiny_schedule M SCHEDGEN_OPTION...
#                    spec.json, actor and critic of 2 stages each on 2 devices with M
#                    micro-batches, and braid-schedgen's schedule of it in schedule.json
set -euo pipefail
S="${BRAID_SCRATCH:?run under ctest, or set BRAID_SCRATCH to a scratch folder}"
case "$(realpath -m "${BRAID_SOURCE:?}")/" in
  "$(realpath -m "$S")"/*) echo "FAIL: BRAID_SCRATCH=$S holds the source tree" >&2; exit 1 ;;
esac
rm -rf "${S:?}" && mkdir -p "$S" && cd "$S"
. "$BRAID_SOURCE/tests/common/expect.sh"

llama_config() {
  printf '{"hidden_size": %s, "num_hidden_layers": %s, "num_attention_heads": %s, "num_key_value_heads": %s,
 "intermediate_size": %s, "vocab_size": %s, "max_position_embeddings": %s, "rms_norm_eps": 1e-5}\n' "$@"
}

questions() {
  local i
  for i in $(seq "$1" "$2"); do echo "{\"text\": \"Question $i: what is $i times ${3:-7}?\"}"; done
}

sft_examples() {
  local i
  for i in $(seq 1 "$1"); do
    printf '{"prompt": "Q%d: add %d and %d", "response": " %d%s"}\n' "$i" "$i" "$((i * 7))" "$((i * 8))" \
      "$(printf '%*s' "$((i % 5))" '' | tr ' ' '!')"
  done
}

needs_mpirun() { command -v mpirun > /dev/null || { echo "SKIP: no mpirun"; exit 77; }; }

tiny_schedule() {
  local m=$1; shift
  cat > spec.json <<JSON
{"format": "braid.schedspec", "version": 1, "devices": 2,
 "models": [
   {"name": "actor", "stages": 2, "micro_batches": $m, "fwd": [1.0, 1.2], "bwd": [2.0, 2.4], "act_mem": 1},
   {"name": "critic", "stages": 2, "micro_batches": $m, "fwd": [0.8, 1.0], "bwd": [1.6, 2.0], "act_mem": 1}]}
JSON
  "$BRAID_BIN/braid-schedgen" spec.json -o schedule.json "$@"
}

ppo_run() {
  jq -n --argjson over "${1:-{\}}" '{"format": "braid.run", "version": 1, "algorithm": "ppo",
    "models": {"actor": {"init": {"config": "config.json", "seed": 1}},
               "critic": {"init": {"config": "config.json", "seed": 2}},
               "reward": {"rule": "digits"}},
    "prompts": "prompts.jsonl", "iterations": 2, "threads": 1,
    "generate": {"samples_per_prompt": 2, "max_new_tokens": 6, "shard_size": 4},
    "train": {"lr": 0.001, "critic_lr": 0.001}} + $over'
}

# From here on a failure is counted, not fatal: the script goes on to report every one.
#   expect_rc RC WHAT COMMAND...   COMMAND must exit RC (its stdout and stderr in $S/out, $S/err)
#   end_of_test                    exits 1 when anything failed
keep_going() {
  set +e
  failures=0
  fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
}
expect_rc() {
  local want=$1 what=$2; shift 2
  "$@" > "$S/out" 2> "$S/err"
  local rc=$?
  [[ $rc == "$want" ]] || fail "$what: exit $rc, expected $want ($(head -c 300 "$S/err"))"
}
end_of_test() { (( failures == 0 )) || { echo "$failures failure(s)"; exit 1; }; }
