#!/usr/bin/env bash
# Dataset checksums end to end: a weight shard with one byte flipped inside a
# tensor's data, and a sample shard with a value rewritten through HDF5 (its
# checksum left as it was), are refused by braid check (exit 1, -v names the
# dataset), braid inspect and braid-generate (exit 2 naming file and dataset).
. "$BRAID_SOURCE/tests/common/cli.sh"
keep_going

llama_config 64 2 4 2 128 259 128 > "$S/config.json"
"$BRAID_BIN/braid" -q init -c "$S/config.json" --seed 1 -o "$S/actor.h5" > /dev/null || fail "init"
for i in 1 2; do echo "{\"text\": \"prompt $i\"}"; done > "$S/prompts.jsonl"
"$BRAID_BIN/braid-generate" -q --actor "$S/actor.h5" --prompts "$S/prompts.jsonl" -o "$S/gen" \
  --max-new-tokens 4 --threads 1 > /dev/null || fail "generate on the good actor"
shard=$(ls "$S"/gen/*.h5 | head -1)

expect_rc 0 "check of good fresh files" "$BRAID_BIN/braid" check -v "$S/actor.h5" "$shard"
[[ ! -s "$S/err" ]] || fail "check -v printed something for files with checksums: $(cat "$S/err")"

T=model.layers.1.mlp.up_proj.weight
cp "$S/actor.h5" "$S/damaged.h5"
/usr/bin/python3 - "$S/damaged.h5" "$T" <<'PY' || fail "flipping a byte"
import sys, h5py
path, name = sys.argv[1], sys.argv[2]
with h5py.File(path, "r") as f:
    offset = f[name].id.get_offset()
with open(path, "r+b") as f:
    f.seek(offset + 123)
    b = f.read(1)
    f.seek(offset + 123)
    f.write(bytes([b[0] ^ 0x04]))
PY
expect_rc 1 "check of the damaged actor" "$BRAID_BIN/braid" check "$S/damaged.h5"
expect_rc 1 "check -v of the damaged actor" "$BRAID_BIN/braid" check -v "$S/damaged.h5"
grep -qF "damaged.h5: /$T: checksum mismatch" "$S/err" || fail "check -v does not name /$T: $(cat "$S/err")"
expect_rc 2 "inspect of the damaged actor" "$BRAID_BIN/braid" inspect "$S/damaged.h5"
grep -qF "/$T" "$S/err" || fail "inspect does not name /$T"
expect_rc 2 "braid-generate with the damaged actor" "$BRAID_BIN/braid-generate" -q --actor "$S/damaged.h5" \
  --prompts "$S/prompts.jsonl" -o "$S/gen2" --max-new-tokens 4 --threads 1
grep -qF "damaged.h5" "$S/err" || fail "braid-generate does not name the file"
grep -qF "/$T: checksum mismatch: the file is damaged" "$S/err" || fail "braid-generate does not name /$T: $(cat "$S/err")"

cp "$shard" "$S/damaged_samples.h5"
/usr/bin/python3 - "$S/damaged_samples.h5" <<'PY' || fail "rewriting a value"
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    d = f["logprobs/actor"]
    v = d[...]
    v[0] += 1.0
    d[...] = v
PY
expect_rc 1 "check -v of the damaged samples" "$BRAID_BIN/braid" check -v "$S/damaged_samples.h5"
grep -qF "/logprobs/actor: checksum mismatch" "$S/err" || fail "check -v does not name /logprobs/actor"
expect_rc 2 "inspect of the damaged samples" "$BRAID_BIN/braid" inspect "$S/damaged_samples.h5"
grep -qF "/logprobs/actor" "$S/err" || fail "inspect does not name /logprobs/actor"

# Files written before checksums: still good; -v notes that they carry none.
expect_rc 0 "check -v of an old fixture" "$BRAID_BIN/braid" check -v "$BRAID_FIXTURES/io/good_weights.h5"
grep -q "carry no checksum" "$S/err" || fail "check -v does not note the missing checksums"

end_of_test
