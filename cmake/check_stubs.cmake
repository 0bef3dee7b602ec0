# cmake -DLAB=NN -DSOURCE_DIR=… -DLEARNER_FILES=a;b -DTEST_EXE=… -DVERIFY_EXE=… -DWORK_DIR=…
#       -P check_stubs.cmake
#
# Proves that lab NN's pristine learner stubs fail every learner test and the verify program with a
# "TODO(lab " message: nothing passes, nothing crashes, nothing fails for another reason.
# Once a learner has edited the lab's files the check no longer applies and is skipped.
cmake_minimum_required(VERSION 3.25)

find_package(Git QUIET)
if(GIT_FOUND AND EXISTS "${SOURCE_DIR}/.git")
  execute_process(COMMAND "${GIT_EXECUTABLE}" -C "${SOURCE_DIR}" diff --quiet HEAD -- ${LEARNER_FILES}
                  RESULT_VARIABLE edited OUTPUT_QUIET ERROR_QUIET)
  if(NOT edited EQUAL 0)
    message("lab ${LAB}: ${LEARNER_FILES} differ from the committed stubs; pristine-stub check skipped")
    return()
  endif()
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
