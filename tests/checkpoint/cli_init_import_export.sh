#!/usr/bin/env bash
# braid init / export / import (of a Hugging Face folder, its hf_dir) end to end: stage splits and format round trips
# give byte-identical safetensors, bad input exits 2 naming the field and leaves
# no output behind.
. "$BRAID_SOURCE/tests/common/cli.sh"
B="$BRAID_BIN/braid"

llama_config 16 4 4 2 24 300 64 > "$S/config.json"

"$B" -q init -c "$S/config.json" --seed 3 --stages 4 -o "$S/w.h5" > "$S/files"
[ "$(wc -l < "$S/files")" -eq 4 ] || fail "init --stages 4 did not print 4 files"
while read -r f; do [ -f "$f" ] || fail "printed $f does not exist"; done < "$S/files"
"$B" check "$S"/w.stage*-of-4.h5 || fail "braid check refused init's shards"

# The same seed gives the same weights whatever the split.
"$B" -q init -c "$S/config.json" --seed 3 -o "$S/one.h5" > /dev/null
"$B" -q export "$S"/w.stage*-of-4.h5 -o "$S/hf4" > /dev/null
"$B" -q export "$S/one.h5" -o "$S/hf1" > /dev/null
cmp "$S/hf4/model.safetensors" "$S/hf1/model.safetensors" || fail "4-stage and 1-stage init differ"

# import (2 stages) then export again: the same bytes.
"$B" -q import "$S/hf1" --stages 2 -o "$S/back.h5" > /dev/null
"$B" -q export "$S"/back.stage*-of-2.h5 -o "$S/hf2" > /dev/null
cmp "$S/hf1/model.safetensors" "$S/hf2/model.safetensors" || fail "import/export round trip changed the weights"

# The tokenizer goes along when asked (checked against the model's vocabulary first).
T="$BRAID_FIXTURES/tokenizer/llama2_style"
"$B" -q export "$S/one.h5" --tokenizer "$T" -o "$S/hft" > "$S/files"
grep -q 'tokenizer_config.json$' "$S/files" || fail "export --tokenizer did not list tokenizer_config.json"
cmp "$T/tokenizer.json" "$S/hft/tokenizer.json" || fail "tokenizer.json not copied as is"
cmp "$T/tokenizer_config.json" "$S/hft/tokenizer_config.json" || fail "tokenizer_config.json not copied as is"
for f in generation_config.json special_tokens_map.json; do
  grep -q "$f\$" "$S/files" || fail "export --tokenizer did not list $f"
done
# generation_config.json: the tokenizer's BOS/EOS (<s> 1, </s> 2) and braid-generate's sampling;
# special_tokens_map.json: tokenizer_config.json's special tokens.
python3 - "$S/hft" <<'PY' || fail "export --tokenizer: generation_config.json or special_tokens_map.json wrong"
import json, sys
d = sys.argv[1]
g = json.load(open(d + "/generation_config.json"))
want = {"bos_token_id": 1, "eos_token_id": 2, "do_sample": True, "temperature": 1.0, "top_p": 1.0, "top_k": 0,
        "max_new_tokens": 64}
assert g == want, g
m = json.load(open(d + "/special_tokens_map.json"))
assert m == {"bos_token": "<s>", "eos_token": {"content": "</s>"}}, m
PY

# A tokenizer.model and special_tokens_map.json travel as they are; greedy sampling is do_sample false.
mkdir -p "$S/tk"
cp "$T/tokenizer.json" "$T/tokenizer_config.json" "$S/tk/"
head -c 3000 /dev/urandom > "$S/tk/tokenizer.model"
echo '{"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}' > "$S/tk/special_tokens_map.json"
"$B" -q export "$S/one.h5" --tokenizer "$S/tk/tokenizer.json" --temperature 0 --max-new-tokens 9 -o "$S/hfm" > "$S/files"
cmp "$S/tk/tokenizer.model" "$S/hfm/tokenizer.model" || fail "tokenizer.model not copied as is"
cmp "$S/tk/special_tokens_map.json" "$S/hfm/special_tokens_map.json" || fail "special_tokens_map.json not copied as is"
python3 - "$S/hfm" <<'PY' || fail "export --temperature 0: generation_config.json wrong"
import json, sys
g = json.load(open(sys.argv[1] + "/generation_config.json"))
assert g == {"bos_token_id": 1, "eos_token_id": 2, "do_sample": False, "max_new_tokens": 9}, g
PY

