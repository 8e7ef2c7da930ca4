# Helpers every room of the tree uses, so that a new library, tool, test or
# benchmark is one line in its folder's CMakeLists.txt.

# Tests compile at -O1 in a Release build (BRAID_TEST_OPTIMIZE): the code under test is the
# libraries', built as configured, and a test's own source is checks and fixtures. A test
# source took 15 s at -O3, 10 s at -O1 and 7 s at -O1 with the precompiled header.
set(BRAID_TEST_OPTIMIZE "$<$<CONFIG:Release>:-O1>")

# Precompiled headers (BRAID_PCH, GCC only): the third-party headers that most tools and tests
# parse (CLI11 alone takes ~6 s a source, nlohmann_json ~2 s) compile once a
# build into braid_pch_tools / braid_pch_tests, whose precompiled header every tool, benchmark
# and test reuses (GCC parses the headers again, with a -Winvalid-pch warning, for a target
# whose flags do not fit it). Clang refuses a mismatched one instead, so clang builds (the
# fuzz build) go without.
set(BRAID_PCH_COMMON <nlohmann/json.hpp> <fmt/format.h> <algorithm> <filesystem> <map> <memory> <string> <vector>)
function(braid_pch target kind)
  if(NOT BRAID_PCH OR NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    return()
  endif()
  if(NOT TARGET braid_pch_${kind})
    file(WRITE ${PROJECT_BINARY_DIR}/pch/${kind}.cpp "// the precompiled header of braid's ${kind}\n")
    add_library(braid_pch_${kind} OBJECT ${PROJECT_BINARY_DIR}/pch/${kind}.cpp)
    braid_target_defaults(braid_pch_${kind})
    target_link_libraries(braid_pch_${kind} PRIVATE nlohmann_json::nlohmann_json fmt::fmt)
    if(kind STREQUAL "tests")
      target_link_libraries(braid_pch_${kind} PRIVATE Boost::unit_test_framework)
      target_compile_definitions(braid_pch_${kind} PRIVATE BOOST_TEST_DYN_LINK)
      target_compile_options(braid_pch_${kind} PRIVATE ${BRAID_TEST_OPTIMIZE})
      # Not Boost.Test's unit_test.hpp: a test's main comes from it, where the test defines
      # BOOST_TEST_MODULE before including it.
      target_precompile_headers(braid_pch_${kind} PRIVATE ${BRAID_PCH_COMMON} <cmath> <cstdlib> <fstream>)
    else()
      target_link_libraries(braid_pch_${kind} PRIVATE CLI11::CLI11)
      target_precompile_headers(braid_pch_${kind} PRIVATE <CLI/CLI.hpp> ${BRAID_PCH_COMMON} <iostream>)
    endif()
  endif()
  target_precompile_headers(${target} REUSE_FROM braid_pch_${kind})
endfunction()

# braid_library(NAME SOURCES ... [DEPS ...])  ->  static library braid_NAME, include root = repo.
function(braid_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(braid_${name} STATIC ${ARG_SOURCES})
  target_include_directories(braid_${name} PUBLIC ${PROJECT_SOURCE_DIR}/lib ${PROJECT_SOURCE_DIR})
  target_link_libraries(braid_${name} PUBLIC ${ARG_DEPS})
  braid_target_defaults(braid_${name})
  if(BRAID_UNITY_BUILD)
    set_target_properties(braid_${name} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
  endif()
endfunction()

# braid_executable_in(NAME FOLDER SOURCES ... DEPS ...) -> an executable in the build's FOLDER/.
function(braid_executable_in name folder)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS})
  braid_target_defaults(${name})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/${folder})
endfunction()

# braid_tool(NAME SOURCES ... [DEPS ...])  ->  installed executable NAME.
function(braid_tool name)
  braid_executable_in(${name} bin ${ARGN})
  install(TARGETS ${name} RUNTIME DESTINATION bin)
  braid_pch(${name} tools)
endfunction()

# braid_test_helper(NAME SOURCES ... DEPS ...) -> an executable in the build's tests/ folder
# that tests run (a helper that writes or checks files).
function(braid_test_helper name)
  braid_executable_in(${name} tests ${ARGN})
endfunction()

# The Boost.Test executable test_NAME (in tests/ of the build) that the test functions below
# register with ctest.
function(braid_test_executable name sources deps)
  braid_test_helper(test_${name} SOURCES ${sources} DEPS ${deps} Boost::unit_test_framework)
  target_compile_definitions(test_${name} PRIVATE BOOST_TEST_DYN_LINK)
  target_compile_options(test_${name} PRIVATE ${BRAID_TEST_OPTIMIZE})
  braid_pch(test_${name} tests)
endfunction()

