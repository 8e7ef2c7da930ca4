#!/usr/bin/env bash
# Interop with the ecosystem, from docs/formats.md alone: the h5py snippets in
# the doc are extracted and run; braid reads what they write, they read what
# braid writes, and h5dump reads a braid shard.
. "$BRAID_SOURCE/tests/common/cli.sh"
BRAID="$BRAID_BIN/braid"
DOC="$BRAID_SOURCE/docs/formats.md"
PY=/usr/bin/python3


if ! "$PY" -c 'import h5py' 2>/dev/null; then
  echo "SKIP: $PY has no h5py (install python3-h5py)"
  exit 77
fi

# The fenced python block whose first line is "# NAME: ..." -> $S/NAME
extract() {
  awk -v name="# $1:" '
    /^```python$/ { inblock = 1; first = 1; keep = 0; next }
    /^```$/ { inblock = 0; keep = 0; next }
    inblock && first { first = 0; keep = index($0, name) == 1 }
    inblock && keep { print }
  ' "$DOC" > "$S/$1"
  [[ -s "$S/$1" ]] || fail "no python block '# $1:' in docs/formats.md"
}
extract write_sample_shard.py
extract read_sample_shard.py
extract weight_shard.py

# json field of a braid inspect --json document on stdin
field() { "$PY" -c 'import json, sys; d = json.load(sys.stdin); print(eval(sys.argv[1], {}, {"d": d}))' "$1"; }

# 1. h5py writes (doc snippet), braid reads.
"$PY" "$S/write_sample_shard.py" "$S/from_h5py.h5"
"$BRAID" check "$S/from_h5py.h5" || fail "braid check refused the shard written by the doc's h5py snippet"
"$BRAID" inspect --json "$S/from_h5py.h5" > "$S/from_h5py.json"
[[ $(field 'd["sequences"]' < "$S/from_h5py.json") == 2 ]] || fail "sequences"
[[ $(field 'd["tokens"]' < "$S/from_h5py.json") == 8 ]] || fail "tokens"
[[ $(field 'd["policy_step"]' < "$S/from_h5py.json") == 7 ]] || fail "policy_step"
[[ $(field 'd["first_samples"][0]["prompt"]' < "$S/from_h5py.json") == "2+2=" ]] || fail "prompt decoded"
[[ $(field 'd["first_samples"][0]["response"]' < "$S/from_h5py.json") == "4<|eos|>" ]] || fail "response decoded"
[[ $(field 'd["first_samples"][1]["response_len"]' < "$S/from_h5py.json") == 0 ]] || fail "empty response"
[[ $(field 'd["reward"]["mean"]' < "$S/from_h5py.json") == 0.5 ]] || fail "reward mean"
[[ $(field 'd["token_arrays"]["logprobs/actor"]["min"]' < "$S/from_h5py.json") == -0.5 ]] || fail "logprobs"
[[ $(field 'd["first_samples"][0]["extra"]["answer"]' < "$S/from_h5py.json") == 4 ]] || fail "prompt extra fields"
[[ $(field 'd["first_samples"][1]["prompt_line"]' < "$S/from_h5py.json") == 3 ]] || fail "prompt line"
[[ $(field 'd["other_datasets"]' < "$S/from_h5py.json") == "[]" ]] || fail "the /prompt datasets are braid's"

# 2. braid writes, h5py (doc snippet) and h5dump read.
"$BRAID_EXAMPLE_WRITER" "$S/from_braid.h5" "$S/weights_from_braid.h5"
"$PY" "$S/read_sample_shard.py" "$S/from_braid.h5" > "$S/read.txt"
cat > "$S/read.expected" <<'TXT'
policy_step 9 sequences 2
10 [50, 43, 50, 61] [52, 257] 1.0 {"answer": 4, "id": "a"}
11 [72, 101, 108, 108, 111] [] 0.0 {}
TXT
diff "$S/read.expected" "$S/read.txt" || fail "the doc's h5py reader read something else from a braid shard"

command -v h5dump >/dev/null || fail "h5dump not installed (hdf5-tools)"
h5dump -d /tokens "$S/from_braid.h5" > "$S/tokens.dump"
grep -q '50, 43, 50, 61, 52, 257, 72, 101, 108, 108, 111' "$S/tokens.dump" || fail "h5dump /tokens"
h5dump -A "$S/from_braid.h5" > "$S/attrs.dump"
grep -q '"braid.samples"' "$S/attrs.dump" || fail "h5dump format attribute"
grep -q 'ATTRIBUTE "complete"' "$S/attrs.dump" || fail "h5dump complete attribute"

# 3. Weight shards both ways.
"$PY" "$S/weight_shard.py" "$S/weights_from_h5py.h5" > "$S/weights.txt"
grep -q '^model.embed_tokens.weight (259, 4)$' "$S/weights.txt" || fail "weight snippet round trip"
"$BRAID" inspect --json "$S/weights_from_h5py.h5" > "$S/w.json"
[[ $(field 'd["tensor_count"]' < "$S/w.json") == 12 ]] || fail "tensor_count"
[[ $(field 'd["parameters"]' < "$S/w.json") == $((259 * 4 * 2 + 4 * 3 + 4 * 4 * 4 + 8 * 4 * 3)) ]] || fail "parameters"
"$BRAID" check "$S/weights_from_h5py.h5" > /dev/null || fail "braid check: the doc's shard is not a good one"
[[ $(field 'd["model_config"]["vocab_size"]' < "$S/w.json") == 259 ]] || fail "model_config"
"$PY" - "$S/weights_from_braid.h5" <<'PYEOF' || fail "h5py reading a braid weight shard"
import sys
import h5py
with h5py.File(sys.argv[1], "r") as f:
    assert f.attrs["format"] == b"braid.weights", f.attrs["format"]
    assert f.attrs["complete"] == 1 and f.attrs["layer_end"] == 1
    assert f["model.embed_tokens.weight"].shape == (3, 2)
    assert f["model.embed_tokens.weight"][2, 1] == 5.0
PYEOF
echo "ok"
