# Shared by the CLI test scripts: source it after `set -euo pipefail`.
#   fail MESSAGE...                        ends the test
#   expect_bad NAME TEXT... -- COMMAND...  COMMAND must exit 2 with every TEXT on stderr and
#                                          nothing on stdout (NAME.out, NAME.err kept in cwd)
fail() { echo "FAIL: $*" >&2; exit 1; }

expect_bad() {
  local name=$1; shift
  local texts=()
  while [[ $1 != -- ]]; do texts+=("$1"); shift; done
  shift
  set +e
  "$@" > "$name.out" 2> "$name.err"
  local rc=$?
  set -e
  [[ $rc == 2 ]] || { cat "$name.err" >&2; fail "$name: exit $rc, expected 2"; }
  for t in "${texts[@]}"; do
    grep -qF -- "$t" "$name.err" || { cat "$name.err" >&2; fail "$name: stderr does not name '$t'"; }
  done
  [[ ! -s "$name.out" ]] || fail "$name: wrote to stdout"
}
