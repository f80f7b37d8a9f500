# opconform_add_conformance_tests(TARGET <plugin>
#                                 [OPS <glob>...] [CHECKS <check>...] [DEVICES <device>...]
#                                 [DTYPES <dtype>...] [SAMPLES <n>] [TIMEOUT <seconds>]
#                                 [LABELS <label>...] [PER_CHECK])
#
# Registers the operators of an operator library with ctest: one test per operator, or with
# PER_CHECK one per operator and check, named <plugin>/<op> or <plugin>/<op>/<check> and
# labelled `conformance` plus LABELS, so that `ctest -L conformance -j 8` and
# `ctest -R 'my_ops/aten::relu'` work. Each test runs
#   opconform check --library <plugin file> --ops <op> [--checks ...] [--device ...] [--dtype ...]
#                   [--samples n] [--timeout s] --jobs 1 --report-dir <dir>
# and its exit status is the verdict; the reports (report.md, .html, .json, junit.xml) land in
# <current binary dir>/opconform-conformance/<plugin>/<op>[/<check>]/. One worker process per test
# keeps crash isolation, and ctest's -j spreads the tests over the cores.
#
#   TARGET    a SHARED or MODULE library target of this project that exports opconform_plugin()
#             (opconform/plugin.h). Nothing else: opconform loads what it checks with dlopen. For
#             operators defined in a test executable, use EXPECT_OPCHECK or
#             OPCONFORM_INSTANTIATE_OPCHECK_SUITE (opconform/conformance/gtest.h) with
#             gtest_discover_tests instead.
#   OPS       fnmatch globs over qualified names ('aten::add*'); default every operator. A glob that
#             matches nothing becomes a failing test (a typo must not pass).
#   CHECKS    the checks to run (`opconform list --checks`); default what `opconform check` runs.
#   DEVICES   cpu, cuda (default cpu). DTYPES: float32, ... (default every dtype the op declares);
#             an op with no case left after the filters fails its test ("no case matches").
#   SAMPLES   generated samples per case and check (opconform's default: 50).
#   TIMEOUT   seconds one check may run before it is `timed_out` (opconform's --timeout; the
#             hang is a result in the report, and the test goes on with the next check).
#
# The operators are known only once the library is built, so they are listed then, the way
# gtest_discover_tests does it: a POST_BUILD step runs `opconform list --library <file> --names`
# and writes a file of add_test() calls that ctest includes (TEST_INCLUDE_FILES). A library that
# fails to load gets one test, <plugin>/load, whose report says why. The program is the target
# opconform::opconform: the installed one after find_package(opconform), the one built alongside
# in opconform's own tree.
function(opconform_add_conformance_tests)
  set(fn opconform_add_conformance_tests)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "PER_CHECK" "TARGET;SAMPLES;TIMEOUT" "OPS;CHECKS;DEVICES;DTYPES;LABELS")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "${fn}: unknown arguments: ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(ARG_KEYWORDS_MISSING_VALUES)
    message(FATAL_ERROR "${fn}: ${ARG_KEYWORDS_MISSING_VALUES} given without a value")
  endif()
  if(NOT ARG_TARGET)
    message(FATAL_ERROR "${fn}: TARGET is required: the plugin's library target")
  endif()
  if(NOT TARGET ${ARG_TARGET})
    message(FATAL_ERROR "${fn}: TARGET '${ARG_TARGET}' is not a target (call it after add_library)")
  endif()
  get_target_property(type ${ARG_TARGET} TYPE)
  get_target_property(imported ${ARG_TARGET} IMPORTED)
  if(NOT type MATCHES "^(SHARED|MODULE)_LIBRARY$")
    message(FATAL_ERROR "${fn}: TARGET '${ARG_TARGET}' is of type ${type}; it must be a SHARED or MODULE library "
                        "exporting opconform_plugin() (opconform/plugin.h), which opconform loads with dlopen. "
                        "Operators in a test executable are checked with EXPECT_OPCHECK or "
                        "OPCONFORM_INSTANTIATE_OPCHECK_SUITE (opconform/conformance/gtest.h).")
  endif()
  if(imported)
    message(FATAL_ERROR "${fn}: TARGET '${ARG_TARGET}' is imported; its operators are listed when it is "
                        "built, so it must be built by this project")
  endif()
  get_target_property(target_dir ${ARG_TARGET} SOURCE_DIR)
  if(NOT target_dir STREQUAL CMAKE_CURRENT_SOURCE_DIR)
    message(FATAL_ERROR "${fn}: TARGET '${ARG_TARGET}' is defined in ${target_dir}: call ${fn} in that "
                        "directory's CMakeLists.txt (CMake attaches its POST_BUILD step there only)")
  endif()
  get_target_property(registered ${ARG_TARGET} OPCONFORM_CONFORMANCE_TESTS)
  if(registered)
    message(FATAL_ERROR "${fn}: TARGET '${ARG_TARGET}' has its conformance tests already (one call per library)")
  endif()
  set_target_properties(${ARG_TARGET} PROPERTIES OPCONFORM_CONFORMANCE_TESTS ON)
  if(DEFINED ARG_SAMPLES AND NOT ARG_SAMPLES MATCHES "^[1-9][0-9]*$")
    message(FATAL_ERROR "${fn}: SAMPLES must be a positive integer, got '${ARG_SAMPLES}'")
  endif()
  if(DEFINED ARG_TIMEOUT AND (NOT ARG_TIMEOUT MATCHES "^[0-9]*\\.?[0-9]+$" OR ARG_TIMEOUT MATCHES "^[0.]+$"))
    message(FATAL_ERROR "${fn}: TIMEOUT must be a positive number of seconds, got '${ARG_TIMEOUT}'")
  endif()
  foreach(device IN LISTS ARG_DEVICES)
    if(NOT device MATCHES "^(cpu|cuda)$")
      message(FATAL_ERROR "${fn}: DEVICES: unknown device '${device}' (cpu, cuda)")
    endif()
  endforeach()
  if(NOT TARGET opconform::opconform)
    message(FATAL_ERROR "${fn}: the opconform program (target opconform::opconform) is not defined: "
                        "call find_package(opconform REQUIRED) first")
  endif()
  get_target_property(program_imported opconform::opconform IMPORTED)
  if(NOT program_imported)
    # In opconform's own tree the program is built here: it must exist when the plugin's
    # POST_BUILD step runs it.
    get_target_property(program_target opconform::opconform ALIASED_TARGET)
    add_dependencies(${ARG_TARGET} ${program_target})
  endif()

  # The options every test passes to `opconform check` besides --library, --ops and --checks.
  set(check_options --jobs 1)
  if(ARG_DEVICES)
    list(JOIN ARG_DEVICES "," devices)
    list(APPEND check_options --device ${devices})
  endif()
  if(ARG_DTYPES)
    list(JOIN ARG_DTYPES "," dtypes)
    list(APPEND check_options --dtype ${dtypes})
  endif()
  if(DEFINED ARG_SAMPLES)
    list(APPEND check_options --samples ${ARG_SAMPLES})
  endif()
  if(DEFINED ARG_TIMEOUT)
    list(APPEND check_options --timeout ${ARG_TIMEOUT})
  endif()
  if(NOT ARG_OPS)
    set(ARG_OPS "*")
  endif()
  set(labels conformance ${ARG_LABELS})

  # A multi-config generator builds one file of tests per configuration; ctest -C picks one.
  set(base ${CMAKE_CURRENT_BINARY_DIR}/${ARG_TARGET}_conformance)
  get_property(multi_config GLOBAL PROPERTY GENERATOR_IS_MULTI_CONFIG)
  if(multi_config)
    set(tests_file "${base}_tests-$<CONFIG>.cmake")
    set(ctest_tests_file "${base}_tests-\${CTEST_CONFIGURATION_TYPE}.cmake")
  else()
    set(tests_file "${base}_tests.cmake")
    set(ctest_tests_file "${tests_file}")
  endif()

  # What the POST_BUILD step needs, in a file: lists and generator expressions pass through
  # intact. Its hash goes on the step's command line, so that changed arguments re-run it.
  set(params "")
  foreach(pair
      "PROGRAM;$<TARGET_FILE:opconform::opconform>" "LIBRARY;$<TARGET_FILE:${ARG_TARGET}>"
      "TARGET;${ARG_TARGET}" "OPS;${ARG_OPS}" "CHECKS;${ARG_CHECKS}" "PER_CHECK;${ARG_PER_CHECK}"
      "CHECK_OPTIONS;${check_options}" "LABELS;${labels}"
      "REPORT_ROOT;${CMAKE_CURRENT_BINARY_DIR}/opconform-conformance/${ARG_TARGET}"
      "WORKING_DIRECTORY;${CMAKE_CURRENT_BINARY_DIR}" "TESTS_FILE;${tests_file}")
    list(POP_FRONT pair key)
    string(APPEND params "set(${key} [==[${pair}]==])\n")
  endforeach()
  string(MD5 params_hash "${params}")
  file(GENERATE OUTPUT "${base}_params-$<CONFIG>.cmake" CONTENT "${params}")
  add_custom_command(TARGET ${ARG_TARGET} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -D "OPCONFORM_PARAMS=${base}_params-$<CONFIG>.cmake"
            -D OPCONFORM_PARAMS_HASH=${params_hash}
            -P ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/OpconformDiscoverOps.cmake
    BYPRODUCTS ${tests_file}
    VERBATIM)

  # Before the first build there is nothing to include: one failing test says so.
  set(include_file ${base}_include.cmake)
  file(WRITE ${include_file}
    "if(EXISTS \"${ctest_tests_file}\")\n"
    "  include(\"${ctest_tests_file}\")\n"
    "else()\n"
    "  add_test([==[${ARG_TARGET}/NOT_BUILT]==] \"${CMAKE_COMMAND}\" -E echo\n"
    "           [==[${ARG_TARGET} has not been built: build it, then run ctest again]==])\n"
    "  set_tests_properties([==[${ARG_TARGET}/NOT_BUILT]==] PROPERTIES WILL_FAIL TRUE)\n"
    "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${include_file})
endfunction()
