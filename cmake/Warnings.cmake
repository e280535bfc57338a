# Compiler warnings and the sanitizer configuration, applied to every target of the project.
add_compile_options(
  "$<$<COMPILE_LANGUAGE:CXX>:-Wall;-Wextra;-Wno-unused-parameter>"
)
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
