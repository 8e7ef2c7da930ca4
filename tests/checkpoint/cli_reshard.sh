#!/usr/bin/env bash
# braid reshard end to end: a 2-stage checkpoint taken from tp 1 to 2 to 4 and back to 1
# exports to the same safetensors bytes; the slices' files say which slice they hold; a
# degree the key/value heads do not divide, and exporting a slice, exit 2 naming the cause.
set -euo pipefail
B="$BRAID_BIN/braid"
S="$BRAID_SCRATCH"
rm -rf "${S:?}"/*
fail() { echo "FAIL: $*" >&2; exit 1; }

cat > "$S/config.json" <<'JSON'
{"hidden_size": 16, "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 4,
 "intermediate_size": 22, "vocab_size": 259, "max_position_embeddings": 64, "rms_norm_eps": 1e-5}
JSON

"$B" -q init -c "$S/config.json" --seed 3 --stages 2 -o "$S/w.h5" > /dev/null
"$B" -q reshard "$S/w.h5" --tp 2 -o "$S/t2.h5" > "$S/files2"
[ "$(wc -l < "$S/files2")" -eq 4 ] || fail "tp 2 of 2 stages did not print 4 files"
"$B" -q reshard "$S/t2.h5" --tp 4 -o "$S/t4.h5" > /dev/null
"$B" -q reshard "$S"/t4.tp*-of-4.stage*-of-2.h5 --tp 1 -o "$S/back.h5" > /dev/null
"$B" check "$S"/t4.tp*-of-4.*.h5 > /dev/null || fail "braid check refused resharded files"
"$B" inspect --json "$S/t4.tp3-of-4.stage1-of-2.h5" | grep -q '"tp_rank": *3' || fail "tp_rank not recorded"
"$B" inspect --json "$S/t4.tp3-of-4.stage1-of-2.h5" | grep -q '"tp_size": *4' || fail "tp_size not recorded"

"$B" -q export "$S"/w.stage*-of-2.h5 -o "$S/hf1" > /dev/null
"$B" -q export "$S"/back.stage*-of-2.h5 -o "$S/hfb" > /dev/null
cmp "$S/hf1/model.safetensors" "$S/hfb/model.safetensors" || fail "tp 1 -> 2 -> 4 -> 1 changed the weights"

set +e
"$B" -q reshard "$S/w.h5" --tp 3 -o "$S/t3.h5" 2> "$S/err"; rc=$?
set -e
[ "$rc" -eq 2 ] || fail "--tp 3 exited $rc, not 2"
grep -q "key/value heads" "$S/err" || fail "--tp 3 message does not name the heads: $(cat "$S/err")"
ls "$S"/t3.* > /dev/null 2>&1 && fail "a refused reshard left files behind"
set +e
"$B" -q export "$S"/t2.tp0-of-2.stage*-of-2.h5 -o "$S/hfx" 2> "$S/err"; rc=$?
set -e
[ "$rc" -eq 2 ] || fail "exporting a slice exited $rc, not 2"
grep -q "tp_size" "$S/err" || fail "export of a slice does not name tp_size: $(cat "$S/err")"
echo "reshard ok"
