# What `cmake --install` puts where, and the Debian package CPack makes of it (docs/INSTALL.md).
#   bin/                      hangdoctor, rankscope
#   lib/                      librankscope-probe.so (the probe's C ABI), librankscope-nccl.so (the NCCL
#                             profiler plugin), librankscope-nvtx.so (the NVTX injection library, where
#                             the toolkit's NVTX headers were found), and the C++ probe's static
#                             libraries librankscope_probe.a and librankscope_format.a
#   include/rankscope/        the C ABI's header; include/rankscope/{probe,format}/ the C++ probe's
#   lib/cmake/rankscope/      find_package(rankscope): rankscope::probe (C++), rankscope::probe_c (C ABI)
#   share/rankscope/          the ctypes wrapper rankscope_probe.py, the report schemas, the HTML assets
# A wheel build (scikit-build-core, pyproject.toml) puts the two commands in the wheel's scripts and
# the Python probe with its library in site-packages, and skips the C++ development files.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(_tools hangdoctor rankscope)
set(_plugins rankscope_probe_c rankscope_nccl_profiler)
if(TARGET rankscope_nvtx_injection)
  list(APPEND _plugins rankscope_nvtx_injection)
endif()

if(SKBUILD)
  # pip install: commands on the venv's PATH, `import rankscope_probe` with its library beside it.
  install(TARGETS ${_tools} RUNTIME DESTINATION ${SKBUILD_SCRIPTS_DIR})
  install(TARGETS ${_plugins} LIBRARY DESTINATION ${SKBUILD_PLATLIB_DIR})
  install(FILES ${PROJECT_SOURCE_DIR}/probe/c_api/rankscope_probe.py DESTINATION ${SKBUILD_PLATLIB_DIR})
  return()
endif()

# The tools find each other and nothing else: an installed binary has no RPATH to the build tree.
install(TARGETS ${_tools} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS ${_plugins} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${PROJECT_SOURCE_DIR}/probe/c_api/rankscope_probe_c.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/rankscope)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/probe/include/rankscope/probe
                  ${PROJECT_SOURCE_DIR}/format/include/rankscope/format
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/rankscope)
install(FILES ${PROJECT_SOURCE_DIR}/probe/c_api/rankscope_probe.py DESTINATION ${CMAKE_INSTALL_DATADIR}/rankscope)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/reports/schemas DESTINATION ${CMAKE_INSTALL_DATADIR}/rankscope)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/reports/html/assets/ DESTINATION ${CMAKE_INSTALL_DATADIR}/rankscope/html)

# find_package(rankscope): the C++ probe (static, with the format library it writes through) and
# the C ABI. The C++ probe's users need fmt, nlohmann_json and zlib as the build did (found again
# by the package's config file); the C ABI needs nothing.
install(TARGETS rankscope_probe rankscope_format rankscope_fmt rankscope_probe_c EXPORT rankscope-targets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT rankscope-targets NAMESPACE rankscope:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rankscope)
set_target_properties(rankscope_probe PROPERTIES EXPORT_NAME probe)
set_target_properties(rankscope_format PROPERTIES EXPORT_NAME format)
set_target_properties(rankscope_fmt PROPERTIES EXPORT_NAME fmt)
set_target_properties(rankscope_probe_c PROPERTIES EXPORT_NAME probe_c)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/rankscope-config.cmake.in
  ${CMAKE_BINARY_DIR}/rankscope-config.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rankscope)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/rankscope-config-version.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/rankscope-config.cmake ${CMAKE_BINARY_DIR}/rankscope-config-version.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rankscope)

# cpack -G DEB: rankscope_<version>_amd64.deb. Its run-time dependencies are read from the binaries
# by dpkg-shlibdeps (with RANKSCOPE_SELF_CONTAINED, only the C library).
set(CPACK_PACKAGE_NAME rankscope)
set(CPACK_PACKAGE_VENDOR rankscope)
set(CPACK_PACKAGE_CONTACT "rankscope developers <rankscope@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "why a distributed training job is stuck or slow: hangdoctor, rankscope, the probe")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR DEB)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
include(CPack)
