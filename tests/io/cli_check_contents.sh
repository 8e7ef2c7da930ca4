#!/usr/bin/env bash
# braid check and braid inspect judge what a file holds, not only that it is whole: files
# that pass every checksum but that no braid tool could have written (or would load as
# they are) are bad. Before, `braid check` passed each case below and `braid inspect`
# showed the NaN weight without a word. Each file is a good one edited with h5py, its seal
# removed first (an edit on purpose; docs/formats.md).
. "$BRAID_SOURCE/tests/common/cli.sh"
B="$BRAID_BIN"
PY=/usr/bin/python3
cat > config.json <<'JSON'
{"hidden_size": 8, "num_hidden_layers": 2, "vocab_size": 300, "num_attention_heads": 2, "num_key_value_heads": 1,
 "intermediate_size": 16, "max_position_embeddings": 32}
JSON
"$B/braid" -q init --config config.json --seed 1 -o w.h5 > /dev/null
"$B/braid" -q init --config config.json --seed 2 --value-head --no-lm-head -o critic.h5 > /dev/null
printf '%s\n' '{"text": "1 2"}' '{"text": "3"}' > prompts.jsonl
"$B/braid-generate" -q --actor w.h5 --prompts prompts.jsonl -o gen --samples-per-prompt 2 --max-new-tokens 3 \
  --threads 1 > /dev/null
"$B/braid-score" -q gen/gen-00000.h5 -o scored --critic critic.h5 --reward-rule digits --threads 1 > /dev/null
for f in w.h5 gen/gen-00000.h5 scored/scored-00000.h5; do
  "$B/braid" check "$f" || fail "the good file $f is not good"
done

# edit SOURCE DEST PYTHON: DEST is SOURCE, unsealed, with PYTHON run on f (the h5py file).
edit() {
  cp "$1" "$2"
  dd if=/dev/zero of="$2" bs=512 count=1 conv=notrunc status=none
  "$PY" -c "import h5py, numpy as np
f = h5py.File('$2', 'r+')
def replace(n, v):
    del f[n]
    f.create_dataset(n, data=v)
$3
f.close()"
}
# bad FILE TEXT...: check exits 1 (-v naming FILE and each TEXT); inspect exits 2 naming them too.
bad() {
  local file=$1; shift
  local rc=0
  "$B/braid" check -v "$file" 2> check.err || rc=$?
  [ "$rc" = 1 ] || { cat check.err >&2; fail "check $file: exit $rc, expected 1"; }
  rc=0
  "$B/braid" inspect "$file" > inspect.out 2> inspect.err || rc=$?
  [ "$rc" = 2 ] || { cat inspect.err >&2; fail "inspect $file: exit $rc, expected 2"; }
  for t in "$file" "$@"; do
    grep -qF -- "$t" check.err || { cat check.err >&2; fail "check -v $file does not name '$t'"; }
    grep -qF -- "$t" inspect.err || { cat inspect.err >&2; fail "inspect $file does not name '$t'"; }
  done
}

# Weight files: a tensor missing, transposed, given a dimension, the head missing, a NaN.
edit w.h5 missing.h5 'del f["model.layers.1.mlp.up_proj.weight"]'
bad missing.h5 "model.layers.1.mlp.up_proj.weight: missing"
edit w.h5 transposed.h5 'replace("model.layers.0.mlp.down_proj.weight", f["model.layers.0.mlp.down_proj.weight"][()].T.copy())'
bad transposed.h5 "model.layers.0.mlp.down_proj.weight: shape [16, 8] where the model has [8, 16]"
edit w.h5 threed.h5 'replace("model.layers.0.self_attn.q_proj.weight", f["model.layers.0.self_attn.q_proj.weight"][()][None])'
bad threed.h5 "model.layers.0.self_attn.q_proj.weight: shape [1, 8, 8] where the model has [8, 8]"
edit w.h5 nohead.h5 'del f["lm_head.weight"]'
bad nohead.h5 "holds no head (lm_head.weight"
edit w.h5 extra.h5 'f.create_dataset("model.layers.0.self_attn.q_proj.bias", data=np.zeros(8, dtype=np.float32))'
bad extra.h5 "model.layers.0.self_attn.q_proj.bias: not a tensor of this model"
edit w.h5 nan.h5 'v = f["model.layers.0.mlp.gate_proj.weight"][()]; v[1, 2] = np.nan; replace("model.layers.0.mlp.gate_proj.weight", v)'
bad nan.h5 "model.layers.0.mlp.gate_proj.weight: value 10 of 128 is nan"
grep -q "PROBLEM: model.layers.0.mlp.gate_proj.weight: value 10 of 128 is nan" inspect.out ||
  fail "inspect's summary does not show the NaN"
# ... and the model loads none of them: braid-generate refuses the unknown bias by name.
expect_bad load_extra "extra.h5: model.layers.0.self_attn.q_proj.bias: is not a tensor of this model" -- \
  "$B/braid-generate" --actor extra.h5 --prompts prompts.jsonl -o gen_extra --max-new-tokens 2 --threads 1

# Sample shards: a scored shard without advantages or actor logprobs, a prompt of length 0,
# a token id past the actor's vocab_size (meta.config records it).
edit scored/scored-00000.h5 noadv.h5 'del f["advantages"]'
bad noadv.h5 "/advantages: missing, but meta.config says braid-score made the shard"
edit scored/scored-00000.h5 nolp.h5 'del f["logprobs/actor"]'
bad nolp.h5 "/logprobs/actor: missing"
edit gen/gen-00000.h5 noprompt.h5 'p = f["prompt_len"][()]; p[1] = 0; replace("prompt_len", p)'
bad noprompt.h5 "/prompt_len: sequence 1 has prompt_len 0"
edit gen/gen-00000.h5 vocab.h5 't = f["tokens"][()]; t[4] = 300; replace("tokens", t)'
bad vocab.h5 "/tokens: token 4 is 300, not below the actor's vocab_size 300"
echo "check contents: ok"
