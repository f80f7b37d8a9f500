# Wrong calls of opconform_add_conformance_tests stop the configure with a message that names
# what is wrong (the ctest test cmake_conformance_tests_arguments):
#   cmake -D OPCONFORM_CMAKE_DIR=<cmake/> -D SCRATCH=<dir> -P conformance_tests_arguments.cmake
# Each case configures a small project (no compiler needed: the checks run before anything is
# built) and expects a failure whose output contains the given text.
cmake_minimum_required(VERSION 3.25)

set(failures 0)

# expect_error(<name> <text expected in the output> <CMake code of the case> [NO_PROGRAM])
function(expect_error name expected code)
  set(dir ${SCRATCH}/${name})
  set(program "add_executable(opconform::opconform IMPORTED)")
  if(ARGV3 STREQUAL "NO_PROGRAM")
    set(program "")
  endif()
  file(REMOVE_RECURSE ${dir})
  file(WRITE ${dir}/CMakeLists.txt
    "cmake_minimum_required(VERSION 3.25)\n"
    "project(case LANGUAGES NONE)\n"
    "include(${OPCONFORM_CMAKE_DIR}/OpconformConformanceTests.cmake)\n"
    "${program}\n"
    "add_library(plugin SHARED plugin.c)\n"
    "add_executable(tool IMPORTED)\n"
    "add_library(vendor SHARED IMPORTED)\n"
    "${code}\n")
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${dir} -B ${dir}/build RESULT_VARIABLE status
                  OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(REGEX REPLACE "[ \n]+" " " output "${out}${err}")  # CMake wraps long messages
  string(FIND "${output}" "${expected}" at)
  if(status EQUAL 0 OR at EQUAL -1)
    message(SEND_ERROR "${name}: expected a failure saying '${expected}', got (${status}):\n${out}${err}")
    math(EXPR failures "${failures} + 1")
    set(failures ${failures} PARENT_SCOPE)
  else()
    message(STATUS "${name}: ok")
  endif()
endfunction()

set(call opconform_add_conformance_tests)
expect_error(no_target "TARGET is required" "${call}(OPS aten::neg)")
expect_error(unknown_argument "unknown arguments: OP" "${call}(TARGET plugin OP aten::neg)")
expect_error(missing_value "SAMPLES given without a value" "${call}(TARGET plugin SAMPLES)")
expect_error(not_a_target "TARGET 'nothing' is not a target" "${call}(TARGET nothing)")
expect_error(executable "TARGET 'tool' is of type EXECUTABLE; it must be a SHARED or MODULE library"
             "${call}(TARGET tool)")
expect_error(imported "TARGET 'vendor' is imported" "${call}(TARGET vendor)")
expect_error(samples "SAMPLES must be a positive integer, got '0'" "${call}(TARGET plugin SAMPLES 0)")
expect_error(timeout "TIMEOUT must be a positive number of seconds, got '-3'" "${call}(TARGET plugin TIMEOUT -3)")
expect_error(device "DEVICES: unknown device 'gpu'" "${call}(TARGET plugin DEVICES cpu gpu)")
expect_error(twice "TARGET 'plugin' has its conformance tests already" "${call}(TARGET plugin)\n${call}(TARGET plugin)")
expect_error(other_directory "call opconform_add_conformance_tests in that directory's CMakeLists.txt"
             "file(WRITE \${CMAKE_CURRENT_SOURCE_DIR}/sub/CMakeLists.txt \"${call}(TARGET plugin)\")\nadd_subdirectory(sub)")
expect_error(no_program "the opconform program (target opconform::opconform) is not defined"
             "${call}(TARGET plugin)" NO_PROGRAM)

if(failures GREATER 0)
  message(FATAL_ERROR "${failures} case(s) failed")
endif()
