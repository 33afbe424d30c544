# Locates the CUPTI headers for the CUPTI Activity consumer (libfingrav_cupti_tool)
# and its stand-in runtime. The headers come under NVIDIA's licence in the
# nvidia-cuda-cupti-cu12 wheel and include <cuda.h> and the runtime's
# builtin_types.h (nvidia-cuda-runtime-cu12), which include
# "crt/host_defines.h" (nvidia-cuda-nvcc-cu12): all three are wheels of the
# test-full extra, built against where they are installed and never copied
# into this repository. libcupti itself is dlopen'ed at run time, so nothing
# CUDA is linked.
#
# Sets FINGRAV_HAVE_CUPTI (ON/OFF) and, when ON, the imported interface target
# fingrav::cupti_headers. Cache variables:
#   CUPTI_INCLUDE_DIR       folder of cupti.h (default: asked of Python_EXECUTABLE's wheel)
#   CUPTI_CUDA_INCLUDE_DIR  folder of cuda.h  (default: the same folder, else the runtime wheel's)
#   CUPTI_CRT_INCLUDE_DIR   folder of crt/host_defines.h (default: the folder of cuda.h, else the nvcc
#                           wheel's, else the nvidia-cuda-crt wheel's)
#   FINGRAV_REQUIRE_CUPTI   fail the configure when either is missing (CI's sanitizer stages)

set(CUPTI_INCLUDE_DIR "" CACHE PATH
    "Folder holding cupti.h; empty: the nvidia-cuda-cupti-cu12 wheel of Python_EXECUTABLE")
set(CUPTI_CUDA_INCLUDE_DIR "" CACHE PATH
    "Folder holding cuda.h (cupti.h includes it); empty: the nvidia-cuda-runtime-cu12 wheel of Python_EXECUTABLE")
set(CUPTI_CRT_INCLUDE_DIR "" CACHE PATH
    "Folder holding crt/host_defines.h; empty: the folder of cuda.h, else the nvidia-cuda-nvcc-cu12 or nvidia-cuda-crt wheel of Python_EXECUTABLE")
option(FINGRAV_REQUIRE_CUPTI "Fail the configure when the CUPTI headers are not found" OFF)

# The include folder of an installed nvidia-* wheel (a namespace package, hence
# find_spec rather than __file__), or "" when Python or the wheel is missing.
function(_fingrav_wheel_include module out)
  set(${out} "" PARENT_SCOPE)
  if(NOT Python_EXECUTABLE)
    find_package(Python QUIET COMPONENTS Interpreter)
  endif()
  if(NOT Python_EXECUTABLE)
    return()
  endif()
  execute_process(
    COMMAND "${Python_EXECUTABLE}" -c
      "import importlib.util, os, sys\ntry:\n    s = importlib.util.find_spec(sys.argv[1])\nexcept ImportError:\n    s = None\nfor p in (s.submodule_search_locations or []) if s else []:\n    d = os.path.join(p, 'include')\n    if os.path.isdir(d):\n        print(d)\n        break\n"
      "${module}"
    OUTPUT_VARIABLE _dir OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _rc ERROR_QUIET)
  if(_rc EQUAL 0 AND _dir)
    set(${out} "${_dir}" PARENT_SCOPE)
  endif()
endfunction()

set(_fingrav_cupti_dir "${CUPTI_INCLUDE_DIR}")
if(NOT _fingrav_cupti_dir)
  _fingrav_wheel_include(nvidia.cuda_cupti _fingrav_cupti_dir)
endif()
set(_fingrav_cuda_dir "${CUPTI_CUDA_INCLUDE_DIR}")
if(NOT _fingrav_cuda_dir AND _fingrav_cupti_dir AND EXISTS "${_fingrav_cupti_dir}/cuda.h")
  set(_fingrav_cuda_dir "${_fingrav_cupti_dir}")
endif()
if(NOT _fingrav_cuda_dir)
  _fingrav_wheel_include(nvidia.cuda_runtime _fingrav_cuda_dir)
endif()
set(_fingrav_crt_dir "${CUPTI_CRT_INCLUDE_DIR}")
if(NOT _fingrav_crt_dir AND _fingrav_cuda_dir AND EXISTS "${_fingrav_cuda_dir}/crt/host_defines.h")
  set(_fingrav_crt_dir "${_fingrav_cuda_dir}")
