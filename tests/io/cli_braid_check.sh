#!/usr/bin/env bash
# braid check answers by exit code alone; braid inspect refuses every bad file
# with exit 2 and a message naming it.
. "$BRAID_SOURCE/tests/common/cli.sh"
keep_going
BRAID="$BRAID_BIN/braid"
F="$BRAID_FIXTURES/io"

good=("$F/good_samples.h5" "$F/good_samples_extra.h5" "$F/good_weights.h5" "$F/schedule.json")
bad=("$F"/bad_*)
[[ ${#bad[@]} -ge 14 ]] || fail "expected at least 14 bad fixtures, found ${#bad[@]}"

for f in "${good[@]}"; do
  expect_rc 0 "check $f" "$BRAID" check "$f"
  [[ ! -s "$S/out" && ! -s "$S/err" ]] || fail "check printed something for a good file"
  expect_rc 0 "inspect $f" "$BRAID" inspect "$f"
  grep -qF "$f" "$S/out" || fail "inspect's text does not name $f"
  expect_rc 0 "inspect --json $f" "$BRAID" inspect --json "$f"
  /usr/bin/python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$S/out" || fail "inspect --json $f is not JSON"
done
expect_rc 0 "check of all good files" "$BRAID" check "${good[@]}"

for f in "${bad[@]}"; do
  expect_rc 1 "check $f" "$BRAID" check "$f"
  [[ ! -s "$S/out" && ! -s "$S/err" ]] || fail "check without -v printed something for $f"
  expect_rc 1 "check -v $f" "$BRAID" check -v "$f"
  grep -qF "$f" "$S/err" || fail "check -v does not name $f"
  expect_rc 2 "inspect $f" "$BRAID" inspect "$f"
  grep -qF "$f" "$S/err" || fail "inspect's error does not name $f"
  [[ ! -s "$S/out" ]] || fail "inspect printed data for the bad file $f"
done

expect_rc 1 "check of good and bad files" "$BRAID" check "${good[@]}" "$F/bad_truncated.h5"
expect_rc 1 "check of a missing file" "$BRAID" check "$S/no-such-file.h5"
expect_rc 2 "check without files" "$BRAID" check
expect_rc 2 "an unknown option" "$BRAID" check --no-such-option "$F/good_samples.h5"
expect_rc 2 "no verb" "$BRAID"

# -v lists only the bad ones, one reason each.
expect_rc 1 "check -v of a mix" "$BRAID" check -v "${good[@]}" "$F/bad_version.h5" "$F/bad_unfinished.h5"
[[ $(grep -c 'bad_' "$S/err") == 2 ]] || fail "check -v should list exactly the 2 bad files"
grep -q 'bad_version.h5: attribute version: is 2' "$S/err" || fail "reason for bad_version.h5"
grep -q 'bad_unfinished.h5: attribute complete: missing' "$S/err" || fail "reason for bad_unfinished.h5"

# JSON on stdin, and its key figures.
expect_rc 0 "inspect - (stdin)" "$BRAID" inspect --json - < "$F/schedule.json"
grep -q '"makespan": 41.5' "$S/out" || fail "makespan figure"
grep -q '"baselines.greedy_makespan": 45.25' "$S/out" || fail "nested makespan figure"

end_of_test
echo ok
