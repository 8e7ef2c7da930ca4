#!/usr/bin/env python3
"""The docs' option tables are the tools' option schemas (lib/core/option_schema.hpp).

A table in docs/ is a block

    <!-- braid options TABLE -->
    | ... markdown table ... |
    <!-- end braid options -->

whose body must be what `braid options TABLE` prints. This test fails, naming the file and
the table, when one differs or when a table `braid options` offers is in no page.

    option_tables.py BRAID DOCS_DIR            # check
    option_tables.py BRAID DOCS_DIR --update   # rewrite the blocks from the schemas
"""
import pathlib
import re
import subprocess
import sys

BLOCK = re.compile(r"(<!-- braid options ([a-z-]+) -->\n)(.*?)(<!-- end braid options -->)", re.S)


def main() -> int:
    braid, docs = sys.argv[1], pathlib.Path(sys.argv[2])
    update = "--update" in sys.argv[3:]
    help_text = subprocess.run([braid, "options", "--help"], check=True, capture_output=True, text=True).stdout
    offered = set(re.search(r"table TEXT:\{([^}]*)\}", help_text).group(1).split(","))
    tables = {}
    problems = []
    seen = set()
    for page in sorted(docs.rglob("*.md")):
        text = page.read_text()

        def replace(m: re.Match) -> str:
            name = m.group(2)
            seen.add(name)
            if name not in tables:
                run = subprocess.run([braid, "options", name], capture_output=True, text=True)
                if run.returncode != 0:
                    problems.append(f"{page}: braid options {name}: {run.stderr.strip()}")
                    return m.group(0)
                tables[name] = run.stdout
            if m.group(3) != tables[name]:
                problems.append(f"{page}: table '{name}' differs from `braid options {name}`"
                                f" (tests/docs/option_tables.py BRAID docs --update rewrites it)")
            return m.group(1) + tables[name] + m.group(4)

        new = BLOCK.sub(replace, text)
        if update and new != text:
            page.write_text(new)
    for name in sorted(offered - seen):
        problems.append(f"docs: no page holds the table '{name}' (<!-- braid options {name} -->)")
    if update:
        return 0
    for p in problems:
        print(p, file=sys.stderr)
    if not problems:
        print(f"option tables: {len(seen)} tables, all as the schemas make them")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
