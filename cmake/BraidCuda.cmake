# Decides whether the CUDA backend is built. BRAID_CUDA=ON insists, OFF refuses,
# AUTO builds it when a CUDA compiler is found (CUDA code then always compiles,
# even on machines without a GPU; GPU tests skip at run time).
include(CheckLanguage)
set(BRAID_CUDA_ENABLED OFF)
string(TOUPPER "${BRAID_CUDA}" _braid_cuda)
if(_braid_cuda STREQUAL "ON" OR _braid_cuda STREQUAL "AUTO")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # Hopper (H100, H200): sm_90 machine code, plus compute_90 PTX that the driver can
    # compile for a later GPU. Set CMAKE_CUDA_ARCHITECTURES to build for others.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES "90-real;90-virtual")
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(BRAID_CUDA_ENABLED ON)
  elseif(_braid_cuda STREQUAL "ON")
    message(FATAL_ERROR "BRAID_CUDA=ON but no CUDA compiler was found (set CMAKE_CUDA_COMPILER)")
  endif()
elseif(NOT _braid_cuda STREQUAL "OFF")
  message(FATAL_ERROR "BRAID_CUDA must be ON, OFF or AUTO, not '${BRAID_CUDA}'")
endif()
