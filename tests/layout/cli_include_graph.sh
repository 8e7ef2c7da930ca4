#!/usr/bin/env bash
# include_graph.py fails where it should: on small made-up trees, a cycle between
# rooms and an include that no CMake dependency backs are both reported (exit 1,
# naming the rooms and the file); the same tree made right passes, and --print
# lays its rooms out by layer.
set -uo pipefail
SCRIPT="$BRAID_SOURCE/tests/layout/include_graph.py"
S="$BRAID_SCRATCH"
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# room NAME "DEPS..." "INCLUDED_ROOM..."  -> tree/lib/NAME with a CMakeLists.txt and one source file
room() {
  local name=$1 deps=$2 includes=$3
  mkdir -p "$T/lib/$name"
  echo "braid_library($name SOURCES $name.cpp DEPS $deps fmt::fmt)  # fmt::fmt is no room" > "$T/lib/$name/CMakeLists.txt"
  : > "$T/lib/$name/$name.cpp"
  for r in $includes; do echo "#include \"$r/$r.hpp\"" >> "$T/lib/$name/$name.cpp"; done
}

run() {  # expected_rc description
  python3 "$SCRIPT" --root "$T" "${@:3}" > "$S/out" 2> "$S/err"
  local rc=$?
  [[ $rc == "$1" ]] || fail "$2: exit $rc, expected $1 ($(cat "$S/err"))"
}

# A good stack: base <- mid <- top, top also linking base through mid.
T="$S/good"; rm -rf "$T"
room base "" ""
room mid "braid_base" "base"
room top "braid_mid" "mid base"
run 0 "a tree with every include backed"
run 0 "--print" --print
grep -qx "layer 0: base" "$S/out" || fail "--print: base is not alone in layer 0: $(cat "$S/out")"
grep -qx "layer 2: top" "$S/out" || fail "--print: top is not in layer 2: $(cat "$S/out")"
grep -qx "  top -> base mid" "$S/out" || fail "--print: top's include edges: $(cat "$S/out")"

# An include without a CMake dependency: mid includes side's header, side is not in mid's DEPS.
T="$S/undeclared"; rm -rf "$T"
room base "" ""
room mid "braid_base" "base side"
room side "" ""
run 1 "an include no CMake dependency backs"
grep -q "lib/mid includes side/ (lib/mid/mid.cpp)" "$S/err" || fail "the undeclared include is not named: $(cat "$S/err")"

# A cycle: base includes mid, mid depends on base.
T="$S/cycle"; rm -rf "$T"
room base "braid_mid" "mid"
room mid "braid_base" "base"
run 1 "a cycle between rooms"
grep -q "cycle: base -> mid (includes), mid -> base (includes)" "$S/err" || fail "the cycle is not named: $(cat "$S/err")"

# A cycle through CMake alone (no include goes up, but a DEPS does).
T="$S/link_cycle"; rm -rf "$T"
room base "braid_mid" ""
room mid "braid_base" "base"
run 1 "a cycle of CMake dependencies"
grep -q "cycle: base -> mid (links), mid -> base (includes)" "$S/err" || fail "the link cycle is not named: $(cat "$S/err")"

[[ $failures == 0 ]] || { echo "$failures failure(s)" >&2; exit 1; }
echo "include_graph.py: all cases behave"
