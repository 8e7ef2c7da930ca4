#!/usr/bin/env python3
"""Fails when MPI is used outside lib/comm, the communication room.

Every message between processes goes through lib/comm's Communicator (and MPI's
start-up through comm::MpiRuntime), so that a second implementation (NCCL) can sit
behind it and no room grows its own MPI session again. This scans the C++ and CUDA
sources of lib/, tools/, bench/, tests/ and kernels/ for an MPI identifier (MPI_...)
or an include of an MPI header, and their CMakeLists.txt for a link to MPI::,
everywhere except lib/comm/. Every offending line is listed, with its file and line.

    check_mpi_confined.py [ROOT]      # ROOT: the repository (default: ../.. of this file)
    check_mpi_confined.py --self-test # plants offences in a scratch tree, checks each is found
"""
import pathlib
import re
import sys
import tempfile

SCANNED = ("lib", "tools", "bench", "tests", "kernels")
ALLOWED = ("lib/comm",)
SOURCE_SUFFIXES = {".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".cu", ".cuh", ".inl"}
# MPI_ anywhere (calls, types, constants, and names that embed them such as the
# launcher's OMPI_COMM_WORLD_SIZE), and #include <mpi.h> / "mpi.h" / <mpi-ext.h>.
SOURCE_PATTERNS = [re.compile(r"MPI_"), re.compile(r'#\s*include\s*[<"]mpi[^/]*\.h[>"]')]
CMAKE_PATTERNS = [re.compile(r"\bMPI::")]


def offences(root: pathlib.Path):
    for top in SCANNED:
        base = root / top
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*")):
            if not path.is_file():
                continue
            rel = path.relative_to(root).as_posix()
            if any(rel == a or rel.startswith(a + "/") for a in ALLOWED):
                continue
            if path.suffix in SOURCE_SUFFIXES:
                patterns = SOURCE_PATTERNS
            elif path.name == "CMakeLists.txt" or path.suffix == ".cmake":
                patterns = CMAKE_PATTERNS
            else:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            for number, line in enumerate(text.splitlines(), 1):
                if any(p.search(line) for p in patterns):
                    yield f"{rel}:{number}: {line.strip()}"


def check(root: pathlib.Path) -> int:
    if not (root / "lib" / "comm").is_dir():
        print(f"check_mpi_confined: {root} has no lib/comm; give the repository root", file=sys.stderr)
        return 2
    found = list(offences(root))
    for f in found:
        print(f, file=sys.stderr)
    if found:
        print(f"check_mpi_confined: {len(found)} line(s) use MPI outside lib/comm; "
              "go through comm::Communicator / comm/mpi.hpp instead", file=sys.stderr)
        return 1
    print("check_mpi_confined: MPI is used in lib/comm only")
    return 0


def self_test() -> int:
    planted = {
        "lib/sched/a.cpp": "int r; MPI_Comm_rank(MPI_COMM_WORLD, &r);\n",
        "tools/x/main.cpp": "#include <mpi.h>\n",
        "bench/y/b.hpp": '#include "mpi.h"\n',
        "lib/plan/CMakeLists.txt": "braid_library(plan DEPS braid_core MPI::MPI_CXX)\n",
    }
    clean = {
        "lib/comm/mpi.cpp": "#include <mpi.h>\nMPI_Init(nullptr, nullptr);\n",
        "lib/comm/CMakeLists.txt": "target_link_libraries(braid_comm PRIVATE MPI::MPI_CXX)\n",
        "lib/sched/b.cpp": "// mpirun -np 2; comm::mpi_world(); \"MPIEXEC\"\n",
        "tests/z/CMakeLists.txt": "add_test(NAME z COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 z)\n",
        "docs/notes.md": "MPI_Allreduce is described here\n",
    }
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        for rel, text in {**planted, **clean}.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        found = list(offences(root))
        files = {f.split(":", 1)[0] for f in found}
        missed = set(planted) - files
        wrong = files - set(planted)
        if missed or wrong or check(root) != 1:
            print(f"self-test failed: missed {sorted(missed)}, flagged wrongly {sorted(wrong)}", file=sys.stderr)
            return 1
        for rel in planted:
            (root / rel).unlink()
        if check(root) != 0:
            print("self-test failed: a clean tree is refused", file=sys.stderr)
            return 1
    print("check_mpi_confined: self-test passed")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) > 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = pathlib.Path(argv[1]) if len(argv) == 2 else pathlib.Path(__file__).resolve().parents[2]
    return check(root)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
