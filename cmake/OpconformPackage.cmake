# The installed CMake package. `cmake --install <build> --prefix P` gives
#   P/include/opconform/...          the public headers of every module
#   P/lib/libopconform_<module>.a    the static libraries (opconform_library installs both)
#   P/bin/opconform                  the command-line program (harness/CMakeLists.txt)
#   P/lib/cmake/opconform/           opconformConfig.cmake, its version file, the exported targets
#                                    (opconform::<module>, ::gtest, ::plugin_abi, ::opconform)
#                                    and opconform_add_conformance_tests()
# Every path in them is relative to P, so the prefix can be moved. examples/downstream uses it,
# and its ci_test.sh installs this build and checks exactly that.
include(CMakePackageConfigHelpers)
include(GNUInstallDirs)

set(opconform_package_dir ${CMAKE_INSTALL_LIBDIR}/cmake/opconform)

# opconform::gtest: what a GoogleTest that uses opconform/conformance/gtest.h (EXPECT_OPCHECK,
# generated suites) links. The header belongs to conformance; GoogleTest comes with it, gtest_main
# does not (the test picks its main). Absent when GoogleTest is not installed.
if(NOT TARGET GTest::gtest)
  find_package(GTest QUIET)
endif()
set(OPCONFORM_PACKAGE_GTEST OFF)
if(TARGET GTest::gtest)
  add_library(opconform_gtest INTERFACE)
  add_library(opconform::gtest ALIAS opconform_gtest)
  target_link_libraries(opconform_gtest INTERFACE opconform::conformance GTest::gtest)
  set_target_properties(opconform_gtest PROPERTIES EXPORT_NAME gtest)
  install(TARGETS opconform_gtest EXPORT opconformTargets)
  set(OPCONFORM_PACKAGE_GTEST ON)
endif()

# opconform::plugin_abi: what an operator library behind the C ABI compiles against
# (opconform/plugin.h, opconform/dlpack_versioned.h, DLPack's header) and nothing else: a
# plugin links none of opconform's libraries.
add_library(opconform_plugin_abi INTERFACE)
add_library(opconform::plugin_abi ALIAS opconform_plugin_abi)
target_include_directories(opconform_plugin_abi INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/adapters/include>
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/core/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_link_libraries(opconform_plugin_abi INTERFACE dlpack::dlpack)
set_target_properties(opconform_plugin_abi PROPERTIES EXPORT_NAME plugin_abi)
# Its own export file, so that find_package(opconform COMPONENTS plugin_abi) loads it alone.
install(TARGETS opconform_plugin_abi EXPORT opconformPluginAbiTargets)
install(EXPORT opconformPluginAbiTargets NAMESPACE opconform:: FILE opconformPluginAbiTargets.cmake
        DESTINATION ${opconform_package_dir})

install(EXPORT opconformTargets NAMESPACE opconform:: FILE opconformTargets.cmake
        DESTINATION ${opconform_package_dir})

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/opconformConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/opconformConfig.cmake
                              INSTALL_DESTINATION ${opconform_package_dir})
# 0.x: a minor version may change the API, so only the same major.minor is compatible.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/opconformConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/opconformConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/opconformConfigVersion.cmake
              ${CMAKE_CURRENT_LIST_DIR}/OpconformConformanceTests.cmake
              ${CMAKE_CURRENT_LIST_DIR}/OpconformDiscoverOps.cmake
        DESTINATION ${opconform_package_dir})

# Wrong calls of opconform_add_conformance_tests fail with a message naming the argument (the
# function itself runs in examples/vendor_plugin and examples/downstream).
if(OPCONFORM_BUILD_TESTS)
  add_test(NAME cmake_conformance_tests_arguments
           COMMAND ${CMAKE_COMMAND} -D OPCONFORM_CMAKE_DIR=${CMAKE_CURRENT_LIST_DIR}
                   -D SCRATCH=${CMAKE_CURRENT_BINARY_DIR}/cmake_conformance_tests_arguments
                   -P ${CMAKE_CURRENT_LIST_DIR}/tests/conformance_tests_arguments.cmake)
  set_tests_properties(cmake_conformance_tests_arguments PROPERTIES LABELS downstream)
endif()
