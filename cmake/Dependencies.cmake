# Every third-party dependency is found here, once. Debian packages plus the CUDA toolkit; nothing
# is downloaded. Targets below link the imported targets named here, never raw paths.
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
# RANKSCOPE_SELF_CONTAINED (the .deb, the wheel): binaries and plugins that need no library beyond
# the C and C++ runtimes' oldest parts: fmt compiled in (its header-only mode), zlib and SQLite linked
# statically, libstdc++ and libgcc statically into every binary and shared library. Off for a
# developer's build (fmt's compiled library is quicker to build against).
option(RANKSCOPE_SELF_CONTAINED "Link fmt, zlib, SQLite and the C++ runtime into the binaries (packages)" OFF)
add_library(rankscope_fmt INTERFACE)
if(RANKSCOPE_SELF_CONTAINED)
  target_link_libraries(rankscope_fmt INTERFACE fmt::fmt-header-only)
  set(ZLIB_USE_STATIC_LIBS ON)
  add_link_options($<$<LINK_LANGUAGE:CXX>:-static-libstdc++> -static-libgcc)
else()
  target_link_libraries(rankscope_fmt INTERFACE fmt::fmt)
endif()
find_package(ZLIB REQUIRED)  # crc32 of event-stream records
find_package(nlohmann_json 3 REQUIRED)
# RapidJSON's streaming writer (header-only): reports written in one pass where a DOM of 16K ranks
# costs more than the diagnosis (hangdoctor's JSON). nlohmann_json stays for everything read.
find_path(RAPIDJSON_INCLUDE_DIR NAMES rapidjson/prettywriter.h REQUIRED)
add_library(rankscope_rapidjson INTERFACE)
target_include_directories(rankscope_rapidjson SYSTEM INTERFACE ${RAPIDJSON_INCLUDE_DIR})
if(RANKSCOPE_SELF_CONTAINED)
  find_library(SQLite3_LIBRARY NAMES libsqlite3.a REQUIRED)  # Debian's libsqlite3-dev ships it
endif()
find_package(SQLite3 REQUIRED)  # nsys SQLite exports (importers/nsys)
if(RANKSCOPE_SELF_CONTAINED)
  # The static library's own needs.
  set_property(TARGET SQLite::SQLite3 APPEND PROPERTY INTERFACE_LINK_LIBRARIES ${CMAKE_DL_LIBS} Threads::Threads m)
endif()
find_package(PkgConfig REQUIRED)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
find_package(OpenMP REQUIRED COMPONENTS CXX)
set(BLA_VENDOR OpenBLAS)
find_package(BLAS REQUIRED)
find_path(CBLAS_INCLUDE_DIR NAMES cblas.h PATH_SUFFIXES openblas x86_64-linux-gnu/openblas-pthread REQUIRED)
add_library(rankscope_blas INTERFACE)
target_link_libraries(rankscope_blas INTERFACE ${BLAS_LIBRARIES})
target_include_directories(rankscope_blas SYSTEM INTERFACE ${CBLAS_INCLUDE_DIR})

