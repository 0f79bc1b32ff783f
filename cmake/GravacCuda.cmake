# Decides whether the CUDA kernels are built and sets GRAVAC_CUDA_ENABLED.
# nvcc is looked up on PATH, then in CUDAToolkit_ROOT / CUDA_HOME / /usr/local/cuda.
# With CUDA, NCCL (libnccl + nccl.h) is looked up in the toolkit's directories (then the system's);
# GRAVAC_NCCL_FOUND says whether the nccl transport can be built (GRAVAC_NCCL_LIBRARY,
# GRAVAC_NCCL_INCLUDE_DIR).
# GRAVAC_WITH_NCCL=OFF leaves the nccl transport out of a CUDA build (e.g. binaries carried to a
# machine without libnccl, as scripts/gpu_check.sh --bundle does).
option(GRAVAC_WITH_NCCL "Build the nccl transport when NCCL is found (CUDA builds)" ON)
set(GRAVAC_CUDA_ENABLED OFF)
set(GRAVAC_NCCL_FOUND OFF)
if(NOT GRAVAC_WITH_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER)
    find_program(GRAVAC_NVCC nvcc
      HINTS ENV CUDAToolkit_ROOT ENV CUDA_HOME /usr/local/cuda
      PATH_SUFFIXES bin)
    if(GRAVAC_NVCC)
      set(CMAKE_CUDA_COMPILER "${GRAVAC_NVCC}")
    endif()
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # Hopper (H100/H200) by default; override with -DCMAKE_CUDA_ARCHITECTURES=...
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    enable_language(CUDA)
    # Debian CMake 3.25 knows no C++20 flag for nvcc; the .cu files are C++17.
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    # Debian 12's unpatched CMake 3.25.1 FindCUDAToolkit sets a property on CUDA::nvToolsExt
    # whether or not it found libnvToolsExt, which CUDA 13 no longer ships (nvtx3 is header-only),
    # and fails the configure. An empty stand-in target lets it pass; nothing links it.
    if(CMAKE_VERSION VERSION_LESS 3.26 AND NOT TARGET CUDA::nvToolsExt)
      find_library(GRAVAC_NVTOOLSEXT nvToolsExt
        HINTS ${CMAKE_CUDA_COMPILER_TOOLKIT_ROOT}/lib64 ${CMAKE_CUDA_COMPILER_TOOLKIT_ROOT}/lib)
      if(NOT GRAVAC_NVTOOLSEXT)
        add_library(CUDA::nvToolsExt INTERFACE IMPORTED)
      endif()
    endif()
    find_package(CUDAToolkit REQUIRED)
    set(GRAVAC_CUDA_ENABLED ON)
    find_library(GRAVAC_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
    find_path(GRAVAC_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    if(GRAVAC_WITH_NCCL AND GRAVAC_NCCL_LIBRARY AND GRAVAC_NCCL_INCLUDE_DIR)
      set(GRAVAC_NCCL_FOUND ON)
    endif()
  elseif(GRAVAC_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "GRAVAC_WITH_CUDA=ON but no CUDA compiler was found")
  endif()
endif()
