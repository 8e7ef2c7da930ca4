#!/usr/bin/env bash
# Builds braid's libFuzzer targets (fuzz/, -DBRAID_FUZZ=ON, clang) in build-fuzz and runs each
# for SECONDS (default 600), two at a time, with corpora in build-fuzz/corpus/<target> seeded
# from tests/fixtures, examples/ and fuzz/seeds. Prints per target: runs, exec/s, coverage,
# crashes; exits nonzero when any target crashed, leaked, hung or ran out of memory (the
# inputs are left in build-fuzz/findings/<target>/).
#   scripts/fuzz.sh [SECONDS] [TARGETS...]      e.g. scripts/fuzz.sh 60 sample_shard safetensors
# FUZZ_KEEP_GOING=1 runs libFuzzer in fork mode past crashes (-fork=1 -ignore_crashes=1 ...),
# for a target whose first finding is known and would otherwise end the run.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
seconds=${1:-600}
[[ $# -gt 0 ]] && shift
all=(sample_shard weight_shard safetensors peft tokenizer jinja run_file schedspec schedule experiment profile model_config)
targets=("$@")
[[ ${#targets[@]} -eq 0 ]] && targets=("${all[@]}")
jobs=${FUZZ_JOBS:-2}
build=$root/build-fuzz

scripts/install-deps.sh scripts/deps-fuzz.txt   # clang and libFuzzer, when missing

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
# -O1 with line tables only (libFuzzer's advice): stack traces name file and line, and the
# build takes far less than -O2 -g (CI builds it from scratch on 2 cores).
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
  -DBRAID_FUZZ=ON -DBRAID_TESTS=OFF -DBRAID_BENCH=OFF -DBRAID_CUDA=OFF "${launcher[@]}" >/dev/null
cmake --build "$build" -j"$jobs" --target $(printf 'fuzz_%s ' "${targets[@]}") >/dev/null

# Deep nesting, which libFuzzer's mutations of small seeds never reach (it grows inputs a
# few bytes at a time): arrays and objects nested 100,000 deep, alone and inside a model
# config, under build-fuzz/deep/ (made here, not committed).
deep_seeds() {
  local d=$build/deep
  mkdir -p "$d"
  python3 - "$d" "$root/examples/tiny/config.json" <<'PYEOF'
import sys
d, config = sys.argv[1], open(sys.argv[2]).read().rstrip().rstrip("}")
n = 100000
open(f"{d}/array.json", "w").write("[" * n + "]" * n)
open(f"{d}/object.json", "w").write('{"a":' * n + "1" + "}" * n)
open(f"{d}/config.json", "w").write(config + ', "x": ' + "[" * n + "]" * n + "}")
PYEOF
}

# Seeds: the fixtures and examples each reader is meant to read (good and bad).
seeds() {
  local f=$root/tests/fixtures e=$root/examples
  case $1 in
    sample_shard|weight_shard|safetensors) ;;
    *) ls "$build"/deep/*.json ;;
  esac
  case $1 in
    sample_shard|weight_shard) ls "$f"/io/*.h5 "$f"/model/*.h5 "$root"/fuzz/seeds/sample_shard/*.h5 "$root"/fuzz/seeds/weight_shard/*.h5 ;;
    safetensors) ls "$f"/hf/*.safetensors "$f"/hf/tiny_llama/*.safetensors ;;
    peft) ls "$root"/fuzz/seeds/peft/*.json ;;
    tokenizer) ls "$f"/tokenizer/*/tokenizer.json ;;
    jinja) mkdir -p "$build/seeds-jinja"  # the chat templates of the real models' fixtures
      python3 -c 'import json, sys, os
for p in sys.argv[2:]:
    name = os.path.basename(os.path.dirname(p))
    open(os.path.join(sys.argv[1], name + ".jinja"), "w").write(json.load(open(p))["chat_template"])' \
        "$build/seeds-jinja" "$f"/chat/models/*/tokenizer_config.json
      ls "$build"/seeds-jinja/*.jinja ;;
    run_file) ls "$e"/ppo-tiny/run.json "$f"/io/bad_json*.json ;;
    schedspec) ls "$f"/sched/*.json "$e"/schedgen/*.json ;;
    schedule) ls "$f"/io/schedule.json ;;
    experiment) ls "$f"/plan/*.json "$e"/plan/*.json ;;
    profile) ls "$root"/fuzz/seeds/profile/*.json ;;
    model_config) ls "$e"/tiny/config.json "$f"/plan/*config.json "$e"/plan/models/*.json "$f"/hf/tiny_llama/config.json "$f"/core/*.json ;;
  esac
}

# A dictionary for the JSON readers: JSON's tokens and every key the seeds use.
dict_for() {
  local out=$build/corpus/$1.dict
  case $1 in sample_shard|weight_shard|safetensors|jinja) return ;; esac
  {
    printf '%s\n' 'kw1="true"' 'kw2="false"' 'kw3="null"' 'p1="{"' 'p2="}"' 'p3="["' 'p4="]"' 'p5=":"' 'p6=","' \
      'n1="-1"' 'n2="0"' 'n3="1e309"' 'n4="-0.0"' 'n5="4294967296"' 'n6="9223372036854775808"' 'n7="1.5"'
    seeds "$1" | grep -v "/deep/" | xargs cat | grep -oE '"[A-Za-z_][A-Za-z0-9_./-]{0,40}"' | sort -u | head -400 |
      awk '{ gsub(/"/, "\\\""); printf "k%d=\"%s\"\n", NR, $0 }'
  } > "$out"
  echo "$out"
}

run_one() {
  local t=$1 corpus=$build/corpus/$1 findings=$build/findings/$1 log=$build/logs/$1.log
  mkdir -p "$corpus" "$findings" "$build/logs"
  seeds "$t" | while read -r s; do cp -n "$s" "$corpus/seed-$(basename "$(dirname "$s")")-$(basename "$s")"; done
  local dict
  dict=$(dict_for "$t")
  local cmd=("$build/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=65536 -max_len=1048576
             -print_final_stats=1 -artifact_prefix="$findings/" ${dict:+-dict="$dict"})
  [[ ${FUZZ_KEEP_GOING:-0} == 1 ]] && cmd+=(-fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1)
  cmd+=("$corpus")
  echo "${cmd[*]}" > "$log.cmd"
  # Memory: the resident-set limit (2 GB) catches memory really used; a single allocation is
  # limited only at 64 GB, and one the allocator cannot give returns NULL as glibc's would,
  # because libhdf5 allocates the size a damaged object claims (4 GB seen) before reading it
  # and failing cleanly: pages never touched, no memory used (docs/reliability.md).
  # A file without a braid seal is read first by a child process (lib/io/h5_guard.hpp); its time
  # limit stays below libFuzzer's, so that a hang inside libhdf5 ends as the refusal it is.
  BRAID_H5_PROBE_TIMEOUT=3 ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
    LSAN_OPTIONS=suppressions=$root/fuzz/lsan.supp:print_suppressions=0 \
    "${cmd[@]}" > "$log" 2>&1
  echo $? > "$log.rc"
}

deep_seeds
export -f run_one seeds dict_for
export build root seconds FUZZ_KEEP_GOING
printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'run_one {}'

status=0
printf '%-14s %12s %9s %8s %9s %8s  %s\n' target runs exec/s cov features crashes rc
for t in "${targets[@]}"; do
  log=$build/logs/$t.log
  runs=$(grep -oE 'stat::number_of_executed_units: [0-9]+|^#[0-9]+: cov' "$log" | tail -1 | grep -oE '[0-9]+' | head -1 || true)
  eps=$(( ${runs:-0} / seconds ))
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | awk '{print $2}' || true)
  ft=$(grep -oE 'ft: [0-9]+' "$log" | tail -1 | awk '{print $2}' || true)
  crashes=$(find "$build/findings/$t" -type f -name 'crash-*' -o -type f -name 'leak-*' -o -type f -name 'timeout-*' -o -type f -name 'oom-*' | wc -l)
  rc=$(cat "$log.rc")
  printf '%-14s %12s %9s %8s %9s %8s  %s\n' "$t" "${runs:-?}" "${eps:-?}" "${cov:-?}" "${ft:-?}" "$crashes" "$rc"
  if [[ $rc -ne 0 || $crashes -ne 0 ]]; then
    status=1
    echo "  $t: see $log; inputs in $build/findings/$t/" >&2
  fi
done
exit $status