# braid_unit_test(NAME SOURCES ... [DEPS ...] [LABELS ...] [RANKS N ... [MPI_TIMEOUT S]])
#   ->  Boost.Test executable, one ctest entry; with RANKS, one more entry NAME_npN for each
#   N: the same program under mpirun with N ranks (braid_mpi_test), each given S seconds.
# Tests run with the repo's tests/fixtures as BRAID_FIXTURES and a scratch dir as BRAID_SCRATCH.
function(braid_unit_test name)
  cmake_parse_arguments(ARG "" "MPI_TIMEOUT" "SOURCES;DEPS;LABELS;RANKS" ${ARGN})
  braid_test_executable(${name} "${ARG_SOURCES}" "${ARG_DEPS}")
  add_test(NAME ${name} COMMAND test_${name} --log_level=warning)
  braid_test_environment(${name} "${ARG_LABELS}")
  foreach(np ${ARG_RANKS})
    braid_mpi_test(${name}_np${np} test_${name} ${np})
    if(ARG_MPI_TIMEOUT)
      set_tests_properties(${name}_np${np} PROPERTIES TIMEOUT ${ARG_MPI_TIMEOUT})
    endif()
  endforeach()
endfunction()

# braid_backend_test(NAME SOURCES ... [DEPS ...] BACKENDS cpu-f32 cuda-f32 ...)  ->  one Boost.Test
# executable test_NAME, one ctest entry NAME_<backend> per backend (run with --backend=...).
# An absent backend exits 77 (Skipped); the cuda entries carry the label gpu (ctest -L gpu,
# bench/gpu/run.sh).
function(braid_backend_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;BACKENDS" ${ARGN})
  braid_test_executable(${name} "${ARG_SOURCES}" "${ARG_DEPS}")
  foreach(backend ${ARG_BACKENDS})
    string(REPLACE "-" "_" entry "${name}_${backend}")
    add_test(NAME ${entry} COMMAND test_${name} --log_level=warning -- --backend=${backend})
    if(backend MATCHES "^cuda")
      braid_test_environment(${entry} "gpu")
    else()
      braid_test_environment(${entry} "")
    endif()
  endforeach()
endfunction()

# braid_cli_test(NAME SCRIPT [LABELS ...]) -> a bash end-to-end test of the installed-layout tools.
# The script gets BRAID_BIN (the tools' folder), BRAID_FIXTURES and BRAID_SCRATCH.
function(braid_cli_test name script)
  cmake_parse_arguments(ARG "" "" "LABELS" ${ARGN})
  add_test(NAME ${name} COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/${script})
  braid_test_environment(${name} "cli;${ARG_LABELS}")
endfunction()

function(braid_test_environment name labels)
  set(scratch ${PROJECT_BINARY_DIR}/scratch/${name})
  file(MAKE_DIRECTORY ${scratch})
  set_tests_properties(${name} PROPERTIES
    ENVIRONMENT "BRAID_FIXTURES=${PROJECT_SOURCE_DIR}/tests/fixtures;BRAID_SCRATCH=${scratch};BRAID_BIN=${PROJECT_BINARY_DIR}/bin;BRAID_SOURCE=${PROJECT_SOURCE_DIR};OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1"
    LABELS "${labels}"
    # A test that cannot run here (no GPU, no mpirun) exits 77: ctest reports it Skipped.
    SKIP_RETURN_CODE 77)
  # Tests that start mpirun run one at a time: two Open MPI jobs starting together on a
  # loaded machine were seen to fail at start-up, with no output, now and then.
  if("mpi" IN_LIST labels)
    set_tests_properties(${name} PROPERTIES RESOURCE_LOCK mpirun)
  endif()
endfunction()

# braid_mpi_test(ENTRY PROGRAM NP [LABELS ...]) -> ctest entry ENTRY: the Boost.Test program
# PROGRAM (a target) under mpirun with NP ranks, labelled mpi (and LABELS).
function(braid_mpi_test entry program np)
  cmake_parse_arguments(ARG "" "" "LABELS" ${ARGN})
  add_test(NAME ${entry}
    COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:${program}> ${MPIEXEC_POSTFLAGS} --log_level=warning)
  set(labels mpi ${ARG_LABELS})
  braid_test_environment(${entry} "${labels}")
endfunction()

# braid_bench(NAME SOURCES ... [DEPS ...])  ->  benchmark executable bench_NAME in bench/ (not a test).
function(braid_bench name)
  braid_executable_in(bench_${name} bench ${ARGN})
  braid_pch(bench_${name} tools)
endfunction()

# Adds every immediate subfolder of the current source dir that has a CMakeLists.txt,
# in the order given first (dependencies before users), then the rest alphabetically.
function(braid_add_subdirs)
  set(done "")
  foreach(d ${ARGN})
    if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/${d}/CMakeLists.txt)
      add_subdirectory(${d})
      list(APPEND done ${d})
    endif()
  endforeach()
  file(GLOB children RELATIVE ${CMAKE_CURRENT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/*/CMakeLists.txt)
  list(SORT children)
  foreach(c ${children})
    get_filename_component(d ${c} DIRECTORY)
    if(NOT d IN_LIST done)
      add_subdirectory(${d})
    endif()
  endforeach()
endfunction()
