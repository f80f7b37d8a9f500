# The POST_BUILD step of opconform_add_conformance_tests (OpconformConformanceTests.cmake):
#   cmake -D OPCONFORM_PARAMS=<params file> -P OpconformDiscoverOps.cmake
# lists the operators of the library just built (`opconform list --library <file> --names`) and
# writes TESTS_FILE: the add_test() calls that ctest includes. The params file sets PROGRAM,
# LIBRARY, TARGET, OPS, CHECKS, PER_CHECK, CHECK_OPTIONS, LABELS, REPORT_ROOT, WORKING_DIRECTORY
# and TESTS_FILE.
cmake_minimum_required(VERSION 3.17)
include(${OPCONFORM_PARAMS})

set(tests "")

# Appends the test `name`: opconform check --library LIBRARY --ops <ops> [--checks <checks>]
# CHECK_OPTIONS, with its reports in REPORT_ROOT/<report_dir>. Every argument is written as a
# bracket argument, so globs and paths pass through as they are.
function(add_check_test name ops checks report_dir)
  set(command ${PROGRAM} check --library ${LIBRARY} --ops ${ops})
  if(checks)
    list(APPEND command --checks ${checks})
  endif()
  list(APPEND command ${CHECK_OPTIONS} --report-dir ${REPORT_ROOT}/${report_dir})
  set(line "add_test([==[${name}]==]")
  foreach(arg IN LISTS command)
    string(APPEND line " [==[${arg}]==]")
  endforeach()
  string(APPEND tests "${line})\n"
         "set_tests_properties([==[${name}]==] PROPERTIES LABELS [==[${LABELS}]==]"
         " WORKING_DIRECTORY [==[${WORKING_DIRECTORY}]==])\n")
  set(tests "${tests}" PARENT_SCOPE)
endfunction()

# The words `opconform` printed, one a line; a failure leaves `failed` set with its output.
function(opconform_lines out)
  execute_process(COMMAND ${PROGRAM} ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE stdout
                  ERROR_VARIABLE stderr TIMEOUT 120)
  if(NOT status EQUAL 0)
    list(JOIN ARGN " " arguments)
    set(failed "`opconform ${arguments}` failed (${status}):\n${stdout}${stderr}" PARENT_SCOPE)
    return()
  endif()
  string(REGEX REPLACE "\n$" "" stdout "${stdout}")
  string(REPLACE "\n" ";" lines "${stdout}")
  set(${out} "${lines}" PARENT_SCOPE)
endfunction()

function(directory_name out text)
  string(REGEX REPLACE "[^A-Za-z0-9._-]" "_" name "${text}")
  set(${out} "${name}" PARENT_SCOPE)
endfunction()

list(JOIN CHECKS "," all_checks)
set(ops "")
set(failed "")
foreach(glob IN LISTS OPS)
  opconform_lines(matching list --library ${LIBRARY} --names --ops ${glob})
  if(failed)
    break()
  endif()
  if(matching)
    list(APPEND ops ${matching})
  else()
    # `opconform check` says "--ops '<glob>' matches no operator" (exit 2): a typo in OPS fails, visibly.
    directory_name(dir "${glob}")
    add_check_test("${TARGET}/${glob}" "${glob}" "${all_checks}" "${dir}")
  endif()
endforeach()
list(REMOVE_DUPLICATES ops)

if(failed)
  # The library does not load (or listing it crashed): one test whose report says why.
  message(WARNING "opconform_add_conformance_tests(${TARGET}): ${failed}")
  set(tests "")
  add_check_test("${TARGET}/load" "*" "${all_checks}" "load")
elseif(PER_CHECK)
  set(per_check ${CHECKS})
  if(NOT per_check)
    # The checks a run uses when --checks is not given: `list --checks` prints one a line.
    opconform_lines(listed list --checks)
    if(failed)
      message(FATAL_ERROR "opconform_add_conformance_tests(${TARGET}): ${failed}")
    endif()
    foreach(line IN LISTS listed)
      if(line MATCHES "^([A-Za-z0-9_]+)")
        list(APPEND per_check ${CMAKE_MATCH_1})
      endif()
    endforeach()
  endif()
  foreach(op IN LISTS ops)
    directory_name(dir "${op}")
    foreach(check IN LISTS per_check)
      add_check_test("${TARGET}/${op}/${check}" "${op}" "${check}" "${dir}/${check}")
    endforeach()
  endforeach()
else()
  foreach(op IN LISTS ops)
    directory_name(dir "${op}")
    add_check_test("${TARGET}/${op}" "${op}" "${all_checks}" "${dir}")
  endforeach()
endif()

file(WRITE ${TESTS_FILE} "${tests}")
