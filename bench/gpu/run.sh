#!/usr/bin/env bash
# One command for a GPU machine that has CUDA, CMake, a C++ compiler and Python but not
# braid's Debian libraries: unpacks the .deb files prepared by scripts/gpu-debs.sh into a
# private prefix (no install, nothing outside it touched), configures braid against that
# prefix alone (CUDA on, sm_90 SASS + PTX), builds what the GPU tests need, runs them, and
# writes every log to OUTDIR (docs/gpu.md says what each one measures): run.log (this
# script's own output: the machine, the libraries CMake found, a summary), configure.log,
# build.log, ctest.log, one log per GPU test at message level and bench_gpu.log (braid's
# timings, then PyTorch's on the same shapes: bench/gpu/torch_gpu.py), eight files in all
# (the most the device tool brings back).
#
#   bench/gpu/run.sh OUTDIR [PART ...]
#
# Parts (default: tests bench, the eight files above): tests (the op and model-parity
# tests), bench (bench_gpu and torch_gpu.py), generate (generation on the GPU: the paged
# attention op and test_generate_device, one log generate_gpu.log), decode (decode
# tokens/s and bandwidth by batch and the long-tailed run, braid's bench_gpu_decode then
# transformers' generate on the same shapes: decode.log), all (every part: more files
# than the device tool brings back; name fewer parts per call). Each part builds its own
# targets and runs on its own: a part that fails does not stop the next one.
#
# Environment (defaults in brackets): BRAID_GPU_DEBS [.gpu-debs], BRAID_GPU_PREFIX
# [/tmp/braid-gpu-deps], BRAID_GPU_BUILD [/tmp/braid-gpu-build], JOBS [16],
# BRAID_GPU_TARGETS [the GPU test executables; "all" builds everything that links].
# Exit status: 0 when every test passed or was skipped, 1 otherwise, 2 on bad usage.
set -uo pipefail
[[ $# -ge 1 ]] || { echo "usage: bench/gpu/run.sh OUTDIR [tests|bench|generate|decode|all ...]" >&2; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$1" || exit 2
out=$(cd "$1" && pwd)
shift
parts=("$@")
[[ ${#parts[@]} -gt 0 ]] || parts=(tests bench)
[[ " ${parts[*]} " == *" all "* ]] && parts=(tests bench generate decode)
for p in "${parts[@]}"; do
  case $p in tests|bench|generate|decode) ;; *) echo "run.sh: unknown part '$p' (tests, bench, generate, decode, all)" >&2; exit 2 ;; esac
done
want() { [[ " ${parts[*]} " == *" $1 "* ]]; }
declare -A part_targets=([tests]="test_backend_ops test_backend_registry test_model_parity" [bench]="bench_gpu"
                         [generate]="test_paged_ops test_generate_device" [decode]="bench_gpu_decode")
declare -A built=()
debs=${BRAID_GPU_DEBS:-$root/.gpu-debs}
prefix=${BRAID_GPU_PREFIX:-/tmp/braid-gpu-deps}
build=${BRAID_GPU_BUILD:-/tmp/braid-gpu-build}
jobs=${JOBS:-16}
targets=${BRAID_GPU_TARGETS:-}
exec > >(tee "$out/run.log") 2>&1
step() { echo; echo "== $(date -u +%H:%M:%S) $*"; }

step "machine"
{
  nvidia-smi || echo "nvidia-smi: not available"
  command -v nvcc > /dev/null && nvcc --version || /usr/local/cuda/bin/nvcc --version || echo "nvcc: not found"
  cmake --version | head -1
  c++ --version | head -1
  ldd --version | head -1
  nproc
} 2>&1

step "unpacking $(ls "$debs"/*.deb 2> /dev/null | wc -l) packages from $debs into $prefix"
ls "$debs"/*.deb > /dev/null 2>&1 || { echo "no .deb files in $debs: run scripts/gpu-debs.sh first (on Debian 12)"; exit 2; }
rm -rf "$prefix" && mkdir -p "$prefix"
for f in "$debs"/*.deb; do dpkg-deb -x "$f" "$prefix" || { echo "cannot unpack $f"; exit 1; }; done
P=$prefix/usr
L=$P/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH="$L:$L/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# pkg-config (pkgconf from the prefix) sees the prefix's .pc files only, their paths moved under it.
export PKG_CONFIG_LIBDIR="$L/pkgconfig:$P/share/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$prefix"
command -v nvcc > /dev/null || export PATH="/usr/local/cuda/bin:$PATH"
gen=()
command -v ninja > /dev/null && gen=(-G Ninja)  # the device image has ninja; make may be absent
launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache
                                          -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)

step "configure ($build)"
# The prefix alone: system prefixes are ignored by find_package/find_library, so a build
# that works here does not lean on a library of the machine. MPI and HDF5 are named by hand
# (no compiler wrappers in the prefix); libraries whose runtime dependencies are not in the
# prefix (MPI, HDF5) still link: their missing symbols are left to run time, and the GPU
# tests do not load them.
link="-Wl,--unresolved-symbols=ignore-in-shared-libs -Wl,-rpath-link,$L:$L/openblas-pthread:$L/openmpi/lib:$L/hdf5/serial"
rm -rf "$build"
cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DBRAID_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="90-real;90-virtual" "${launcher[@]}" \
  -DCMAKE_IGNORE_PREFIX_PATH="/usr;/usr/local" \
  -DCMAKE_PREFIX_PATH="$P" -DCMAKE_LIBRARY_PATH="$L/openblas-pthread" \
  -DCMAKE_CXX_FLAGS="-isystem $P/include/x86_64-linux-gnu/openblas-pthread" \
  -DCMAKE_EXE_LINKER_FLAGS="$link" -DCMAKE_SHARED_LINKER_FLAGS="$link" \
  -DPKG_CONFIG_EXECUTABLE="$P/bin/pkgconf" \
  -DHDF5_ROOT="$L/hdf5/serial" -DHDF5_C_INCLUDE_DIR="$P/include/hdf5/serial" \
  -DMPI_C_LIB_NAMES=mpi -DMPI_CXX_LIB_NAMES=mpi -DMPI_mpi_LIBRARY="$L/openmpi/lib/libmpi.so" \
  -DMPI_C_ADDITIONAL_INCLUDE_DIRS="$L/openmpi/include" -DMPI_CXX_ADDITIONAL_INCLUDE_DIRS="$L/openmpi/include" \
  -DMPI_SKIP_COMPILER_WRAPPER=ON -DMPI_CXX_SKIP_MPICXX=ON \
  -DICU_ROOT="$P" -DBoost_NO_SYSTEM_PATHS=ON > "$out/configure.log" 2>&1
rc=$?
tail -5 "$out/configure.log"
[[ $rc -eq 0 ]] || { echo "configure failed (exit $rc): $out/configure.log"; exit 1; }
grep -E '^(BLAS_openblas_LIBRARY|HDF5_hdf5_LIBRARY_RELEASE|MPI_mpi_LIBRARY|Boost_DIR|fmt_DIR|CLI11_DIR|ICU_UC_LIBRARY_RELEASE|CMAKE_CUDA_COMPILER):' \
  "$build/CMakeCache.txt"

if [[ $targets == all ]]; then
  step "build (all, -j$jobs)"
  cmake --build "$build" -j "$jobs" > "$out/build.log" 2>&1
  rc=$?
  grep -E "error|warning:" "$out/build.log" | head -40
  [[ $rc -eq 0 ]] || { echo "build failed (exit $rc): $out/build.log"; tail -30 "$out/build.log"; exit 1; }
  for p in "${parts[@]}"; do built[$p]=1; done
else
  : > "$out/build.log"
  for p in "${parts[@]}"; do
    t=${targets:-${part_targets[$p]}}
    step "build $p ($t, -j$jobs)"
    # shellcheck disable=SC2086
    cmake --build "$build" -j "$jobs" --target $t >> "$out/build.log" 2>&1
    rc=$?
    grep -E "error|warning:" "$out/build.log" | head -40
    if [[ $rc -eq 0 ]]; then built[$p]=1; else echo "build of $p failed (exit $rc): $out/build.log"; tail -30 "$out/build.log"; fi
  done
fi
status=0
part_failed() { echo "PART $1: FAILED"; status=1; }

if want tests; then
  step "tests"
  [[ -n ${built[tests]:-} ]] || part_failed tests
  # The per-op and per-tensor figures (NMSE, relative errors) at message level, one log each.
  "$build/tests/test_backend_ops" --log_level=message -- --backend=cuda-f32 > "$out/backend_ops_cuda_f32.log" 2>&1
  echo "test_backend_ops cuda-f32: exit $?"
  for t in cuda-f32 cuda-bf16; do
    "$build/tests/test_model_parity" --log_level=message -- --backend=$t > "$out/model_parity_${t//-/_}.log" 2>&1
    echo "test_model_parity $t: exit $?"
  done
  ctest --test-dir "$build" -R '^(backend_ops_|backend_registry|model_parity_)' --output-on-failure \
    > "$out/ctest.log" 2>&1
  rc=$?
  tail -15 "$out/ctest.log"
  # The tests skip (exit 77) whenever make_backend throws: on a GPU machine a skip is a failure.
  if nvidia-smi -L > /dev/null 2>&1 && grep -qE '(backend_ops_cuda|model_parity_cuda).*Skipped' "$out/ctest.log"; then
    echo "FAIL: a GPU is present but CUDA tests were skipped (see the 'skipped:' reason in the test logs)"
    grep -h '^skipped:' "$out"/*_cuda_*.log
    rc=1
  fi
  [[ $rc -eq 0 ]] || part_failed tests
fi

if want bench && [[ -n ${built[bench]:-} ]]; then
  step "bench_gpu (timings; docs/gpu.md)"
  "$build/bench/bench_gpu" --device cuda > "$out/bench_gpu.log" 2>&1
  echo "bench_gpu: exit $?"
  # The same shapes in plain PyTorch on the same GPU, appended to the same log.
  python3 "$root/bench/gpu/torch_gpu.py" >> "$out/bench_gpu.log" 2>&1
  echo "torch_gpu.py: exit $?"
  cat "$out/bench_gpu.log"
elif want bench; then
  part_failed bench
fi

if want generate; then
  step "generate (paged attention op, generation on CUDA: docs/gpu.md)"
  if [[ -n ${built[generate]:-} ]]; then
    {
      "$build/tests/test_paged_ops" --log_level=message -- --backend=cuda-f32; echo "test_paged_ops cuda-f32: exit $?"
      "$build/tests/test_generate_device" --log_level=message -- --backend=cuda-f32
      echo "test_generate_device cuda-f32: exit $?"
      BRAID_CUDA_GRAPHS=0 "$build/tests/test_generate_device" --log_level=message -- --backend=cuda-f32
      echo "test_generate_device cuda-f32, BRAID_CUDA_GRAPHS=0: exit $?"
      ctest --test-dir "$build" -R '^(paged_ops_|generate_device_)' --output-on-failure
    } > "$out/generate_gpu.log" 2>&1
    grc=$?
    grep -E "exit [0-9]|tests passed|Skipped|Failed|skipped:" "$out/generate_gpu.log"
    if nvidia-smi -L > /dev/null 2>&1 && grep -qE '(paged_ops|generate_device)_cuda.*Skipped' "$out/generate_gpu.log"; then
      echo "FAIL: a GPU is present but the generation tests were skipped"
      grc=1
    fi
    [[ $grc -eq 0 ]] || part_failed generate
  else
    part_failed generate
  fi
fi

if want decode; then
  step "decode (bench_gpu_decode, then transformers' generate: docs/gpu.md)"
  if [[ -n ${built[decode]:-} ]]; then
    # braid first, then the reference on the same GPU in the same call, one log.
    timeout "${BRAID_DECODE_TIMEOUT:-360}" "$build/bench/bench_gpu_decode" --device cuda --dtype bf16 > "$out/decode.log" 2>&1
    drc=$?
    echo "bench_gpu_decode: exit $drc" >> "$out/decode.log"
    PYTHONUNBUFFERED=1 timeout "${BRAID_HF_TIMEOUT:-180}" python3 "$root/bench/gpu/hf_decode.py" >> "$out/decode.log" 2>&1
    echo "hf_decode.py: exit $?" >> "$out/decode.log"
    cat "$out/decode.log"
    [[ $drc -eq 0 ]] || part_failed decode
  else
    part_failed decode
  fi
fi

step "done (${parts[*]}): logs in $out"
exit $status
