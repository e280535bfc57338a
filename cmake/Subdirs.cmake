# rankscope_add_parts(dir1 dir2 ...): add_subdirectory for each listed part that exists yet.
# Parts are listed explicitly (no globbing); a part lands with its own CMakeLists.txt.
function(rankscope_add_parts)
  foreach(d IN LISTS ARGN)
    if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/${d}/CMakeLists.txt)
      add_subdirectory(${d})
    endif()
  endforeach()
endfunction()
