# Every third-party dependency is found here, once. Debian packages plus the CUDA toolkit; nothing
# is downloaded. Targets below link the imported targets named here, never raw paths.
find_package(Threads REQUIRED)
find_package(ZLIB REQUIRED)  # crc32 of event-stream records
find_package(fmt REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
# RapidJSON's streaming writer (header-only): reports written in one pass where a DOM of 16K ranks
# costs more than the diagnosis (hangdoctor's JSON). nlohmann_json stays for everything read.
find_path(RAPIDJSON_INCLUDE_DIR NAMES rapidjson/prettywriter.h REQUIRED)
add_library(rankscope_rapidjson INTERFACE)
target_include_directories(rankscope_rapidjson SYSTEM INTERFACE ${RAPIDJSON_INCLUDE_DIR})
find_package(SQLite3 REQUIRED)  # nsys SQLite exports (importers/nsys)
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

# CUDA: compiled whenever nvcc is found, so CI (no GPU) still proves it compiles.
set(RANKSCOPE_HAVE_CUDA OFF)
if(RANKSCOPE_WITH_CUDA)
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
else()
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
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST PROPERTIES LABELS "${T_LABELS}" ${lock})
endfunction()
