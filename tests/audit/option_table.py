#!/usr/bin/env python3
"""The option audit's table (tests/audit/option_effects.tsv) covers every option.

For every table of options `braid options` prints (braid-train's, braid-generate's,
braid-score's, braid-schedgen's, braid-profile's over its verbs and braid-meshplan's
options, the keys of braid-schedgen's "anneal" block as anneal.KEY, the run file's stage
keys; not the presets), every option must have a row naming the test that shows it acts (or
is refused where nothing reads it); a row must name an option that exists; the test file
must exist and name the option (its flag, its field's name with underscores, or its
run-file key), unless the row's evidence is "schema" (a test that walks the option schemas,
as tests/audit/test_run_file_keys.cpp). A table of options with no rows fails too (a tool
whose schema lost its options, or a table the audit would pass by printing nothing).

    option_table.py BRAID SOURCE_DIR
"""
import pathlib
import re
import subprocess
import sys


def options_of(braid: str, table: str) -> list[str] | None:
    """The options of a table, by their first column; None for a table of something else (presets)."""
    out = subprocess.run([braid, "options", table], check=True, capture_output=True, text=True).stdout
    if out.split("|")[1].strip() not in ("option", "key"):
        return None
    return [re.findall(r"`([^`]+)`", line.split("|")[1])[0] for line in out.splitlines()[2:]]


def names_of(option: str) -> list[str]:
    if "." in option:                        # a run-file key (generate.max_new_tokens), an anneal key
        return [option.split(".", 1)[1]]
    flags = option.split(",")
    return flags + [f.lstrip("-").replace("-", "_") for f in flags if f.startswith("--")]


def main() -> int:
    braid, source = sys.argv[1], pathlib.Path(sys.argv[2])
    help_text = subprocess.run([braid, "options", "--help"], check=True, capture_output=True, text=True).stdout
    tables = re.search(r"table TEXT:\{([^}]*)\}", help_text).group(1).split(",")
    rows = {}
    problems = []
    for n, line in enumerate((source / "tests/audit/option_effects.tsv").read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        table, option, evidence, test = line.split("\t")
        rows[(table, option)] = (evidence, test, n)
    wanted = set()
    for t in tables:
        options = options_of(braid, t)
        if options == []:
            problems.append(f"braid options {t}: a table of options with no rows")
        wanted |= {(t, o) for o in options or []}
    for key in sorted(wanted - rows.keys()):
        problems.append(f"option_effects.tsv: no row for {key[0]} {key[1]} (which test shows it acts?)")
    for key in sorted(rows.keys() - wanted):
        problems.append(f"option_effects.tsv:{rows[key][2]}: {key[0]} has no option {key[1]}")
    for (table, option), (evidence, test, n) in sorted(rows.items()):
        path = source / test
        if not path.is_file():
            problems.append(f"option_effects.tsv:{n}: {option}: no test file {test}")
            continue
        if evidence == "schema":
            continue
        text = path.read_text(errors="ignore")
        if not any(re.search(re.escape(name) + r"(?![-a-z_])", text) for name in names_of(option)):
            problems.append(f"option_effects.tsv:{n}: {test} does not name {option}")
    for p in problems:
        print(p, file=sys.stderr)
    if not problems:
        print(f"option audit table: {len(rows)} options and keys, each with its test")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
