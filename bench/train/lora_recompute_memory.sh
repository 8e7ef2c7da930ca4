#!/usr/bin/env bash
# Peak memory and time of braid-train sft on the CPU (docs/memory.md, "LoRA and activation
# recomputation"): a 100m-shaped policy (bench/model/shapes.hpp, 124.7 M parameters) trained
# for one optimizer step over 2048 tokens in two micro-batches of --micro-tokens 1024, with
# every weight trained, with every layer recomputed (--recompute 1), with LoRA adapters of
# rank 16 on every linear layer (--lora-rank 16), and with both. Prints each run's max RSS
# (/usr/bin/time) and wall time; the predictions of the same runs come from
#   build/tests/test_memory_prediction --run_test=bench_lora_recompute_shapes --log_level=message
# Usage: bench/train/lora_recompute_memory.sh BUILD [WORKDIR] [THREADS]   (a few minutes, ~3 GiB)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
BUILD="$(cd "${1:?usage: lora_recompute_memory.sh BUILD [WORKDIR] [THREADS]}" && pwd)"
W="${2:-$(mktemp -d)}"
THREADS="${3:-2}"
mkdir -p "$W"
cd "$W"
B="$BUILD/bin"
cat > config.json <<'JSON'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 768, "num_hidden_layers": 12,
 "num_attention_heads": 12, "num_key_value_heads": 4, "intermediate_size": 2048, "vocab_size": 32000,
 "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "max_position_embeddings": 1024, "tie_word_embeddings": false,
 "hidden_act": "silu", "bos_token_id": 256, "eos_token_id": 257, "pad_token_id": 258}
JSON
"$B/braid" init -q -c config.json --seed 1 -o base.h5 > /dev/null
# 16 examples of 128 byte tokens each (BOS, 8-byte prompt, 118-byte response, EOS): 2048 tokens.
python3 "$here/sft_bytes.py" 16 > d.jsonl
run() {
  local what=$1; shift
  rm -f out.h5 out.optim.h5
  /usr/bin/time -f "$what: max RSS %M KB, %e s" "$B/braid-train" sft d.jsonl --actor base.h5 --actor-out out.h5 \
    --threads "$THREADS" --micro-tokens 1024 -q "$@" > /dev/null 2> "log.err" || { cat log.err; exit 1; }
  tail -1 log.err
}
run "full"
run "recompute 1" --recompute 1
run "LoRA r16" --lora-rank 16
run "LoRA r16 + recompute 1" --lora-rank 16 --recompute 1
