#!/usr/bin/env bash
# Memory per rank of data-parallel braid-train (docs/tools/train.md, "Data parallel under
# mpirun"): a 100m-shaped actor (124.7 M parameters) trained by braid-train sft for one
# step alone and under mpirun -np 2 and 3, f32 and bf16 weights; prints each rank's max
# RSS (/usr/bin/time) and rank 0's log line of the optimizer state it holds.
#   bench/train/dp_memory.sh BUILD [WORKDIR]      # about 1.5 minutes, ~2.5 GiB per rank
set -euo pipefail
BUILD="$(cd "${1:?usage: dp_memory.sh BUILD [WORKDIR]}" && pwd)"
W="${2:-$(mktemp -d)}"
mkdir -p "$W"
cd "$W"
B="$BUILD/bin"
cat > config.json <<'JSON'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 768, "num_hidden_layers": 12,
 "num_attention_heads": 12, "num_key_value_heads": 4, "intermediate_size": 2048, "vocab_size": 32000,
 "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "max_position_embeddings": 128, "tie_word_embeddings": false,
 "hidden_act": "silu", "bos_token_id": 256, "eos_token_id": 257, "pad_token_id": 258}
JSON
"$B/braid" init -q -c config.json --seed 1 -o big.h5 > /dev/null
for i in 1 2 3 4 5 6; do printf '{"prompt": "Q%d", "response": " A%d"}\n' "$i" "$i"; done > d.jsonl
for dtype in f32 bf16; do
  for np in 1 2 3; do
    rm -f out.h5 out.optim.h5
    mpirun -np "$np" /usr/bin/time -f "np=$np dtype=$dtype max RSS %M KB" "$B/braid-train" sft d.jsonl \
      --actor big.h5 --actor-out out.h5 --threads 1 --micro-tokens 64 --dtype "$dtype" > /dev/null 2> "log-$dtype-$np.err"
    grep -E "max RSS|sharded" "log-$dtype-$np.err"
  done
done
