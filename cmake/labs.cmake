# minimodel_discover_tests(TARGET PREFIX LABELS)
#
# gtest_discover_tests, with every discovered test labelled LABELS. (Its own PROPERTIES option
# flattens a list of labels into separate arguments, so the labels are set by a script of ours
# that ctest includes after the discovered tests.)
function(minimodel_discover_tests target prefix labels)
  gtest_discover_tests(${target} TEST_PREFIX "${prefix}" DISCOVERY_MODE PRE_TEST TEST_LIST ${target}_tests)
  set(script ${PROJECT_BINARY_DIR}/labels/${target}.cmake)
  file(WRITE ${script} "set_tests_properties(\${${target}_tests} PROPERTIES LABELS \"${labels}\")\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${script})  # after the discovery
endfunction()

# minimodel_lab(NN SLUG LEARNER_FILE...)
#
# For lab NN: tests/labNN_test.cpp and verify/labNN_verify.cpp are compiled once (xtensor is slow
# to compile) and linked against each implementation, giving
#   bin/test-labNN-{learner,reference}    GoogleTest, ctest names labNN.<impl>.<Suite>.<Test>
#   bin/verify-labNN-{learner,reference}  the verify program, ctest name labNN.<impl>.verify
# with ctest labels <impl> and labNN, plus labNN.stubs (label "stubs"): the pristine learner
# stubs must fail every learner test with a TODO message, without crashing.
function(minimodel_lab number slug)
  set(lab lab${number})
  set(learner_files ${ARGN})

  add_library(${lab}_test_objects OBJECT tests/${lab}_test.cpp)
  target_link_libraries(${lab}_test_objects PUBLIC minimodel_test_support PRIVATE minimodel_warnings)
  add_library(${lab}_verify_objects OBJECT verify/${lab}_verify.cpp)
  target_link_libraries(${lab}_verify_objects PUBLIC workbench PRIVATE minimodel_warnings)
  target_include_directories(${lab}_verify_objects PRIVATE src)

  foreach(impl IN ITEMS learner reference)
    add_executable(test-${lab}-${impl})
    target_link_libraries(test-${lab}-${impl} PRIVATE ${lab}_test_objects minimodel_${impl} GTest::gtest_main)
    minimodel_discover_tests(test-${lab}-${impl} "${lab}.${impl}." "${impl};${lab}")

    add_executable(verify-${lab}-${impl})
    target_link_libraries(verify-${lab}-${impl} PRIVATE ${lab}_verify_objects workbench minimodel_${impl})
    add_test(NAME ${lab}.${impl}.verify COMMAND verify-${lab}-${impl})
    set_tests_properties(${lab}.${impl}.verify PROPERTIES LABELS "${impl};${lab};verify")
  endforeach()

  # The reference's artifacts, in the folder its verify program just wrote.
  set_tests_properties(${lab}.reference.verify PROPERTIES FIXTURES_SETUP ${lab}_reference_artifacts)
  add_test(NAME ${lab}.reference.artifacts
           COMMAND check-artifacts ${PROJECT_SOURCE_DIR}/experiments/${number}-${slug}/reference)
  set_tests_properties(${lab}.reference.artifacts PROPERTIES LABELS "reference;${lab}"
                       FIXTURES_REQUIRED ${lab}_reference_artifacts)

  add_test(NAME ${lab}.stubs
           COMMAND ${CMAKE_COMMAND} -DLAB=${number} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
                   "-DLEARNER_FILES=${learner_files}"
                   -DTEST_EXE=$<TARGET_FILE:test-${lab}-learner>
                   -DVERIFY_EXE=$<TARGET_FILE:verify-${lab}-learner>
                   -DWORK_DIR=${PROJECT_BINARY_DIR}/stub-check/${lab}
                   -P ${PROJECT_SOURCE_DIR}/cmake/check_stubs.cmake)
  set_tests_properties(${lab}.stubs PROPERTIES LABELS "stubs;${lab}"
                       SKIP_REGULAR_EXPRESSION "pristine-stub check skipped")
endfunction()
