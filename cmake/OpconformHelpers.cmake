include(GNUInstallDirs)

# opconform_library(NAME <module> SOURCES ... [DEPS ...] [PRIVATE_DEPS ...])
#   One module = one static library `opconform_<module>` with alias `opconform::<module>`,
#   public headers in <module>/include.
# Note [Shared modules in the test build]: every test binary links the module libraries, and
# statically each one carries its own copy of them: in the sanitizer build 82 test binaries of up
# to 155 MB (the reference's ~100 MB each time) came to 7.8 GB of a 9.3 GB build folder, and a CI
# run failed on a full disk. With OPCONFORM_SHARED_MODULES (the asan preset) the modules are shared
# libraries, loaded once by every binary. A module that links RapidCheck (`STATIC`: conformance,
# and reports and harness above it) stays static: Debian's librapidcheck.a is not
# position-independent, so it cannot go into a shared library, and a static module under a shared
# one would be copied into both.
option(OPCONFORM_SHARED_MODULES "Build the module libraries that can be shared as shared libraries (Note [Shared modules in the test build])" OFF)
function(opconform_library)
  cmake_parse_arguments(ARG "STATIC" "NAME" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  set(target opconform_${ARG_NAME})
  set(type STATIC)
  if(OPCONFORM_SHARED_MODULES AND NOT ARG_STATIC)
    set(type SHARED)
  endif()
  add_library(${target} ${type} ${ARG_SOURCES})
  add_library(opconform::${ARG_NAME} ALIAS ${target})
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(${target} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers>)
  set_target_properties(${target} PROPERTIES OUTPUT_NAME opconform_${ARG_NAME} EXPORT_NAME ${ARG_NAME})
  # The installed package (OpconformPackage.cmake) offers it as opconform::<module> too.
  install(TARGETS ${target} EXPORT opconformTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endfunction()

# opconform_test(NAME <test> SOURCES ... [DEPS ...] [LABELS <module>] [SHARDS <n>])
#   A GoogleTest executable (with RapidCheck) whose tests are registered one by one with ctest,
#   labelled with the module (`ctest -L harness`; "unit" when no label is given). With SHARDS,
#   ctest gets n tests instead, <test>_shard_<i>, each running its share of the cases in one
#   process (GTEST_TOTAL_SHARDS / GTEST_SHARD_INDEX): for suites of many small cases whose
#   process start-up costs more than a case (the reference's conformance suite: 85 ms a process,
#   1.6 s under ASan, over 1,700 cases). One case: the binary with --gtest_filter.
function(opconform_test)
  cmake_parse_arguments(ARG "" "NAME;SHARDS" "SOURCES;DEPS;LABELS" ${ARGN})
  if(NOT OPCONFORM_BUILD_TESTS)
    return()
  endif()
  add_executable(${ARG_NAME} ${ARG_SOURCES})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS}
    rapidcheck_gtest rapidcheck GTest::gmock GTest::gtest GTest::gtest_main)
  # Designated initializers that leave members at their defaults are the intended style.
  target_compile_options(${ARG_NAME} PRIVATE -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers)
  # Note [Tests build for compile time]: the library is optimised for the checks' speed; a test
  # TU's own code is mostly gtest macros and setup, which -O2 compiles 2.5x slower than -Og
  # (core/tests/tensor_test.cpp: 25 s vs 9.4 s) for no run-time gain worth it.
  if(NOT OPCONFORM_SANITIZE AND CMAKE_BUILD_TYPE MATCHES "^(RelWithDebInfo|Release|MinSizeRel)$")
    target_compile_options(${ARG_NAME} PRIVATE -Og)
  endif()
  include(GoogleTest)
  # The first label is the module's (`ctest -L reports`); more (`cuda`: tests that need a GPU to
  # run in full, scripts/test-gpu.sh) are added after discovery: gtest_discover_tests flattens a
  # list of labels into separate words, which set_tests_properties then misreads.
  set(label unit)
  if(ARG_LABELS)
    list(GET ARG_LABELS 0 label)
  endif()
  string(REPLACE ";" "\\;" all_labels "${ARG_LABELS}")
  # Note [One process per test binary under sanitizers]: ASan start-up costs 0.2-0.6 s a
  # process, more than 900 of the 1,000 tests take (312 s of a 972 s asan ctest was start-up).
  # Sanitizer builds run each binary once, all its tests in one process; the default build
  # keeps one ctest test per gtest test, so test isolation is still checked there.
  if(OPCONFORM_SANITIZE AND NOT ARG_SHARDS)
    add_test(NAME ${ARG_NAME} COMMAND ${ARG_NAME})
    set_tests_properties(${ARG_NAME} PROPERTIES LABELS "${ARG_LABELS}")
    if(NOT ARG_LABELS)
      set_tests_properties(${ARG_NAME} PROPERTIES LABELS unit)
    endif()
    return()
  endif()
  if(ARG_SHARDS)
    math(EXPR last "${ARG_SHARDS} - 1")
    foreach(shard RANGE ${last})
      add_test(NAME ${ARG_NAME}_shard_${shard} COMMAND ${ARG_NAME})
      set_tests_properties(${ARG_NAME}_shard_${shard} PROPERTIES LABELS "${label}"
        ENVIRONMENT "GTEST_TOTAL_SHARDS=${ARG_SHARDS};GTEST_SHARD_INDEX=${shard}")
    endforeach()
    return()
  endif()
  gtest_discover_tests(${ARG_NAME}
    PROPERTIES LABELS "${label}"
    DISCOVERY_TIMEOUT 60)
  list(LENGTH ARG_LABELS label_count)
  if(label_count GREATER 1)
    # Read by ctest after the discovered tests (absent until the binary is built).
    set(labels_script ${CMAKE_CURRENT_BINARY_DIR}/${ARG_NAME}_labels.cmake)
    file(WRITE ${labels_script}
      "if(DEFINED ${ARG_NAME}_TESTS)\n"
      "  set_tests_properties(\${${ARG_NAME}_TESTS} PROPERTIES LABELS \"${all_labels}\")\n"
      "endif()\n")
    set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${labels_script})
  endif()
endfunction()

# Sanitizers apply to everything built after this point (asan preset).
if(OPCONFORM_SANITIZE)
  # vptr (UBSan's dynamic-type check) costs 8% of compile time and guards casts this project
  # does not make (no downcasts of polymorphic types outside dynamic_cast).
  add_compile_options(-fsanitize=${OPCONFORM_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  if(OPCONFORM_SANITIZE MATCHES "undefined")
    add_compile_options(-fno-sanitize=vptr)
  endif()
  add_link_options(-fsanitize=${OPCONFORM_SANITIZE})
endif()