# A tokenizer.json alone: a tokenizer_config.json naming the plain fast tokenizer is written. It has
# no special tokens, as transformers would give it none (braid never guesses one from the vocabulary,
# here GPT-2 style's <|endoftext|>).
mkdir -p "$S/bare"
cp "$BRAID_FIXTURES/tokenizer/gpt2_style/tokenizer.json" "$S/bare/"
"$B" -q export "$S/one.h5" --tokenizer "$S/bare/tokenizer.json" --top-k 40 --top-p 0.9 -o "$S/hfg" > /dev/null
python3 - "$S/hfg" <<'PY' || fail "export of a bare tokenizer.json: tokenizer files wrong"
import json, sys
d = sys.argv[1]
c = json.load(open(d + "/tokenizer_config.json"))
assert c["tokenizer_class"] == "PreTrainedTokenizerFast" and "eos_token" not in c, c
assert c["model_max_length"] == 64 and "bos_token" not in c, c
assert json.load(open(d + "/special_tokens_map.json")) == {}
g = json.load(open(d + "/generation_config.json"))
assert g == {"do_sample": True, "temperature": 1.0, "top_p": 0.9, "top_k": 40,
             "max_new_tokens": 64}, g
PY
[ ! -e "$S/hfg/tokenizer.model" ] || fail "a tokenizer.model appeared from nowhere"
# Without --tokenizer: generation_config.json from config.json alone (no ids there).
[ -f "$S/hf1/generation_config.json" ] || fail "export did not write generation_config.json"
set +e
"$B" -q export "$S/one.h5" --top-p 0 -o "$S/hfbad" 2> "$S/err"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "--top-p 0: exit $rc, expected 2"
grep -q -- "--top-p" "$S/err" || fail "--top-p 0: the flag is not named: $(cat "$S/err")"

# Another seed, other weights.
"$B" -q init -c "$S/config.json" --seed 4 -o "$S/other.h5" > /dev/null
"$B" -q export "$S/other.h5" -o "$S/hfo" > /dev/null
if cmp -s "$S/hf1/model.safetensors" "$S/hfo/model.safetensors"; then fail "seeds 3 and 4 gave the same weights"; fi

# Bad config: exit 2, the field named, no file written.
echo '{"hidden_size": 16, "num_attention_heads": 4, "intermediate_size": 8, "vocab_size": 10}' > "$S/bad.json"
set +e
"$B" init -c "$S/bad.json" -o "$S/bad.h5" 2> "$S/err"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "bad config: exit $rc, expected 2"
grep -q num_hidden_layers "$S/err" || fail "bad config: the missing key is not named: $(cat "$S/err")"
[ ! -e "$S/bad.h5" ] || fail "bad config left an output file"

# A size far past the documented range (2^40): exit 2 naming the file and the field.
echo '{"hidden_size": 1099511627776, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 8, "vocab_size": 10}' > "$S/huge.json"
set +e
"$B" init -c "$S/huge.json" -o "$S/huge.h5" 2> "$S/err"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "hidden_size 2^40: exit $rc, expected 2: $(cat "$S/err")"
grep -q "huge.json: hidden_size: is 1099511627776, must be <= 65536" "$S/err" ||
  fail "hidden_size 2^40: file and field not named: $(cat "$S/err")"

# Llama 3.1's rope_scaling is read and exported back; an unknown type is exit 2 naming
# the file and the field.
sed 's/"rms_norm_eps": 1e-5/"rms_norm_eps": 1e-5, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 16}/' \
  "$S/config.json" > "$S/llama31.json"
"$B" -q init -c "$S/llama31.json" --seed 3 -o "$S/llama31.h5" > /dev/null
"$B" -q export "$S/llama31.h5" -o "$S/hf31" > /dev/null
python3 - "$S/hf31/config.json" <<'PY' || fail "export did not write rope_scaling back"
import json, sys
rs = json.load(open(sys.argv[1]))["rope_scaling"]
assert rs == {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
              "original_max_position_embeddings": 16}, rs
PY
sed 's/"rms_norm_eps": 1e-5/"rms_norm_eps": 1e-5, "rope_scaling": {"rope_type": "longrope", "factor": 4.0}/' \
  "$S/config.json" > "$S/longrope.json"
set +e
"$B" init -c "$S/longrope.json" -o "$S/longrope.h5" 2> "$S/err"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "rope_scaling longrope: exit $rc, expected 2: $(cat "$S/err")"
grep -q "longrope.json: rope_scaling.rope_type" "$S/err" || fail "rope_scaling longrope: file and field not named: $(cat "$S/err")"

# An output folder that cannot be created (under a file): exit 2 naming the path.
set +e
"$B" export "$S/one.h5" -o "$S/config.json/hf" 2> "$S/err"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "uncreatable output folder: exit $rc, expected 2: $(cat "$S/err")"
grep -q "config.json/hf" "$S/err" || fail "uncreatable output folder: the path is not named: $(cat "$S/err")"
if grep -q "internal error" "$S/err"; then fail "uncreatable output folder reported as an internal error"; fi

# Exporting half a checkpoint is refused.
set +e
"$B" export "$S/w.stage0-of-4.h5" "$S/w.stage1-of-4.h5" -o "$S/half" 2> "$S/err"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "partial export: exit $rc, expected 2"
[ ! -e "$S/half/model.safetensors" ] || fail "partial export wrote a file"
echo "ok"