endif()
# crt/ comes with nvidia-cuda-nvcc-cu12 (the test-full extra) or, in the isolated build environment
# of a plain `pip install .`, with nvidia-cuda-crt (CUDA 13's crt/ alone, in the nvidia.cu13 namespace
# that nvidia-nvml-dev shares, hence the check for the header itself).
foreach(_fingrav_crt_module nvidia.cuda_nvcc nvidia.cu13)
  if(_fingrav_crt_dir AND EXISTS "${_fingrav_crt_dir}/crt/host_defines.h")
    break()
  endif()
  _fingrav_wheel_include(${_fingrav_crt_module} _fingrav_crt_dir)
endforeach()

set(FINGRAV_HAVE_CUPTI OFF)
if(_fingrav_cupti_dir AND EXISTS "${_fingrav_cupti_dir}/cupti_activity.h"
   AND _fingrav_cuda_dir AND EXISTS "${_fingrav_cuda_dir}/cuda.h"
   AND _fingrav_crt_dir AND EXISTS "${_fingrav_crt_dir}/crt/host_defines.h")
  set(FINGRAV_HAVE_CUPTI ON)
  file(STRINGS "${_fingrav_cupti_dir}/cupti_version.h" _fingrav_cupti_api REGEX "^#define CUPTI_API_VERSION [0-9]+")
  string(REGEX REPLACE ".* ([0-9]+)$" "\\1" _fingrav_cupti_api "${_fingrav_cupti_api}")
  message(STATUS "CUPTI consumer: building against ${_fingrav_cupti_dir} (CUPTI_API_VERSION ${_fingrav_cupti_api}), "
                 "cuda.h from ${_fingrav_cuda_dir}, crt/ from ${_fingrav_crt_dir}")
  if(NOT TARGET fingrav::cupti_headers)
    add_library(fingrav::cupti_headers INTERFACE IMPORTED)
    # SYSTEM: NVIDIA's headers are not held to the project's warning flags.
    set_target_properties(fingrav::cupti_headers PROPERTIES
      INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${_fingrav_cupti_dir};${_fingrav_cuda_dir};${_fingrav_crt_dir}"
      INTERFACE_INCLUDE_DIRECTORIES "${_fingrav_cupti_dir};${_fingrav_cuda_dir};${_fingrav_crt_dir}")
  endif()
else()
  set(_fingrav_cupti_why "")
  if(NOT _fingrav_cupti_dir OR NOT EXISTS "${_fingrav_cupti_dir}/cupti_activity.h")
    string(APPEND _fingrav_cupti_why " cupti_activity.h not found (CUPTI_INCLUDE_DIR='${CUPTI_INCLUDE_DIR}');")
  endif()
  if(NOT _fingrav_cuda_dir OR NOT EXISTS "${_fingrav_cuda_dir}/cuda.h")
    string(APPEND _fingrav_cupti_why " cuda.h not found (CUPTI_CUDA_INCLUDE_DIR='${CUPTI_CUDA_INCLUDE_DIR}');")
  endif()
  if(NOT _fingrav_crt_dir OR NOT EXISTS "${_fingrav_crt_dir}/crt/host_defines.h")
    string(APPEND _fingrav_cupti_why " crt/host_defines.h not found (CUPTI_CRT_INCLUDE_DIR='${CUPTI_CRT_INCLUDE_DIR}');")
  endif()
  # pip's isolated build installs the header wheels only on Linux x86_64 (pyproject.toml's
  # [build-system] requires): elsewhere the message says so rather than asking for wheels that do not
  # exist there.
  if(CMAKE_SYSTEM_NAME STREQUAL "Linux" AND CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
    string(CONCAT _fingrav_cupti_where
      "install the headers with `pip install nvidia-cuda-cupti-cu12 nvidia-cuda-runtime-cu12 nvidia-cuda-crt` "
      "(a plain `pip install .` does so in its build environment) into the Python given as -DPython_EXECUTABLE=..., or")
  else()
    string(CONCAT _fingrav_cupti_where
      "the CUPTI header wheels are installed at build time on Linux x86_64 only, not on "
      "${CMAKE_SYSTEM_NAME} ${CMAKE_SYSTEM_PROCESSOR}: to build the tool here")
  endif()
  # One string (string(CONCAT)): set() with several would make a list, printed with semicolons.
  string(CONCAT _fingrav_cupti_msg
    "CUPTI consumer skipped (libfingrav_cupti_tool, the stand-in libcupti and their tests):${_fingrav_cupti_why} "
    "${_fingrav_cupti_where} pass -DCUPTI_INCLUDE_DIR=... -DCUPTI_CUDA_INCLUDE_DIR=... (a CUDA toolkit's "
    "extras/CUPTI/include/ and include/)")
  if(FINGRAV_REQUIRE_CUPTI)
    message(FATAL_ERROR "${_fingrav_cupti_msg}")
  endif()
  message(STATUS "${_fingrav_cupti_msg}")
endif()
