# rankscope_embed_files(TARGET name OUTPUT header VARIABLES var1 file1 var2 file2 ...)
# Turns files (HTML template, Chart.js, JSON schemas) into a generated header of constexpr
# byte arrays at build time, so binaries carry their assets and reports are self-contained.
function(rankscope_embed_files)
  cmake_parse_arguments(E "" "OUTPUT" "VARIABLES" ${ARGN})
  set(inputs)
  set(args)
  list(LENGTH E_VARIABLES n)
  math(EXPR last "${n} - 1")
  foreach(i RANGE 0 ${last} 2)
    math(EXPR j "${i} + 1")
    list(GET E_VARIABLES ${i} var)
    list(GET E_VARIABLES ${j} file)
    list(APPEND inputs ${file})
    list(APPEND args ${var} ${file})
  endforeach()
  # A ';' inside a custom command's argument splits it; the pairs travel '|'-joined instead.
  string(JOIN "|" pairs_arg ${args})
  add_custom_command(
    OUTPUT ${E_OUTPUT}
    COMMAND ${CMAKE_COMMAND} -DOUTPUT=${E_OUTPUT} "-DPAIRS=${pairs_arg}" -P ${CMAKE_SOURCE_DIR}/cmake/EmbedFileScript.cmake
    DEPENDS ${inputs} ${CMAKE_SOURCE_DIR}/cmake/EmbedFileScript.cmake
    COMMENT "Embedding ${n} assets into ${E_OUTPUT}"
    VERBATIM)
endfunction()