# The repository root, wherever the top-level project is configured from.
get_filename_component(RANKSCOPE_SOURCE_ROOT "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)

# MPI is optional at run time (one process needs none) but required to build the MPI communicator.
find_package(MPI COMPONENTS CXX)
if(MPI_CXX_FOUND)
  find_program(RANKSCOPE_MPIEXEC NAMES mpirun mpiexec)
endif()

if(RANKSCOPE_BUILD_TESTS)
  find_package(GTest REQUIRED)
  include(GoogleTest)
endif()

# rankscope_gpu_visible(<out> <why>): whether this machine shows an NVIDIA GPU, without compiling
# anything: /dev/nvidia0, else a GPU listed by nvidia-smi. <why> says what was looked at.
function(rankscope_gpu_visible out why)
  if(EXISTS /dev/nvidia0)
    set(${out} ON PARENT_SCOPE)
    set(${why} "/dev/nvidia0" PARENT_SCOPE)
    return()
  endif()
  find_program(_nvidia_smi nvidia-smi)
  if(_nvidia_smi)
    execute_process(COMMAND ${_nvidia_smi} -L RESULT_VARIABLE _rc OUTPUT_VARIABLE _gpus ERROR_QUIET TIMEOUT 20)
    if(_rc EQUAL 0 AND _gpus MATCHES "GPU [0-9]")
      set(${out} ON PARENT_SCOPE)
      set(${why} "nvidia-smi -L" PARENT_SCOPE)
      return()
    endif()
  endif()
  set(${out} OFF PARENT_SCOPE)
  set(${why} "no /dev/nvidia0, no GPU from nvidia-smi -L" PARENT_SCOPE)
endfunction()

# CUDA: with RANKSCOPE_WITH_CUDA=ON compiled whenever nvcc is found, so CI (no GPU) still proves it
# compiles; with AUTO only where a GPU can also run it (rankscope_gpu_visible below).
set(RANKSCOPE_HAVE_CUDA OFF)
string(TOUPPER "${RANKSCOPE_WITH_CUDA}" _with_cuda)
if(NOT _with_cuda MATCHES "^(AUTO|ON|OFF|TRUE|FALSE|YES|NO|1|0)$")
  message(FATAL_ERROR "RANKSCOPE_WITH_CUDA is '${RANKSCOPE_WITH_CUDA}': use AUTO, ON or OFF")
endif()
set(_cuda_wanted OFF)
if(_with_cuda STREQUAL "AUTO")
  rankscope_gpu_visible(_gpu_visible _gpu_why)
  if(_gpu_visible)
    set(_cuda_wanted ON)
  else()
    message(STATUS "rankscope: no GPU visible (${_gpu_why}): CUDA left out (RANKSCOPE_WITH_CUDA=ON compiles it anyway)")
  endif()
elseif(_with_cuda)
  set(_cuda_wanted ON)
endif()
if(_cuda_wanted)
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    find_library(RANKSCOPE_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
    find_path(RANKSCOPE_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    set(RANKSCOPE_HAVE_CUDA ON)
  endif()
endif()
if(RANKSCOPE_HAVE_CUDA)
  message(STATUS "rankscope: nvcc ${CMAKE_CUDA_COMPILER_VERSION} found: building CUDA, NCCL, CUPTI and NVTX support")
elseif(_cuda_wanted)
  message(STATUS "rankscope: nvcc not found: building without CUDA, NCCL, CUPTI and NVTX (CPU only)")
endif()

# Marks a target as one that may see only the run-directory contract (checked in DependencyRules).
function(rankscope_contract_only target)
  set_property(GLOBAL APPEND PROPERTY RANKSCOPE_CONTRACT_ONLY_TARGETS ${target})
endfunction()

# Adds a GoogleTest executable registered with CTest. LABELS is optional (e.g. gpu, bench, mpi);
# the pseudo-label SERIAL is not a label: it makes the tests run alone (timing under contention).
function(rankscope_add_gtest name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main)
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  target_compile_definitions(${name} PRIVATE
    RANKSCOPE_SOURCE_DIR="${RANKSCOPE_SOURCE_ROOT}" RANKSCOPE_BINARY_DIR="${CMAKE_BINARY_DIR}")
  # The target still exists (callers add definitions and dependencies to it) but is neither built by
  # default nor registered: see RANKSCOPE_UNBUILT_TEST_LABELS.
  foreach(label IN LISTS T_LABELS)
    if(label IN_LIST RANKSCOPE_UNBUILT_TEST_LABELS)
      set_target_properties(${name} PROPERTIES EXCLUDE_FROM_ALL TRUE)
      return()
    endif()
  endforeach()
  # mpirun jobs never overlap: they oversubscribe the cores (timing-sensitive assertions) and some
  # tests of one binary share a run directory that another process of the same binary cleans up.
  set(lock "")
  if("mpi" IN_LIST T_LABELS)
    set(lock RESOURCE_LOCK mpirun)
  endif()
  if("SERIAL" IN_LIST T_LABELS)
    list(REMOVE_ITEM T_LABELS SERIAL)
    list(APPEND lock RUN_SERIAL TRUE)
  endif()
  # test.sh compiles every file once outside a unity build (which hides a missing include): the
  # ASan stage builds file by file but leaves out these labels' binaries, so they are never unity.
  if(T_LABELS MATCHES "(^|;)(mpi|slow|gpu|bench)(;|$)")
    set_target_properties(${name} PROPERTIES UNITY_BUILD OFF)
  endif()
  # Listing a binary's tests loads it and every library it links (cuBLAS and NCCL are 760 MB): on a
  # cold page cache, right after the build, that took over CMake's default 5 s, and a listing that
  # times out fails the whole ctest run before any test starts.
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 300 PROPERTIES LABELS "${T_LABELS}" ${lock})
endfunction()
