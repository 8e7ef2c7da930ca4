#!/usr/bin/env bash
# One command for a GPU machine that has CUDA, CMake, a C++ compiler and Python but not
# braid's Debian libraries: unpacks the .deb files' contents prepared by scripts/gpu-debs.sh into a
# private prefix (no install, nothing outside it touched), configures braid against that
# prefix alone (CUDA on, sm_90 SASS + PTX), builds what the chosen parts need, runs them and
# writes every log to OUTDIR (docs/gpu.md says what each one measures).
#
#   bench/gpu/run.sh OUTDIR [PART...]   PART: tests, ops, train, generate, decode, nccl, tools,
#                                       families, grpo (default: tests ops train)
#
#   tests  the GPU tests (backend ops f32 and bf16, registry, model parity f32 and bf16, the
#          families' parity suite against its PyTorch reference): tests.log (ctest's summary,
#          then each test's figures at message level)
#   ops    bench_gpu's products and attention, then PyTorch's on the same shapes: ops.log
#   train  the 1B model (bench_config "1b") at 4 x 2048 tokens in bf16: braid's training step
#          and scoring passes beside PyTorch's (bf16 autocast, fused AdamW, SDPA) and the GPU's
#          measured bf16 matmul rate: train.log, and summary.md (tokens/s, MFU, peak memory)
#   generate  generation on the GPU: the paged attention op's test and test_generate_device
#          (greedy tokens = CPU's, batching = one at a time, graphs on = off): generate.log
#   decode bench_gpu_decode (copy bandwidth; decode tokens/s and effective bandwidth at batch
#          1, 64, 256; the long-tailed run) then transformers' generate on the same shapes: decode.log
#   nccl   device buffers between ranks: test_nccl and test_gpu_group alone and under the
#          prefix's mpirun with 2 ranks (one GPU: the MPI fallback), then the ctest entry
#          gpu_parallel_cli (braid-train and braid-score, dp and tp on --device cuda over 2
#          ranks against one process): nccl.log. Needs DIR/nccl.tar.xz (the [nccl] debs).
#   tools  braid-train (sft, rm, dpo, ppo, grpo), braid-score, braid-generate and braid-profile
#          measure with --device cuda against --device cpu on a tiny random model (loss curves,
#          outputs, the memory prediction and refusal): tools.log
#   families  every model family (docs/models.md) on the GPU: the parity suite against its
#          PyTorch reference and the device-against-CPU model parity (f32, bf16), then against
#          transformers itself (bench/gpu/hf_families.py: from_config, save_pretrained, braid
#          import, logits and scores compared; braid export loaded back by from_pretrained),
#          braid on cuda and on the CPU: families.log
#   grpo   braid run of examples/gpu-grpo on cuda: GRPO of a random-init Qwen2.5-0.5B-shaped actor,
#          10 iterations of 256 samples of up to 512 tokens, the rollout fused on 2 ranks sharing the
#          GPU and each iteration run again serial (the ablation): grpo.log (the run's log, then
#          examples/gpu-grpo/summary.py: iteration time fused and serial, each stage's share,
#          tokens/s). Needs DIR/nccl.tar.xz (mpirun). The run folder is BRAID_GRPO_RUN
#          [/tmp/braid-gpu-grpo]: a later call on the same machine resumes it (BRAID_GPU_FRESH=1:
#          afresh); braid run is stopped BRAID_GPU_BUDGET [560] s after this script started, or
#          after BRAID_GRPO_TIMEOUT s when given (the figures of the iterations done are still
#          written); BRAID_GRPO_ITERATIONS runs fewer.
#
# Always: run.log (this script's output: the machine, the libraries CMake found, each part's
# exit) and build.log (configure and build). A part that fails is reported and the next one
# runs. At most 8 files come back from the device tool: this script writes run.log, build.log
# and one file a part (train: two), so one call names at most five parts.
#
# Environment (defaults in brackets): BRAID_GPU_DEBS [.gpu-debs], BRAID_GPU_PREFIX
# [/tmp/braid-gpu-deps], BRAID_GPU_BUILD [/tmp/braid-gpu-build; reused when there, unless BRAID_GPU_FRESH=1], JOBS [16],
# BRAID_GPU_TARGETS [what the parts need; "all" builds everything that links],
# BRAID_CUDA_GEMM / BRAID_CUDA_ATTENTION (passed on: docs/gpu.md).
# Exit status: 0 when every chosen part passed, 1 otherwise, 2 on bad usage.
set -uo pipefail
[[ $# -ge 1 ]] || { echo "usage: bench/gpu/run.sh OUTDIR [tests] [ops] [train] [generate] [decode] [nccl] [tools] [families] [grpo]" >&2; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$1" || exit 2
out=$(cd "$1" && pwd)
shift
parts=("$@")
[[ ${#parts[@]} -gt 0 ]] || parts=(tests ops train)
# What each part builds (and needs built to run: its executables land in tests/, bench/ or bin/).
declare -A part_targets=([tests]="test_backend_ops test_backend_registry test_model_parity test_family_parity" [ops]="bench_gpu"
                         [train]="bench_gpu" [generate]="test_paged_ops test_generate_device"
                         [decode]="bench_gpu_decode"
                         [nccl]="test_nccl test_gpu_group compare_outputs braid braid-train braid-score braid-generate"
                         [tools]="braid braid-train braid-score braid-generate braid-profile compare_outputs"
                         [families]="braid model_outputs test_family_parity test_model_parity"
                         [grpo]="braid braid-generate braid-score braid-train")
want_targets=()
for p in "${parts[@]}"; do
  [[ -n ${part_targets[$p]:-} ]] || { echo "run.sh: unknown part '$p' (tests, ops, train, generate, decode, nccl, tools, families, grpo)" >&2; exit 2; }
  # shellcheck disable=SC2206
  want_targets+=(${part_targets[$p]})
done
debs=${BRAID_GPU_DEBS:-$root/.gpu-debs}
prefix=${BRAID_GPU_PREFIX:-/tmp/braid-gpu-deps}
build=${BRAID_GPU_BUILD:-/tmp/braid-gpu-build}
jobs=${JOBS:-16}
targets=${BRAID_GPU_TARGETS:-$(printf '%s\n' "${want_targets[@]}" | sort -u | tr '\n' ' ')}
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

step "unpacking $debs/base.tar.xz into $prefix"
[[ -f $debs/base.tar.xz ]] || { echo "no $debs/base.tar.xz: run scripts/gpu-debs.sh first (on Debian 12)"; exit 2; }
rm -rf "$prefix" && mkdir -p "$prefix"
tar -xJf "$debs/base.tar.xz" -C "$prefix" || { echo "cannot unpack $debs/base.tar.xz"; exit 1; }
P=$prefix/usr
L=$P/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH="$L:$L/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# pkg-config (pkgconf from the prefix) sees the prefix's .pc files only, their paths moved under it.
export PKG_CONFIG_LIBDIR="$L/pkgconfig:$P/share/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$prefix"
command -v nvcc > /dev/null || export PATH="/usr/local/cuda/bin:$PATH"
gen=()
keep=(-- -k)                                    # the build keeps going past a failed target
command -v ninja > /dev/null && { gen=(-G Ninja); keep=(-- -k 0); }  # the device image has ninja; make may be absent
launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache
                                          -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)

# NCCL: the CUDA toolkit's when it has nccl.h, else the machine's (/usr/include), else the one PyTorch's wheels bring
# (nvidia/nccl under Python's prefix: nccl.h and libnccl.so.2, linked by full path).
nccl=()
cuda_include=$(dirname "$(command -v nvcc)")/../include
nccl_so=
for f in /usr/lib/x86_64-linux-gnu/libnccl.so /lib/x86_64-linux-gnu/libnccl.so; do
  [[ -e $f ]] && { nccl_so=$f; break; }
done
if [[ -f $cuda_include/nccl.h ]]; then
  :
elif [[ -f /usr/include/nccl.h && -n $nccl_so ]]; then
  # The machine's (libnccl-dev): configure ignores /usr, so nccl.h alone is shown to it.
  mkdir -p "$prefix/nccl/include" && ln -sf /usr/include/nccl.h "$prefix/nccl/include/nccl.h"
  nccl=(-DBRAID_NCCL_INCLUDE="$prefix/nccl/include" -DBRAID_NCCL_LIBRARY="$nccl_so")
  echo "NCCL from the machine: /usr/include/nccl.h, $nccl_so"
else
  py_prefix=$(python3 -c 'import sys; print(sys.prefix)' 2> /dev/null)
  nccl_h=$(find "${py_prefix:-/nonexistent}" -path '*nvidia*' -name nccl.h 2> /dev/null | head -1)
  nccl_so=$(find "${py_prefix:-/nonexistent}" -path '*nvidia*' -name 'libnccl.so*' 2> /dev/null | head -1)
  if [[ -n $nccl_h && -n $nccl_so ]]; then
    nccl=(-DBRAID_NCCL_INCLUDE="$(dirname "$nccl_h")" -DBRAID_NCCL_LIBRARY="$nccl_so")
    echo "NCCL from Python's packages: $nccl_h, $nccl_so"
  else
    echo "NCCL: no nccl.h in the CUDA toolkit or Python's packages (test_nccl is not built)"
  fi
fi

step "configure ($build)"
# The prefix alone: system prefixes are ignored by find_package/find_library, so a build
# that works here does not lean on a library of the machine. MPI and HDF5 are named by hand
# (no compiler wrappers in the prefix); libraries whose runtime dependencies are not in the
# prefix (MPI, HDF5) still link: their missing symbols are left to run time, and the GPU
# tests do not load them.
link="-Wl,--unresolved-symbols=ignore-in-shared-libs -Wl,-rpath-link,$L:$L/openblas-pthread:$L/openmpi/lib:$L/hdf5/serial"
# A build folder left by an earlier call on a machine still warm is reused (the parts'
# targets rebuild incrementally) unless BRAID_GPU_FRESH=1 or it belongs to another tree.
if [[ ${BRAID_GPU_FRESH:-0} == 1 ]] || ! grep -qx "CMAKE_HOME_DIRECTORY:INTERNAL=$root" "$build/CMakeCache.txt" 2> /dev/null; then
  rm -rf "$build"
else
  echo "reusing $build"
fi
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
  -DICU_ROOT="$P" -DBoost_NO_SYSTEM_PATHS=ON "${nccl[@]}" > "$out/build.log" 2>&1
rc=$?
tail -5 "$out/build.log"
[[ $rc -eq 0 ]] || { echo "configure failed (exit $rc): $out/build.log"; exit 1; }
grep -E '^(BLAS_openblas_LIBRARY|HDF5_hdf5_LIBRARY_RELEASE|MPI_mpi_LIBRARY|Boost_DIR|fmt_DIR|CLI11_DIR|ICU_UC_LIBRARY_RELEASE|CMAKE_CUDA_COMPILER):' \
  "$build/CMakeCache.txt"

# Without NCCL there is no test_nccl target: the nccl part runs the rest.
if ! grep -qx 'BRAID_NCCL_ENABLED:INTERNAL=ON' "$build/CMakeCache.txt"; then
  echo "NCCL not found: test_nccl is not built"
  part_targets[nccl]=${part_targets[nccl]/test_nccl /}
  targets=${targets/test_nccl /}
fi
grep -E '^BRAID_NCCL_(INCLUDE|LIBRARY):' "$build/CMakeCache.txt"

step "build ($targets, -j$jobs)"
echo "== build" >> "$out/build.log"
if [[ $targets == all ]]; then
  cmake --build "$build" -j "$jobs" "${keep[@]}" >> "$out/build.log" 2>&1
else
  # shellcheck disable=SC2086
  cmake --build "$build" -j "$jobs" --target $targets "${keep[@]}" >> "$out/build.log" 2>&1
fi
rc=$?
grep -E "error|warning:" "$out/build.log" | head -40
# A target that failed to build fails its parts only (the build keeps going past it).
[[ $rc -eq 0 ]] || { echo "build failed (exit $rc): $out/build.log"; tail -30 "$out/build.log"; }
built() { local t; for t in ${part_targets[$1]}; do [[ -x $build/tests/$t || -x $build/bench/$t || -x $build/bin/$t ]] || return 1; done; }

part_tests() {
  local log=$out/tests.log rc
  ctest --test-dir "$build" -R '^(backend_ops_|backend_registry|model_parity_|family_parity_)' --output-on-failure > "$log" 2>&1
  rc=$?
  tail -15 "$log"
  # The tests skip (exit 77) whenever make_backend throws: on a GPU machine a skip is a failure.
  if nvidia-smi -L > /dev/null 2>&1 && grep -qE '(backend_ops_cuda|model_parity_cuda|family_parity_cuda).*Skipped' "$log"; then
    echo "FAIL: a GPU is present but CUDA tests were skipped (see the 'skipped:' reason below)"
    rc=1
  fi
  # Each op's and tensor's figures (NMSE, relative errors), at message level.
  for t in cuda-f32 cuda-bf16; do
    echo "== test_backend_ops $t" >> "$log"
    "$build/tests/test_backend_ops" --log_level=message -- --backend=$t >> "$log" 2>&1
    echo "test_backend_ops $t: exit $?"
    echo "== test_model_parity $t" >> "$log"
    "$build/tests/test_model_parity" --log_level=message -- --backend=$t >> "$log" 2>&1
    echo "test_model_parity $t: exit $?"
  done
  grep -h '^skipped:' "$log" | head -3
  return $rc
}

part_ops() {
  local log=$out/ops.log rc
  "$build/bench/bench_gpu" --device cuda --part ops > "$log" 2>&1
  rc=$?
  echo "bench_gpu --part ops: exit $rc"
  python3 "$root/bench/gpu/torch_gpu.py" --part ops >> "$log" 2>&1
  echo "torch_gpu.py --part ops: exit $?"
  cat "$log"
  return $rc
}

# The MFU denominator (the GPU's measured bf16 matmul rate) and PyTorch first, then braid:
# a failing braid still leaves the anchor in the log, and each side has the GPU to itself.
part_train() {
  local log=$out/train.log rc=0 r
  python3 "$root/bench/gpu/torch_gpu.py" --part peak,train,score --config 1b --batch 4 --seq 2048 --json > "$log" 2>&1
  r=$?
  echo "torch_gpu.py --part peak,train,score: exit $r"
  "$build/bench/bench_gpu" --device cuda --part train,score --config 1b --dtype bf16 --batch 4 --seq 2048 --json >> "$log" 2>&1
  r=$?
  echo "bench_gpu --part train,score: exit $r"
  (( r == 0 )) || rc=1
  python3 "$root/bench/gpu/summary.py" "$log" > "$out/summary.md"
  r=$?
  cat "$out/summary.md"
  (( r == 0 )) || rc=1
  return $rc
}

part_generate() {
  local log=$out/generate.log rc=0
  {
    "$build/tests/test_paged_ops" --log_level=message -- --backend=cuda-f32; echo "test_paged_ops cuda-f32: exit $?"
    "$build/tests/test_generate_device" --log_level=message -- --backend=cuda-f32
    echo "test_generate_device cuda-f32: exit $?"
    BRAID_CUDA_GRAPHS=0 "$build/tests/test_generate_device" --log_level=message -- --backend=cuda-f32
    echo "test_generate_device cuda-f32, BRAID_CUDA_GRAPHS=0: exit $?"
    ctest --test-dir "$build" -R '^(paged_ops_|generate_device_)' --output-on-failure
  } > "$log" 2>&1 || rc=1
  grep -E "exit [0-9]|tests passed|Skipped|Failed|skipped:" "$log"
  grep -qE 'exit [1-9]' "$log" && rc=1
  if nvidia-smi -L > /dev/null 2>&1 && grep -qE '(paged_ops|generate_device)_cuda.*Skipped' "$log"; then
    echo "FAIL: a GPU is present but the generation tests were skipped"
    rc=1
  fi
  return $rc
}

# braid first, then the reference on the same GPU in the same call, one log.
part_decode() {
  local log=$out/decode.log rc
  timeout "${BRAID_DECODE_TIMEOUT:-360}" "$build/bench/bench_gpu_decode" --device cuda --dtype bf16 > "$log" 2>&1
  rc=$?
  echo "bench_gpu_decode: exit $rc" >> "$log"
  PYTHONUNBUFFERED=1 timeout "${BRAID_HF_TIMEOUT:-180}" python3 "$root/bench/gpu/hf_decode.py" >> "$log" 2>&1
  echo "hf_decode.py: exit $?" >> "$log"
  cat "$log"
  return $rc
}

# Open MPI from the [nccl] debs, unpacked into a prefix of their own (DIR/nccl.tar.xz ->
# $prefix-run): orterun, relocated by OPAL_* to where the files are (Debian built it for
# /usr), allowed to run as root, on shared memory only (the network plugins' libraries
# are not carried; they are not tried). The tools' other runtime libraries (HDF5's curl,
# ssl, ...) come from the same prefix, on the library path of this part only.
mpi_environment() {
  local run=$prefix-run
  [[ -f $debs/nccl.tar.xz ]] || { echo "no $debs/nccl.tar.xz: run scripts/gpu-debs.sh again"; return 1; }
  rm -rf "$run" && mkdir -p "$run/bin"
  tar -xJf "$debs/nccl.tar.xz" -C "$run" || { echo "cannot unpack $debs/nccl.tar.xz"; return 1; }
  [[ -x $run/usr/bin/orterun ]] || { echo "no orterun in $run (openmpi-bin)"; return 1; }
  ln -s "$run/usr/bin/orterun" "$run/bin/mpirun"
  ln -s "$run/usr/bin/orterun" "$run/bin/mpiexec"
  export PATH="$run/bin:$run/usr/bin:$PATH"
  export LD_LIBRARY_PATH="$run/usr/lib/x86_64-linux-gnu:$run/lib/x86_64-linux-gnu:$L/openmpi/lib:$LD_LIBRARY_PATH"
  export OPAL_PREFIX=$P OPAL_EXEC_PREFIX=$P OPAL_BINDIR=$run/usr/bin OPAL_LIBDIR=$L/openmpi/lib \
    OPAL_DATAROOTDIR=$P/share OPAL_DATADIR=$P/share OPAL_PKGDATADIR=$P/share/openmpi \
    OPAL_SYSCONFDIR=$run/etc/openmpi
  # PMIx and hwloc look for their plugins where Debian put them: PMIx in the prefix, hwloc
  # in a folder that is not there (its plugins are not carried: none is loaded).
  export PMIX_PREFIX=$run/usr/lib/x86_64-linux-gnu/pmix2 PMIX_PKGLIBDIR=$run/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix \
    HWLOC_PLUGINS_PATH=$run/usr/lib/x86_64-linux-gnu/hwloc
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
    OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_mtl=^ofi,psm,psm2 OMPI_MCA_osc=^ucx \
    OMPI_MCA_reachable=weighted OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_mca_base_component_show_load_errors=0
}

part_nccl() {
  local log=$out/nccl.log rc=0 gpus
  gpus=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU')
  (
    mpi_environment || exit 1
    echo "mpirun: $(command -v mpirun) ($(mpirun --version 2>&1 | head -1))"
    mpirun -np 2 hostname || { echo "mpirun -np 2 hostname: failed"; exit 1; }
    cd "$build" || exit 1
    if [[ ! -x tests/test_nccl ]]; then
      echo "test_nccl: not built (no NCCL found at configure: build.log)"
    else
      tests/test_nccl --log_level=message; echo "test_nccl: exit $?"
      if (( gpus >= 2 )); then
        mpirun -np 2 tests/test_nccl --log_level=message; echo "test_nccl, mpirun -np 2: exit $?"
      else
        echo "test_nccl, mpirun -np 2: not run ($gpus GPU: NCCL takes one per rank; test_gpu_group shares it)"
      fi
    fi
    tests/test_gpu_group --log_level=message; echo "test_gpu_group: exit $?"
    mpirun -np 2 tests/test_gpu_group --log_level=message; echo "test_gpu_group, mpirun -np 2: exit $?"
    BRAID_DEVICE_COMM=mpi mpirun -np 2 -x BRAID_DEVICE_COMM tests/test_gpu_group --log_level=message
    echo "test_gpu_group, mpirun -np 2, BRAID_DEVICE_COMM=mpi: exit $?"
    ctest --test-dir "$build" -R '^gpu_parallel_cli$' --output-on-failure; echo "ctest gpu_parallel_cli: exit $?"
  ) > "$log" 2>&1 || rc=1
  grep -E "^mpirun:|exit [0-9]+|tests passed|Skipped|Failed|skipped:|device buffers between|weights apart|scored shards" "$log"
  # 77 is a skip (no GPU): on a machine with one, a failure, as is any exit but 0 and 77.
  grep -E 'exit [0-9]+$' "$log" | grep -qvE 'exit (0|77)$' && rc=1
  if (( gpus > 0 )) && grep -qE 'exit 77$|Skipped' "$log"; then
    echo "FAIL: a GPU is present but a test was skipped (nccl.log)"
    rc=1
  fi
  return $rc
}

# The tools with --device cuda against --device cpu (tests/cli/cli_tools_gpu.sh: sft, rm, dpo,
# one PPO iteration, grpo, braid-score, the memory prediction and refusal, braid-profile
# measure): tools.log. The tools load HDF5 and MPI, whose runtime libraries come from the
# prefix (scripts/deps-gpu.txt) or the machine: any still missing is named first.
part_tools() {
  local log=$out/tools.log rc t missing
  {
    for t in braid braid-train braid-score braid-generate braid-profile; do
      missing=$(ldd "$build/bin/$t" 2> /dev/null | grep "not found" | awk '{print $1}' | sort -u | tr '\n' ' ')
      [[ -z $missing ]] || echo "$t: libraries not found: $missing(add their Debian packages to scripts/deps-gpu.txt)"
    done
    ctest --test-dir "$build" -R '^tools_cuda$' --output-on-failure -V
  } > "$log" 2>&1
  rc=$?
  grep -E "libraries not found|largest relative difference|peak .* predicted|this run needs|FAIL|skipped:|Skipped|tests passed|tests failed" "$log" | head -80
  # The test skips (exit 77) when make_backend("cuda") throws: on a GPU machine a skip is a failure.
  if nvidia-smi -L > /dev/null 2>&1 && grep -qE 'tools_cuda.*Skipped|skipped:' "$log"; then
    echo "FAIL: a GPU is present but the tools test was skipped"
    rc=1
  fi
  return $rc
}

# Every family: its reference's parity suite and the device-against-CPU parity on cuda, then
# transformers itself (needs transformers, torch and safetensors in python3).
part_families() {
  local log=$out/families.log rc=0 t d
  {
    export BRAID_FIXTURES=$root/tests/fixtures
    "$build/tests/test_family_parity" --log_level=message -- --backend=cuda-f32
    echo "test_family_parity cuda-f32: exit $?"
    for t in cuda-f32 cuda-bf16; do
      "$build/tests/test_model_parity" --run_test=every_family_same_numbers --log_level=message -- --backend=$t
      echo "test_model_parity every_family $t: exit $?"
    done
    for d in cuda cpu; do
      python3 "$root/bench/gpu/hf_families.py" --braid "$build/bin/braid" --outputs "$build/tests/model_outputs" \
        --device $d
      echo "hf_families.py --device $d: exit $?"
    done
  } > "$log" 2>&1
  grep -E "exit [0-9]+|^family|^[a-z0-9_]+ +[0-9.e+-]+ |FAILED|failed:|worst relative error|skipped:" "$log"
  grep -E 'exit [0-9]+$' "$log" | grep -qvE 'exit 0$' && rc=1
  if nvidia-smi -L > /dev/null 2>&1 && grep -qE 'exit 77$' "$log"; then
    echo "FAIL: a GPU is present but a families test was skipped"
    rc=1
  fi
  return $rc
}

# examples/gpu-grpo/run.sh under the prefix's mpirun (its rollout runs on 2 ranks), its braid
# run stopped BRAID_GPU_BUDGET seconds after this script started (or after BRAID_GRPO_TIMEOUT)
# so that the log is written inside the device tool's 10 minutes (run.sh then prints the
# figures of the iterations done).
part_grpo() {
  local log=$out/grpo.log rc run=${BRAID_GRPO_RUN:-/tmp/braid-gpu-grpo} limit
  limit=$((${BRAID_GPU_BUDGET:-560} - SECONDS))
  ((limit >= 60)) || limit=60
  limit=${BRAID_GRPO_TIMEOUT:-$limit}
  [[ ${BRAID_GPU_FRESH:-0} == 1 ]] && rm -rf "$run"
  (
    mpi_environment || exit 1
    nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
    echo "braid run stops after $limit s"
    BRAID_BIN=$build/bin ITERATIONS=${BRAID_GRPO_ITERATIONS:-} TIMEOUT=$limit \
      "$root/examples/gpu-grpo/run.sh" "$run"
  ) > "$log" 2>&1
  rc=$?
  echo "examples/gpu-grpo/run.sh: exit $rc$( ((rc == 124)) && echo " (braid run stopped after $limit s)")" >> "$log"
  grep -E "^braid: (error|iteration [0-9]+:)|error:|exit [0-9]+|^grpo on|^ *(iter|[0-9]+|median|inter-stage|serial)" "$log" | tail -60
  return $rc
}

failed=()
for p in "${parts[@]}"; do
  step "part $p"
  if ! built "$p"; then echo "part $p: not built (build.log)"; failed+=("$p"); continue; fi
  "part_$p" || failed+=("$p")
done
step "done: logs in $out; failed parts: ${failed[*]:-none}"
(( ${#failed[@]} == 0 ))
