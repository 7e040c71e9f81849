# What `cmake --install` puts where, the CMake package that find_package(ckptcheck) reads, the man
# page and bash completion (generated from the built CLI's own --help), and the .deb (CPack,
# `make package`). Included from the top-level CMakeLists.txt after every target exists.
#
# Components: `runtime` (the two programs, man page, completion: what the .deb holds) and
# `development` (public headers, static libraries, the CMake package).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
# `install` and `package` use what is built and never build the world first (tests and bench
# included): `make package` builds, then packs; the install and .deb tests run after the build.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)

# ---- programs ---------------------------------------------------------------------------------
# Both in bin/: `ckptcheck train` execs ckptcheck-train beside it (verifier/process/training_binary.h
# also looks in ../libexec), and torchrun runs ckptcheck-train directly.
# ckptcheck-faultfs beside them too: `drill --faults power-loss,...` mounts it (faultfs_program_beside).
install(TARGETS ckptcheck ckptcheck-train ckptcheck-faultfs RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
# The hardware catalog `plan` reads by default: found at <exe dir>/../share/ckptcheck/hardware.yaml
# (verifier/plan/hardware_catalog.h), so an installed ckptcheck plans from any directory.
install(FILES ${CMAKE_SOURCE_DIR}/fixtures/hardware.yaml DESTINATION ${CMAKE_INSTALL_DATADIR}/ckptcheck
        COMPONENT runtime)

# ---- man page and bash completion, from the CLI's own --help ------------------------------------
set(CKPTCHECK_MAN_PAGE ${CMAKE_BINARY_DIR}/ckptcheck.1)
set(CKPTCHECK_COMPLETION ${CMAKE_BINARY_DIR}/ckptcheck.bash-completion)
add_custom_command(
  OUTPUT ${CKPTCHECK_MAN_PAGE} ${CKPTCHECK_COMPLETION}
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/scripts/cli_docs.py $<TARGET_FILE:ckptcheck>
          --man ${CKPTCHECK_MAN_PAGE} --completion ${CKPTCHECK_COMPLETION}
  DEPENDS ckptcheck ckptcheck-train ${CMAKE_SOURCE_DIR}/scripts/cli_docs.py
  COMMENT "Generating the man page and bash completion from ckptcheck --help"
  VERBATIM)
add_custom_target(cli_docs ALL DEPENDS ${CKPTCHECK_MAN_PAGE} ${CKPTCHECK_COMPLETION})
install(FILES ${CKPTCHECK_MAN_PAGE} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT runtime)
install(FILES ${CKPTCHECK_COMPLETION} DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
        RENAME ckptcheck COMPONENT runtime)

# ---- the library: find_package(ckptcheck) -------------------------------------------------------
# ckptcheck::ckptcheck is the torch-free API (api/ckptcheck.h), ckptcheck::ckptcheck_torch the
# LibTorch one (api/ckptcheck_torch.h). Both are static, so the layers they link are installed
# with them (under lib/ckptcheck/, exported as ckptcheck::ckpt_*); only the two public headers are
# installed, the layers' own headers stay internal.
set_target_properties(ckpt_api PROPERTIES EXPORT_NAME ckptcheck OUTPUT_NAME ckptcheck)
set_target_properties(ckpt_api_torch PROPERTIES EXPORT_NAME ckptcheck_torch OUTPUT_NAME ckptcheck_torch)
target_include_directories(ckpt_api INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
set(CKPTCHECK_LIB_DIR ${CMAKE_INSTALL_LIBDIR}/ckptcheck)
set(CKPTCHECK_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ckptcheck)
install(TARGETS ckpt_api ckpt_drill ckpt_check ckpt_pins ckpt_tensors ckpt_layouts ckpt_faultfs ckpt_process ckpt_fixtures ckpt_shards
                ckpt_distributed ckpt_formats ckpt_base
        EXPORT ckptcheckTargets ARCHIVE DESTINATION ${CKPTCHECK_LIB_DIR} COMPONENT development)
install(TARGETS ckpt_api_torch ckpt_shards_torch ckpt_distributed_torch
        EXPORT ckptcheckTorchTargets ARCHIVE DESTINATION ${CKPTCHECK_LIB_DIR} COMPONENT development)
install(FILES ${CMAKE_SOURCE_DIR}/api/ckptcheck.h ${CMAKE_SOURCE_DIR}/api/ckptcheck_torch.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ckptcheck COMPONENT development)
install(EXPORT ckptcheckTargets NAMESPACE ckptcheck:: DESTINATION ${CKPTCHECK_CMAKE_DIR}
        COMPONENT development)
install(EXPORT ckptcheckTorchTargets NAMESPACE ckptcheck:: DESTINATION ${CKPTCHECK_CMAKE_DIR}
        COMPONENT development)
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/ckptcheckConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/ckptcheckConfig.cmake INSTALL_DESTINATION ${CKPTCHECK_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/ckptcheckConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/ckptcheckConfig.cmake ${CMAKE_BINARY_DIR}/ckptcheckConfigVersion.cmake
        DESTINATION ${CKPTCHECK_CMAKE_DIR} COMPONENT development)

# ---- the .deb: `make package` -----------------------------------------------------------------
# The runtime component only (the programs a training container needs). Depends comes from
# dpkg-shlibdeps over the installed programs: the Debian package of every shared library they
# load (libtorch, hdf5, zstd, openssl, yaml-cpp, ...), with the versions this build saw.
set(CPACK_PACKAGE_NAME ckptcheck)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "ckptcheck maintainers <ckptcheck@invalid>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "prove a training run can be stopped and resumed")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime)
set(CPACK_COMPONENTS_GROUPING ALL_COMPONENTS_IN_ONE)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# libhdf5 is loaded with dlopen at first use (formats/hdf5_loader.h), so dpkg-shlibdeps does not see
# it: its package is named here, as dpkg knows the file this build loads.
if(CKPTCHECK_WITH_HDF5)
  execute_process(COMMAND dpkg-query -S "${CKPTCHECK_HDF5_LIBRARY}" OUTPUT_VARIABLE hdf5_owner ERROR_QUIET)
  string(REGEX MATCH "^([^:,]+)" hdf5_package "${hdf5_owner}")
  if(hdf5_package)
    set(CPACK_DEBIAN_PACKAGE_DEPENDS "${hdf5_package}")
  endif()
endif()
# The Python package (python/CMakeLists.txt) is built for Debian's python3 of this release; the
# programs need no Python, so it is recommended, not required.
math(EXPR CKPTCHECK_PYTHON_NEXT_MINOR "${Python3_VERSION_MINOR} + 1")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS
    "python3 (>= ${Python3_VERSION_MAJOR}.${Python3_VERSION_MINOR}~), python3 (<< ${Python3_VERSION_MAJOR}.${CKPTCHECK_PYTHON_NEXT_MINOR})")
include(CPack)

# ---- tests: install and embed, package -----------------------------------------------------------
# Each installs into a scratch prefix (or unpacks the .deb into a scratch root) and uses only what
# was installed there.
add_test(NAME install_embed_drill
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/install/install_embed_drill_test.sh ${CMAKE_BINARY_DIR}
                 ${CMAKE_SOURCE_DIR} ${Torch_DIR})
set_tests_properties(install_embed_drill PROPERTIES TIMEOUT 900 LABELS "install;slow" COST 500)
add_test(NAME deb_package_verify
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/install/deb_package_test.sh ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR})
set_tests_properties(deb_package_verify PROPERTIES TIMEOUT 600 LABELS "install;slow" COST 200)
