#!/usr/bin/env python3
"""Keeps the include graph of lib/ honest: rooms, and every dependency pointing down.

A room is a folder lib/<room>/ with a CMakeLists.txt; its CMake targets are the
braid_library(<name> ...) calls there (target braid_<name>). Rooms are found by
listing lib/, never named here, so a room that is added or renamed needs no edit.

Two graphs between rooms are read:
  * the CMake graph: room A -> room B when a target of A lists a target of B in its
    DEPS (braid_library) or in target_link_libraries. Other names (fmt::fmt,
    MPI::MPI_CXX, braid_hdf5 ...) are not rooms and are ignored.
  * the include graph: room A -> room B when a file under lib/A/ (.hpp .cpp .h .cu
    .cuh, any depth) has a line  #include "B/..."  for a room B other than A.

The check fails (exit 1, every problem listed) when
  (a) the two graphs together have a cycle between rooms, or
  (b) a room includes a room that its CMake targets do not depend on, directly or
      through other rooms' targets (the build would then hold by luck: an include
      path that happens to be there, or a link order that happens to work).
A graph without cycles is a stack: each room's layer is one more than the highest
layer of a room it includes or links, so every dependency points to a lower layer.
The granularity is the room: a room of two targets (lib/generate: the engine and
braid-generate's stage) is checked against the union of their dependencies.

Usage:
  include_graph.py [--root REPO]            check; prints a line when all is well
  include_graph.py [--root REPO] --print    the rooms by layer, the include edges and
                                            the CMake-only ones (docs/design.md shows it)
"""

import argparse
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"/]+)/[^"]*"', re.MULTILINE)
SOURCE_EXTENSIONS = (".hpp", ".cpp", ".h", ".cu", ".cuh")
CMAKE_KEYWORDS = {"SOURCES", "DEPS", "PUBLIC", "PRIVATE", "INTERFACE"}


def strip_cmake_comments(text):
    return "\n".join(line.split("#", 1)[0] for line in text.splitlines())


def cmake_calls(text, command):
    """The argument lists of every `command(...)` call (no nested parentheses in braid's)."""
    for m in re.finditer(r"\b" + command + r"\s*\(([^)]*)\)", text):
        yield m.group(1).split()


def read_rooms(lib):
    """room -> {targets: set, deps: set of target names}."""
    rooms = {}
    for room in sorted(os.listdir(lib)):
        cmake = os.path.join(lib, room, "CMakeLists.txt")
        if not os.path.isfile(cmake):
            continue
        with open(cmake, encoding="utf-8") as f:
            text = strip_cmake_comments(f.read())
        targets, deps = set(), set()
        for args in cmake_calls(text, "braid_library"):
            targets.add("braid_" + args[0])
            if "DEPS" in args:
                for a in args[args.index("DEPS") + 1:]:
                    if a in CMAKE_KEYWORDS:
                        break
                    deps.add(a)
        for args in cmake_calls(text, "target_link_libraries"):
            deps.update(a for a in args[1:] if a not in CMAKE_KEYWORDS)
        rooms[room] = {"targets": targets, "deps": deps}
    return rooms


def cmake_graph(rooms):
    owner = {t: room for room, r in rooms.items() for t in r["targets"]}
    return {room: {owner[d] for d in r["deps"] if d in owner} - {room} for room, r in rooms.items()}


def include_graph(lib, rooms):
    """room -> {included room -> [files that include it]}."""
    graph = {room: {} for room in rooms}
    for room in rooms:
        for dirpath, _, files in os.walk(os.path.join(lib, room)):
            for name in sorted(files):
                if not name.endswith(SOURCE_EXTENSIONS):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for target in INCLUDE.findall(f.read()):
                        if target in rooms and target != room:
                            rel = os.path.relpath(path, os.path.dirname(lib))
                            graph[room].setdefault(target, []).append(rel)
    return graph


def find_cycle(graph):
    """A list of rooms forming a cycle (first == last), or None."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def closure(graph, node):
    seen, pending = set(), list(graph[node])
    while pending:
        n = pending.pop()
        if n not in seen:
            seen.add(n)
            pending.extend(graph[n])
    return seen


def layers(graph):
    """room -> layer (0: includes no other room); the graph must be acyclic."""
    memo = {}

    def layer(node):
        if node not in memo:
            memo[node] = 1 + max((layer(n) for n in graph[node]), default=-1)
        return memo[node]

    return {room: layer(room) for room in graph}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(here)), help="the repository root")
    parser.add_argument("--print", action="store_true", help="print the rooms by layer and the include edges")
    args = parser.parse_args()

    lib = os.path.join(args.root, "lib")
    rooms = read_rooms(lib)
    if not rooms:
        print(f"include_graph: no rooms (lib/<room>/CMakeLists.txt) under {lib}", file=sys.stderr)
        return 2
    links = cmake_graph(rooms)
    includes = include_graph(lib, rooms)
    edges = {room: set(targets) for room, targets in includes.items()}

    both = {room: edges[room] | links[room] for room in rooms}
    problems = []
    cycle = find_cycle(both)
    if cycle:
        hops = [f"{a} -> {b} ({'includes' if b in edges[a] else 'links'})" for a, b in zip(cycle, cycle[1:])]
        problems.append(f"rooms depend on each other in a cycle: {', '.join(hops)}")
    for room in sorted(includes):
        reach = closure(links, room)
        for target, files in sorted(includes[room].items()):
            if target not in reach:
                problems.append(f"lib/{room} includes {target}/ ({', '.join(files[:3])}"
                                f"{' ...' if len(files) > 3 else ''}) but no target of lib/{room} "
                                f"depends on a target of lib/{target} (CMakeLists.txt DEPS)")
    if problems:
        for p in problems:
            print(f"include_graph: {p}", file=sys.stderr)
        return 1

    by_layer = layers(both)
    order = lambda rooms_: sorted(rooms_, key=lambda r: (by_layer[r], r))  # noqa: E731
    if args.print:
        for level in range(max(by_layer.values()) + 1):
            print(f"layer {level}: {' '.join(sorted(r for r, l in by_layer.items() if l == level))}")
        print("\nincludes (room -> rooms it includes):")
        for room in order(rooms):
            if edges[room]:
                print(f"  {room} -> {' '.join(order(edges[room]))}")
        print("\nlinks without an include (room -> rooms its targets list in DEPS, none included):")
        for room in order(rooms):
            if links[room] - edges[room]:
                print(f"  {room} -> {' '.join(order(links[room] - edges[room]))}")
    else:
        print(f"include_graph: {len(rooms)} rooms, {sum(len(e) for e in edges.values())} include edges, "
              f"{max(by_layer.values()) + 1} layers, no cycle, every include backed by a CMake dependency")
    return 0


if __name__ == "__main__":
    sys.exit(main())
