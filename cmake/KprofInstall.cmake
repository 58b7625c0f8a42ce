# What `cmake --install` puts where, the CMake package downstream projects find with
# find_package(kprof) (then link kprof::client), and the .debs that `make package` builds. Two
# components: `runtime` (the programs, the unit, the docs: what a device host needs, about
# 3 MiB), `dev` (headers, static libraries and the CMake package, for programs that link the
# client library) and `python` (the Python client, where grpc_python_plugin was found);
# `cmake --install BUILD --component runtime` installs the first alone.
set_target_properties(kprof_base PROPERTIES EXPORT_NAME base)
set_target_properties(kprof_report PROPERTIES EXPORT_NAME report)
set_target_properties(kprof_proto PROPERTIES EXPORT_NAME proto)
set_target_properties(kprof_grpc PROPERTIES EXPORT_NAME grpc)
set_target_properties(kprof_client PROPERTIES EXPORT_NAME client)
set_target_properties(kprof_module_abi PROPERTIES EXPORT_NAME module_abi)
set_target_properties(kprof_warnings PROPERTIES EXPORT_NAME warnings)

install(TARGETS kprofd kprof RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
if(KPROF_BOARD_BUNDLE)
  # Each program finds the bundle's lib/ beside its own directory, wherever it is unpacked.
  file(RELATIVE_PATH kprof_bin_to_lib ${CMAKE_INSTALL_FULL_BINDIR} ${CMAKE_INSTALL_FULL_LIBDIR})
  file(RELATIVE_PATH kprof_worker_to_lib ${CMAKE_INSTALL_FULL_LIBEXECDIR}/kprofd
    ${CMAKE_INSTALL_FULL_LIBDIR})
  set_target_properties(kprofd kprof PROPERTIES INSTALL_RPATH "$ORIGIN/${kprof_bin_to_lib}")
  set_target_properties(kprofd-worker PROPERTIES INSTALL_RPATH "$ORIGIN/${kprof_worker_to_lib}")
  install(DIRECTORY ${KPROF_BUNDLE_LIBRARIES}/ DESTINATION ${CMAKE_INSTALL_LIBDIR}
    COMPONENT runtime)
  install(PROGRAMS deploy/board/install.sh DESTINATION . COMPONENT runtime)
endif()
install(TARGETS kprofd-worker RUNTIME DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/kprofd
  COMPONENT runtime)
install(TARGETS kprof_client kprof_grpc kprof_proto kprof_report kprof_base kprof_module_abi
  kprof_warnings
  EXPORT kprofTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)

# Headers: <kprof/module_abi.h>, <kprof/config.h> and the generated <kprof/v1/*.pb.h> under
# include/; the client library's public API (client/, proto/wire.h, and the report/ and base/
# headers they use) under include/kprof/. The measurement core is the daemon's own: neither its
# headers nor its library are installed.
install(DIRECTORY include/kprof DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
install(FILES ${PROJECT_BINARY_DIR}/generated/kprof/config.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kprof COMPONENT dev)
install(DIRECTORY ${PROJECT_BINARY_DIR}/proto/gen/kprof/v1 DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kprof
  COMPONENT dev FILES_MATCHING PATTERN "*.pb.h")
install(DIRECTORY base report DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kprof COMPONENT dev
  FILES_MATCHING PATTERN "*.h")
install(FILES client/kprof_client.h client/farm.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kprof/client
  COMPONENT dev)
install(FILES proto/status.h proto/wire.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kprof/proto
  COMPONENT dev)

install(EXPORT kprofTargets NAMESPACE kprof:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kprof
  COMPONENT dev)
include(CMakePackageConfigHelpers)
configure_package_config_file(cmake/kprofConfig.cmake.in
  ${PROJECT_BINARY_DIR}/kprofConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kprof)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kprofConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kprofConfig.cmake ${PROJECT_BINARY_DIR}/kprofConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kprof COMPONENT dev)

# pkg-config --cflags kprof-module, for module builds that are not CMake's (find_package(kprof)
# gives them kprof::module_abi).
file(RELATIVE_PATH KPROF_PC_TO_PREFIX ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" KPROF_PC_TO_PREFIX "${KPROF_PC_TO_PREFIX}")
configure_file(cmake/kprof-module.pc.in ${PROJECT_BINARY_DIR}/kprof-module.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/kprof-module.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)

# The service: the unit where systemd looks for packaged units, and an example config.
if(KPROF_BOARD_BUNDLE)
  # In the bundle, naming its kprofd, for its installer (deploy/board/install.sh) to put in
  # /etc/systemd/system, with the Jetson drop-in.
  file(READ deploy/kprofd.service kprof_unit)
  string(REPLACE "ExecStart=/usr/bin/kprofd" "ExecStart=${CMAKE_INSTALL_FULL_BINDIR}/kprofd"
    kprof_unit "${kprof_unit}")
  file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/kprofd.service CONTENT "${kprof_unit}")
  install(FILES ${PROJECT_BINARY_DIR}/kprofd.service deploy/board/jetson.conf
    DESTINATION ${CMAKE_INSTALL_DATADIR}/kprofd COMPONENT runtime)
else()
  install(FILES deploy/kprofd.service DESTINATION lib/systemd/system COMPONENT runtime)
endif()
install(FILES deploy/kprofd.conf DESTINATION ${CMAKE_INSTALL_DATADIR}/kprofd
  RENAME kprofd.conf.example COMPONENT runtime)
install(FILES README.md LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT runtime)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME kprofd)
set(CPACK_PACKAGE_CONTACT "kprofd maintainers <kprofd@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Profiling daemon that measures kernels over gRPC")
set(CPACK_PACKAGE_INSTALL_DIRECTORY /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Programs without their debug information, as Debian ships them: a third of the size, which
# matters on a board's eMMC.
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
# kprofd (runtime) and kprofd-dev (dev), which needs the headers of what its libraries use.
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev)
if(KPROF_HAS_PYTHON)
  # The Python client (python/), for workstations: python3-kprof.
  list(APPEND CPACK_COMPONENTS_ALL python)
  set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-kprof)
  set(CPACK_DEBIAN_PYTHON_PACKAGE_ARCHITECTURE all)
  set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
  set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS "python3, python3-grpcio, python3-protobuf")
endif()
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME kprofd)
set(CPACK_DEBIAN_DEV_PACKAGE_NAME kprofd-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
  "libgrpc++-dev, libprotobuf-dev, libabsl-dev, libssl-dev, libdlpack-dev, nlohmann-json3-dev")
if(KPROF_BOARD_BUNDLE)
  # The bundle as a .deb for the board (Ubuntu 22.04 or 24.04 under JetPack 6 or 7): the same
  # files under /opt/kprofd, needing of the board's own packages only the C and C++ runtimes;
  # its postinst runs the bundle's installer (the unit, a configuration, the service started).
  set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
  set(CPACK_COMPONENTS_ALL runtime)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS OFF)
  set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS "libc6 (>= 2.35), libstdc++6 (>= 12), libgcc-s1")
  if(CMAKE_SYSTEM_PROCESSOR STREQUAL "aarch64")
    set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE arm64)
  endif()
  configure_file(deploy/board/postinst.in ${PROJECT_BINARY_DIR}/deb/postinst @ONLY)
  configure_file(deploy/board/prerm.in ${PROJECT_BINARY_DIR}/deb/prerm @ONLY)
  set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA
    ${PROJECT_BINARY_DIR}/deb/postinst ${PROJECT_BINARY_DIR}/deb/prerm)
  set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_STRICT_PERMISSION ON)
endif()
include(CPack)
