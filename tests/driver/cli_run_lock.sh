#!/usr/bin/env bash
# One driver per run folder (lib/driver/run_lock.hpp). Two makes of one braid Makefile, or
# a make and a braid run, on one folder used to train the same iterations side by side;
# now the second exits 2 at once naming the first's pid and host, and the first finishes
# as a run alone would. A holder that has ended (its owner line left behind) is taken over.
. "$BRAID_SOURCE/tests/common/cli.sh"
B="$BRAID_BIN/braid"
step_of() { "$B" inspect --json "$1" | grep -o '"step": [0-9]*' | head -1 | cut -d' ' -f2; }
. "$BRAID_SOURCE/tests/driver/tiny_run.sh"
host=$(hostname)

# waits until the owner line of folder $1 names $2 ("make", "braid run"); prints its pid
owner_pid() {
  for _ in $(seq 1 600); do
    if [ -s "$1/.braid-run.owner" ] && grep -q " $2\$" "$1/.braid-run.owner"; then
      cut -d' ' -f1 "$1/.braid-run.owner"
      return
    fi
    sleep 0.05
  done
  fail "no $2 took $1 (owner: $(cat "$1/.braid-run.owner" 2>/dev/null))"
}
# expect_refused NAME PID COMMAND...: exit 2 within 10 s, naming the holder's pid and host
expect_refused() {
  local name=$1 pid=$2; shift 2
  local t0=$SECONDS rc=0
  "$@" > "$name.out" 2> "$name.err" || rc=$?
  [ "$rc" = 2 ] || { cat "$name.err" >&2; fail "$name: exit $rc, expected 2"; }
  [ $((SECONDS - t0)) -le 10 ] || fail "$name: took $((SECONDS - t0)) s to refuse"
  grep -q "pid $pid on host $host" "$name.err" || { cat "$name.err" >&2; fail "$name: does not name pid $pid on $host"; }
  grep -q "is working in this run folder" "$name.err" || { cat "$name.err" >&2; fail "$name: no reason given"; }
}

# A make whose generation is slow (a wrapper sleeps first) holds mk/ for several seconds.
cat > slow-generate <<EOF
#!/usr/bin/env bash
sleep 4
exec "$BRAID_BIN/braid-generate" "\$@"
EOF
chmod +x slow-generate
"$B" makefile run.json -d mk -o Makefile
make -f Makefile BRAID_GENERATE="$S/slow-generate" > make1.log 2>&1 &
first=$!
pid=$(owner_pid mk make)
[ "$pid" = "$first" ] || fail "the owner line names pid $pid, the make is $first"
expect_refused make2 "$first" make -f Makefile
expect_refused run2 "$first" "$B" run run.json -o mk
# A dry run writes nothing: it prints its commands beside the holder.
"$B" run run.json -o mk -n > dry.out 2> dry.err || { cat dry.err >&2; fail "braid run -n beside a make"; }
grep -q "braid-generate" dry.out || fail "braid run -n printed no commands: $(cat dry.out)"
wait "$first" || { cat make1.log >&2; fail "the first make failed"; }
[ "$(step_of mk/iter-0002/actor.h5)" = 2 ] || fail "the first make did not finish its run"
grep -q "iteration 2" make1.log || fail "the first make did not run braid run's last rule"
# The second make and braid run wrote nothing: each iteration was trained once.
[ "$(ls mk/iter-0001/scored/ | wc -l)" = 2 ] || fail "iteration 1 has $(ls mk/iter-0001/scored/ | wc -l) scored shards"

# The make has ended: the next driver takes the folder over, and a finished run stays finished.
"$B" run run.json -o mk > /dev/null 2> takeover.log || { cat takeover.log >&2; fail "braid run after make"; }
grep -q "the run folder's last holder, make (pid $first on host $host), has ended" takeover.log ||
  { cat takeover.log >&2; fail "the stale owner was not named"; }
grep -q "all 2 iterations were already complete" takeover.log || fail "the finished run was redone"
[ ! -s mk/.braid-run.owner ] || fail "braid run left its owner line: $(cat mk/.braid-run.owner)"

# A braid run holds its folder: a make and a second braid run are refused.
sed 's/"iterations": 2/"iterations": 3/' run.json > run3.json
"$B" makefile run3.json -d out -o out.mk
"$B" run run3.json -o out > run1.log 2>&1 &
first=$!
pid=$(owner_pid out "braid run")
[ "$pid" = "$first" ] || fail "the owner line names pid $pid, braid run is $first"
expect_refused run3 "$first" "$B" run run3.json -o out
expect_refused make3 "$first" make -f out.mk
wait "$first" || { cat run1.log >&2; fail "the first braid run failed"; }
[ "$(step_of out/iter-0003/actor.h5)" = 3 ] || fail "the first braid run did not finish"

# A braid run killed with SIGKILL leaves its owner line: the next run takes over and resumes.
rm -rf out/iter-0003
"$B" run run3.json -o out > /dev/null 2>&1 &
victim=$!
owner_pid out "braid run" > /dev/null
kill -9 "$victim"
wait "$victim" 2>/dev/null || true
"$B" run run3.json -o out > /dev/null 2> resume.log || { cat resume.log >&2; fail "resume after SIGKILL"; }
grep -q "pid $victim on host $host), has ended" resume.log || { cat resume.log >&2; fail "the killed run was not taken over"; }
[ "$(step_of out/iter-0003/actor.h5)" = 3 ] || fail "the resumed run did not finish"

# An owner on another host cannot be checked: refused, naming it.
echo "4242 some-other-host 1 braid run" > out/.braid-run.owner
expect_bad otherhost "pid 4242 on host some-other-host" "remove out/.braid-run.owner" -- "$B" run run3.json -o out
echo "lock: ok"
