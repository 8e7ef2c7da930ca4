#!/usr/bin/env bash
# Chat prompts end to end: braid-generate renders {"messages": [...]} lines with the chat
# template of the tokenizer's tokenizer_config.json (tests/fixtures/chat), braid inspect
# decodes the shard with the tokenizer it records, and bad conversations or an unknown
# template exit 2 naming the file, line and field.
. "$BRAID_SOURCE/tests/common/cli.sh"
G="$BRAID_BIN/braid-generate"

llama_config 32 2 4 2 64 300 128 > "$S/config.json"
"$BRAID_BIN/braid" -q init -c "$S/config.json" --seed 1 -o "$S/actor.h5" > /dev/null
T="$BRAID_FIXTURES/chat/llama3"
cat > "$S/prompts.jsonl" <<'JSONL'
{"messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "hello world"}], "answer": 1}
{"messages": [{"role": "user", "content": "hello"}]}
JSONL
"$G" -q --actor "$S/actor.h5" --prompts "$S/prompts.jsonl" --tokenizer "$T" -o "$S/out" --max-new-tokens 4 \
  --threads 1 > "$S/shards" || fail "chat prompts were refused"
shard=$(head -n 1 "$S/shards")
"$BRAID_BIN/braid" inspect --json "$shard" > "$S/summary.json"
python3 - "$S/summary.json" <<'PY' || fail "the chat prompt is not the template's rendering"
import json, sys
s = json.load(open(sys.argv[1]))
assert "recorded in meta.config" in s["decoded_with"], s["decoded_with"]
p = s["first_samples"][0]["prompt"]
want = ("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\\n\\nBe terse.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\\n\\nhello world<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\\n\\n")
assert p == want, p
assert s["first_samples"][0]["extra"] == {"answer": 1}, s["first_samples"][0]
PY

# braid eval and an overcommitted generation read chat prompts the same way.
printf '%s\n' '{"messages": [{"role": "user", "content": "hello"}], "answer": 3}' > "$S/eval.jsonl"
"$BRAID_BIN/braid" -q eval "$S/actor.h5" --prompts "$S/eval.jsonl" --tokenizer "$T" --reward-rule math \
  --max-new-tokens 4 --threads 1 -o "$S/eval.json" || fail "braid eval refused a chat prompt"
python3 -c "import json; e = json.load(open('$S/eval.json')); assert e['prompts'] == 1 and 0 <= e['accuracy'] <= 1, e" \
  || fail "braid eval's figures"
"$G" -q --actor "$S/actor.h5" --prompts "$S/prompts.jsonl" --tokenizer "$T" -o "$S/oc" --max-new-tokens 4 \
  --threads 1 --overcommit 0 --deferred-out "$S/oc/deferred.h5" > /dev/null || fail "overcommit refused chat prompts"

# A conversation the template refuses, and a message without content: exit 2, each named.
cat > "$S/bad.jsonl" <<'JSONL'
{"messages": [{"role": "user", "content": "hi"}]}
{"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]}
{"messages": [{"role": "user"}]}
JSONL
set +e
"$G" -q --actor "$S/actor.h5" --prompts "$S/bad.jsonl" --tokenizer "$BRAID_FIXTURES/chat/gemma" -o "$S/bad" 2> "$S/err"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "bad conversations: exit $rc, expected 2"
grep -q "bad.jsonl:2: messages: Conversation roles must alternate" "$S/err" || fail "alternation not named: $(cat "$S/err")"
grep -q "bad.jsonl:3: messages\[0\].content: is missing" "$S/err" || fail "missing content not named: $(cat "$S/err")"
[ ! -e "$S/bad" ] || [ -z "$(ls -A "$S/bad")" ] || fail "bad prompts left shards behind"

# Any template renders (here one the family fixtures do not have), with tools and keyword
# arguments per line; one that does not parse exits 2 naming tokenizer_config.json, the line
# and the column.
mkdir -p "$S/odd"
cp "$T/tokenizer.json" "$S/odd/"
python3 -c "
import json, sys
c = json.load(open('$T/tokenizer_config.json'))
c['chat_template'] = '{% for m in messages %}{{ m.content }}|{% endfor %}{{ tools | length }}{{ flag }}'
json.dump(c, open('$S/odd/tokenizer_config.json', 'w'))"
printf '%s\n' '{"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function"}], "chat_template_kwargs": {"flag": "F"}}' > "$S/odd.jsonl"
"$BRAID_BIN/braid" tokenize --tokenizer "$S/odd" --prompts "$S/odd.jsonl" > "$S/odd.out" || fail "braid tokenize refused"
python3 -c "import json; d = json.load(open('$S/odd.out')); assert d['decoded'] == 'hi|1F', d" || fail "tools and kwargs: $(cat "$S/odd.out")"
# The run's tools (--tools) and keyword arguments (--chat-template-kwargs) serve the lines
# without their own; a line's own win.
printf '%s\n' '[{"type": "function"}, {"type": "function"}]' > "$S/tools.json"
printf '%s\n' '{"messages": [{"role": "user", "content": "hi"}]}' \
  '{"messages": [{"role": "user", "content": "hi"}], "tools": [], "chat_template_kwargs": {"flag": "L"}}' > "$S/odd2.jsonl"
"$BRAID_BIN/braid" tokenize --tokenizer "$S/odd" --chat "$S/odd2.jsonl" --tools "$S/tools.json" \
  --chat-template-kwargs '{"flag": "R"}' > "$S/odd2.out" || fail "braid tokenize --tools refused"
python3 -c "
import json
d = [json.loads(l) for l in open('$S/odd2.out')]
assert [x['text'] for x in d] == ['hi|2R', 'hi|0L'], d" || fail "run tools and kwargs: $(cat "$S/odd2.out")"
for tool in braid-train braid; do
  set +e
  if [ "$tool" = braid-train ]; then
    "$BRAID_BIN/braid-train" sft "$S/odd2.jsonl" --actor "$S/actor.h5" --actor-out "$S/sft.h5" --tokenizer "$S/odd" \
      --chat-template-kwargs '[1]' 2> "$S/err"
  else
    "$BRAID_BIN/braid" eval "$S/actor.h5" --prompts "$S/odd2.jsonl" --tokenizer "$S/odd" --reward-rule digits \
      --chat-template-kwargs '[1]' 2> "$S/err"
  fi
  rc=$?
  set -e
  [ "$rc" -eq 2 ] || fail "$tool --chat-template-kwargs '[1]': exit $rc, expected 2"
  grep -q -- "--chat-template-kwargs must be a JSON object" "$S/err" || fail "$tool: $(cat "$S/err")"
done

# What training learns of a conversation: each assistant turn as the template writes it
# (its end of turn included), nothing of the user turns.
printf '%s\n' '{"messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}, {"role": "user", "content": "R"}, {"role": "assistant", "content": "B"}]}' > "$S/turns.jsonl"
"$BRAID_BIN/braid" tokenize --tokenizer "$T" --chat "$S/turns.jsonl" --no-generation-prompt > "$S/turns.out" ||
  fail "braid tokenize --no-generation-prompt refused"
python3 -c "
import json
d = json.load(open('$S/turns.out'))
assert [d['text'][b:e] for b, e in d['learnt']] == ['A<|eot_id|>', 'B<|eot_id|>'], d['learnt']
assert len(d['loss_mask']) == len(d['ids'])
assert ''.join(t for t, m in zip(d['tokens'], d['loss_mask']) if m) == 'A<|eot_id|>B<|eot_id|>', d" ||
  fail "learnt turns: $(cat "$S/turns.out")"
python3 -c "
import json
c = json.load(open('$S/odd/tokenizer_config.json'))
c['chat_template'] = '{% for m in messages %}\n{{ m.content }\n{% endfor %}'
json.dump(c, open('$S/odd/tokenizer_config.json', 'w'))"
set +e
"$G" -q --actor "$S/actor.h5" --prompts "$S/prompts.jsonl" --tokenizer "$S/odd" -o "$S/odd_out" 2> "$S/err"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "a template that does not parse: exit $rc, expected 2"
grep -q "odd/tokenizer_config.json: chat_template: does not parse: .*(chat_template):2:" "$S/err" ||
  fail "template error not named: $(cat "$S/err")"

# A token that is part of a character (byte-level BPE: "€" is three byte tokens here) shows
# as U+FFFD in braid tokenize's "tokens", as transformers' decode([id]) does; writing the
# bytes ended braid tokenize with an internal error (exit 1, invalid UTF-8 in JSON).
"$BRAID_BIN/braid" tokenize --tokenizer "$T" --no-specials "€" > "$S/euro.json" || fail "braid tokenize of a split character"
python3 - "$S/euro.json" <<'PY' || fail "the pieces of a split character: $(cat "$S/euro.json")"
import json, sys
t = json.load(open(sys.argv[1]))
assert t["decoded"] == "€" and len(t["ids"]) > 1 and "\ufffd" in t["tokens"], t
PY
echo "cli_chat_prompts: ok"
