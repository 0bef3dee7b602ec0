# cmake -DLAB=NN -DSOURCE_DIR=… -DBUILD_DIR=… -DLEARNER_FILES=a;b -DPREREQUISITE_FILES=c;d
#       -DTEST_EXE=… -DVERIFY_EXE=… -DWORK_DIR=… -P check_stubs.cmake
#
# Proves that lab NN's pristine learner stubs fail every learner test and the verify program with a
# "TODO(lab " message: nothing passes, nothing crashes, nothing fails for another reason.
# Once a learner has edited the lab's files the check no longer applies and is skipped. It builds
# the lab's learner programs itself (the test workflow's build leaves the learner's code alone, so
# that a lab in progress, even one that does not compile, never fails it); if that build fails in
# a prerequisite lab the learner has edited (PREREQUISITE_FILES), the check is skipped too.
cmake_minimum_required(VERSION 3.25)

find_package(Git QUIET)
# The pristine stubs are origin/HEAD's in a learner's clone (their own commits may hold their
# work), HEAD's where there is no origin: as pristine_ref in workbench/runner/workspace.cpp.
set(pristine HEAD)
if(GIT_FOUND AND EXISTS "${SOURCE_DIR}/.git")
  execute_process(COMMAND "${GIT_EXECUTABLE}" -C "${SOURCE_DIR}" rev-parse --verify --quiet origin/HEAD
                  RESULT_VARIABLE no_origin OUTPUT_QUIET ERROR_QUIET)
  if(no_origin EQUAL 0)
    set(pristine origin/HEAD)
  endif()
endif()
# True in VAR if FILES differ from the pristine ones (never without git: a tarball is pristine).
function(edited var)
  set(${var} FALSE PARENT_SCOPE)
  if(GIT_FOUND AND EXISTS "${SOURCE_DIR}/.git" AND ARGN)
    execute_process(COMMAND "${GIT_EXECUTABLE}" -C "${SOURCE_DIR}" diff --quiet ${pristine} -- ${ARGN}
                    RESULT_VARIABLE differs OUTPUT_QUIET ERROR_QUIET)
    if(NOT differs EQUAL 0)
      set(${var} TRUE PARENT_SCOPE)
    endif()
  endif()
endfunction()

edited(own ${LEARNER_FILES})
if(own)
  message("lab ${LAB}: ${LEARNER_FILES} differ from the committed stubs; pristine-stub check skipped")
  return()
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" --build "${BUILD_DIR}" --target lab${LAB}-learner
                RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE output)
if(NOT status EQUAL 0)
  edited(prerequisites ${PREREQUISITE_FILES})
  if(prerequisites)
    message("lab ${LAB}: its learner programs do not build, and the labs it builds on are edited; "
            "pristine-stub check skipped")
    return()
  endif()
  message(FATAL_ERROR "lab ${LAB}: the pristine stubs do not build:\n${output}")
endif()

set(failures "")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

# 1. Every learner test runs, fails, and says TODO.
set(report "${WORK_DIR}/tests.json")
execute_process(COMMAND "${TEST_EXE}" --gtest_output=json:${report}
                RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE output)
if(NOT status MATCHES "^[0-9]+$")
  list(APPEND failures "test-lab${LAB}-learner crashed (${status})")
elseif(NOT EXISTS "${report}")
  list(APPEND failures "test-lab${LAB}-learner wrote no report (exit ${status})")
else()
  file(READ "${report}" json)
  string(JSON n_tests GET "${json}" tests)
  if(n_tests EQUAL 0)
    list(APPEND failures "test-lab${LAB}-learner has no tests")
  endif()
  string(JSON n_suites LENGTH "${json}" testsuites)
  math(EXPR last_suite "${n_suites} - 1")
  foreach(s RANGE ${last_suite})
    string(JSON suite GET "${json}" testsuites ${s} name)
    string(JSON n_cases LENGTH "${json}" testsuites ${s} testsuite)
    math(EXPR last_case "${n_cases} - 1")
    foreach(c RANGE ${last_case})
      string(JSON name GET "${json}" testsuites ${s} testsuite ${c} name)
      string(JSON messages ERROR_VARIABLE no_failures GET "${json}" testsuites ${s} testsuite ${c} failures)
      if(no_failures)
        list(APPEND failures "${suite}.${name} passes on the pristine stubs")
      elseif(NOT messages MATCHES "TODO\\(lab ")
        list(APPEND failures "${suite}.${name} fails without a TODO message: ${messages}")
      endif()
    endforeach()
  endforeach()
  message("lab ${LAB}: ${n_tests} learner tests checked")
endif()

# 2. The verify program stops with the TODO message and a non-zero status.
execute_process(COMMAND "${VERIFY_EXE}" --out "${WORK_DIR}/verify"
                RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE output)
if(NOT status MATCHES "^[0-9]+$")
  list(APPEND failures "verify-lab${LAB}-learner crashed (${status})")
elseif(status EQUAL 0 OR NOT output MATCHES "TODO\\(lab ")
  list(APPEND failures "verify-lab${LAB}-learner exited ${status} without a TODO message: ${output}")
endif()

if(failures)
  list(JOIN failures "\n  " text)
  message(FATAL_ERROR "lab ${LAB}: the pristine stubs do not all fail with TODO:\n  ${text}")
endif()
message("lab ${LAB}: every pristine stub fails with its TODO message")
