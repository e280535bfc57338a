# Compiler warnings and the sanitizer configuration, applied to every target of the project.
add_compile_options(
  "$<$<COMPILE_LANGUAGE:CXX>:-Wall;-Wextra;-Wno-unused-parameter>"
)
# clang (test.sh's sanitizer and fuzz builds) says so of every `#pragma omp simd` loop it leaves as it
# is, which an -O0 build does with all of them: no fault of the loop.
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-Wno-pass-failed>")
endif()
if(RANKSCOPE_SANITIZE)
  message(STATUS "rankscope: building with ASan+UBSan")
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=address,undefined;-fno-omit-frame-pointer;-fno-sanitize-recover=undefined>")
  add_link_options(-fsanitize=address,undefined)
endif()
if(RANKSCOPE_TSAN)
  # ThreadSanitizer (test.sh runs the probe's and the DDP reducer's tests under it, CPU, no MPI).
  message(STATUS "rankscope: building with ThreadSanitizer")
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=thread;-fno-omit-frame-pointer>")
  add_link_options(-fsanitize=thread)
endif()
