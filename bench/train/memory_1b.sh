#!/usr/bin/env bash
# Peak memory and step time of braid-train sft on the CPU for a Llama-3.2-1B-shaped policy
# (hidden 2048, 16 layers, 32 query / 8 key-value heads of 64, intermediate 8192, vocabulary
# 128256, tied embeddings: 1.236 B parameters; random weights), one optimizer step over 1024
# tokens (8 examples of 128 byte tokens, one micro-batch of --micro-tokens 1024), four ways:
# every weight trained, every layer recomputed (--recompute 1), LoRA adapters of rank 16 on
# every linear layer (--lora-rank 16), and both. For each: braid-train's own prediction for the
# run (bench_train_memory, the figure it checks on a GPU), and, where the machine has the
# memory, the process's peak resident memory (/usr/bin/time) and the step's time (--stats).
# A run whose prediction and 2 GiB more (the process's own: code, BLAS and HDF5 buffers, the
# host copy a tensor is written through, 1 GiB for the embedding) do not fit MemAvailable is
# predicted only. docs/memory.md holds the figures.
# Usage: bench/train/memory_1b.sh BUILD [WORKDIR] [THREADS] [RUNS]
#   RUNS: a comma-separated subset of full,recompute,lora,lora-recompute (default all).
#   About 2 min to make the base (5 GiB of disk), 4-6 min a run on 2 cores; a run that trains
#   every weight writes 15 GiB more (removed after it).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
BUILD="$(cd "${1:?usage: memory_1b.sh BUILD [WORKDIR] [THREADS]}" && pwd)"
W="${2:-$(mktemp -d)}"
THREADS="${3:-2}"
RUNS=",${4:-full,recompute,lora,lora-recompute},"
mkdir -p "$W"
cd "$W"
B="$BUILD/bin"
PREDICT="$BUILD/bench/bench_train_memory"
cat > config.json <<'JSON'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048, "num_hidden_layers": 16,
 "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64, "intermediate_size": 8192,
 "vocab_size": 128256, "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "max_position_embeddings": 131072,
 "tie_word_embeddings": true, "hidden_act": "silu", "bos_token_id": 256, "eos_token_id": 257, "pad_token_id": 258}
JSON
[ -s base.h5 ] || /usr/bin/time -f "braid init: %e s" "$B/braid" init -q -c config.json --seed 1 -o base.h5 > /dev/null
# 8 examples of 128 byte tokens each (BOS, 8-byte prompt, 118-byte response, EOS): 1024 tokens.
python3 "$here/sft_bytes.py" 8 > d.jsonl
available_kb=$(awk '/MemAvailable/ {print $2}' /proc/meminfo)
run() {
  local key=$1 what=$2; shift 2
  [[ "$RUNS" == *",$key,"* ]] || return 0
  local predicted
  predicted=$("$PREDICT" base.h5 --micro-tokens 1024 "$@" | awk '$1 == "total" {print $2}')
  echo "$what: predicted $((predicted / 1048576)) MiB"
  if [ $((predicted / 1024 + 2 * 1024 * 1024)) -gt "$available_kb" ]; then
    echo "  not run: $((available_kb / 1024)) MiB available"
    return
  fi
  rm -f out.h5 out.optim.h5 stats.json
  /usr/bin/time -f "  max RSS %M KB, process %e s" "$B/braid-train" sft d.jsonl --actor base.h5 --actor-out out.h5 \
    --threads "$THREADS" --micro-tokens 1024 --mini-batch 8 --stats stats.json -q "$@" > /dev/null 2> log.err ||
    { cat log.err; exit 1; }
  tail -1 log.err
  python3 -c 'import json; s = json.load(open("stats.json"))["calls"]["actor_train"]["per_step"][0]
print("  step %.1f s, %d tokens, loss %.4f" % (s["seconds"], s["tokens"], s["loss"]))'
  rm -f out.h5 out.optim.h5
}
run full "full"
run recompute "recompute 1" --recompute 1
run lora "LoRA r16" --lora-rank 16
run lora-recompute "LoRA r16 + recompute 1" --lora-rank 16 --recompute 1
