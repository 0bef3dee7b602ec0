# The labs, from their registry labs/labs.json: every lab's targets and tests are made in a loop
# over it, so adding a lab never means editing a CMake file.

# minimodel_discover_tests(TARGET PREFIX LABELS [FIXTURE])
#
# gtest_discover_tests, with every discovered test labelled LABELS (and requiring FIXTURE, if
# given). (Its own PROPERTIES option flattens a list of labels into separate arguments, so the
# properties are set by a script of ours that ctest includes after the discovered tests.)
# With MINIMODEL_TEST_PER_CASE off, one ctest test PREFIX"all" runs the whole program instead, its
# tests in a random order (--gtest_shuffle), so that none depends on what ran before it.
function(minimodel_discover_tests target prefix labels)
  if(NOT MINIMODEL_TEST_PER_CASE)
    add_test(NAME ${prefix}all COMMAND ${target} --gtest_brief=1 --gtest_shuffle)
    set_tests_properties(${prefix}all PROPERTIES LABELS "${labels}")
    if(ARGC GREATER 3)
      set_tests_properties(${prefix}all PROPERTIES FIXTURES_REQUIRED ${ARGV3})
    endif()
    return()
  endif()
  gtest_discover_tests(${target} TEST_PREFIX "${prefix}" DISCOVERY_MODE PRE_TEST TEST_LIST ${target}_tests)
  set(properties "LABELS \"${labels}\"")
  if(ARGC GREATER 3)
    string(APPEND properties " FIXTURES_REQUIRED ${ARGV3}")
  endif()
  set(script ${PROJECT_BINARY_DIR}/labels/${target}.cmake)
  file(WRITE ${script} "set_tests_properties(\${${target}_tests} PROPERTIES ${properties})\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${script})  # after the discovery
endfunction()

# minimodel_json_strings(VAR JSON PATH...)
#
# Sets VAR to the strings of the JSON array at PATH in JSON, as a list; empty if the array is
# empty or missing.
function(minimodel_json_strings var json)
  set(strings "")
  string(JSON n ERROR_VARIABLE missing LENGTH "${json}" ${ARGN})
  if(NOT missing AND n GREATER 0)
    math(EXPR last "${n} - 1")
    foreach(j RANGE ${last})
      string(JSON item GET "${json}" ${ARGN} ${j})
      list(APPEND strings ${item})
    endforeach()
  endif()
  set(${var} ${strings} PARENT_SCOPE)
endfunction()

# minimodel_read_registry(JSON_FILE)
#
# Sets, in the caller's scope: MINIMODEL_LABS (the lab numbers in order) and, for each lab NN,
# MINIMODEL_LAB_NN_SLUG, MINIMODEL_LAB_NN_PREREQUISITES, MINIMODEL_LAB_NN_LEARNER_FILES,
# MINIMODEL_LAB_NN_REFERENCE_FILES (each split into MINIMODEL_LAB_NN_{LEARNER,REFERENCE}_CODE and
# _TESTS, the tests a learner writes), MINIMODEL_LAB_NN_LIBRARIES, MINIMODEL_LAB_NN_VERIFY_LIBRARIES and
# MINIMODEL_LAB_NN_{TESTS,VERIFY,EXPERIMENT,MUTANTS} (paths from the registry's "layout" patterns).
function(minimodel_read_registry json_file)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${json_file})
  file(READ ${json_file} registry)
  string(JSON learner_root GET "${registry}" layout learner_root)
  string(JSON reference_root GET "${registry}" layout reference_root)
  string(JSON n_labs LENGTH "${registry}" labs)
  set(numbers "")
  math(EXPR last "${n_labs} - 1")
  foreach(i RANGE ${last})
    string(JSON number GET "${registry}" labs ${i} number)
    string(JSON slug GET "${registry}" labs ${i} slug)
    list(APPEND numbers ${number})
    set(MINIMODEL_LAB_${number}_SLUG ${slug} PARENT_SCOPE)
    foreach(kind IN ITEMS tests verify experiment mutants)
      string(JSON pattern GET "${registry}" layout ${kind})
      string(REPLACE "{number}" "${number}" path "${pattern}")
      string(REPLACE "{slug}" "${slug}" path "${path}")
      string(TOUPPER ${kind} KIND)
      set(MINIMODEL_LAB_${number}_${KIND} ${path} PARENT_SCOPE)
    endforeach()
    string(JSON n_files LENGTH "${registry}" labs ${i} learner_files)
    set(learner "")
    set(reference "")
    math(EXPR last_file "${n_files} - 1")
    foreach(j RANGE ${last_file})
      string(JSON file GET "${registry}" labs ${i} learner_files ${j})
      list(APPEND learner ${file})
      string(REGEX REPLACE "^${learner_root}" "${reference_root}" reference_file "${file}")
      list(APPEND reference ${reference_file})
    endforeach()
    minimodel_json_strings(prerequisites "${registry}" labs ${i} prerequisites)
    set(MINIMODEL_LAB_${number}_PREREQUISITES ${prerequisites} PARENT_SCOPE)
    # Optional: libraries the lab's code may use beyond its prerequisites' (lab 07's SIMD loops).
    minimodel_json_strings(libraries "${registry}" labs ${i} libraries)
    set(MINIMODEL_LAB_${number}_LIBRARIES ${libraries} PARENT_SCOPE)
    # Optional: infrastructure the lab's verify program uses beyond lab_setup (lab 10's checkpoints).
    minimodel_json_strings(verify_libraries "${registry}" labs ${i} verify_libraries)
    set(MINIMODEL_LAB_${number}_VERIFY_LIBRARIES ${verify_libraries} PARENT_SCOPE)
    # Optional: the numbers of MPI ranks a lab's programs run on (lab 14's); such a lab links MPI.
    minimodel_json_strings(ranks "${registry}" labs ${i} ranks)
    set(MINIMODEL_LAB_${number}_RANKS ${ranks} PARENT_SCOPE)
    set(MINIMODEL_LAB_${number}_LEARNER_FILES ${learner} PARENT_SCOPE)
    set(MINIMODEL_LAB_${number}_REFERENCE_FILES ${reference} PARENT_SCOPE)
    # A learner file named *_test.cpp is a test the learner writes: it goes into the lab's test
    # program, the others into the lab's library.
    foreach(impl IN ITEMS learner reference)
      set(files ${${impl}})
      set(tests ${files})
      list(FILTER tests INCLUDE REGEX "_test\\.cpp$")
      list(FILTER files EXCLUDE REGEX "_test\\.cpp$")
      string(TOUPPER ${impl} IMPL)
      set(MINIMODEL_LAB_${number}_${IMPL}_CODE ${files} PARENT_SCOPE)
      set(MINIMODEL_LAB_${number}_${IMPL}_TESTS ${tests} PARENT_SCOPE)
    endforeach()
  endforeach()
  set(MINIMODEL_LABS ${numbers} PARENT_SCOPE)
endfunction()

# minimodel_lab_code(NN)
#
# Lab NN's code in each implementation: minimodel_{learner,reference}_labNN, a library of the lab's
# files that links its prerequisites' libraries, and is part of minimodel_{learner,reference}.
function(minimodel_lab_code number)
  foreach(impl IN ITEMS learner reference)
    string(TOUPPER ${impl} IMPL)
    set(library minimodel_${impl}_lab${number})
    set(sources "")
    foreach(file IN LISTS MINIMODEL_LAB_${number}_${IMPL}_CODE)
      if(EXISTS ${PROJECT_SOURCE_DIR}/${file})
        list(APPEND sources ${PROJECT_SOURCE_DIR}/${file})
      else()
        message(STATUS "lab ${number}: ${file} does not exist yet (workbook dev-check lists what it lacks)")
      endif()
    endforeach()
    set(prerequisites "")
    foreach(prerequisite IN LISTS MINIMODEL_LAB_${number}_PREREQUISITES)
      list(APPEND prerequisites minimodel_${impl}_lab${prerequisite})
    endforeach()
    if(sources)
      add_library(${library} STATIC ${sources})
      target_link_libraries(${library} PUBLIC minimodel_api minimodel_tensor minimodel_${impl}_name
                                              ${prerequisites}
                                       PRIVATE minimodel_warnings ${MINIMODEL_LAB_${number}_LIBRARIES})
      minimodel_precompiled_headers(${library} code)
    else()  # a lab being added: nothing to compile yet
      add_library(${library} INTERFACE)
      target_link_libraries(${library} INTERFACE minimodel_api ${prerequisites})
    endif()
    if(MINIMODEL_LAB_${number}_RANKS AND sources)  # its API takes an MPI communicator
      target_link_libraries(${library} PUBLIC MPI::MPI_CXX)
    elseif(MINIMODEL_LAB_${number}_RANKS)
      target_link_libraries(${library} INTERFACE MPI::MPI_CXX)
    endif()
    target_link_libraries(minimodel_${impl} INTERFACE ${library})
  endforeach()
  get_target_property(type minimodel_learner_lab${number} TYPE)
  if(type STREQUAL "STATIC_LIBRARY")  # the pristine stubs do not use their parameters yet
    target_compile_options(minimodel_learner_lab${number} PRIVATE -Wno-unused-parameter)
  endif()
endfunction()

# minimodel_mpi_lab_tests(NN IMPL)
#
# The tests of a lab whose registry entry lists "ranks" (lab 14's, over MPI): its whole test program
# once per number of ranks P, as labNN.IMPL.ranksP under `mpiexec -n P --oversubscribe` (the
# program's tests split MPI_COMM_WORLD into groups of 1, 2 and 4 ranks themselves), and its verify
# program on the largest P. Each has a time limit, so that a rank left waiting in a collective for
# one that failed never holds ctest up; OpenMPI's variables let it run as root (CI) and without the
# cross-memory copies a container may forbid. In the sanitizer builds each run takes tens of seconds
# (4 ranks at -O0 on 2 cores).
function(minimodel_mpi_lab_tests number impl)
  set(lab lab${number})
  set(environment OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
                  OMPI_MCA_btl_vader_single_copy_mechanism=none)
  if(MINIMODEL_SANITIZE)  # OpenMPI's leaks at exit are suppressed by library (tests/lsan-suppressions.txt),
    list(APPEND environment ASAN_OPTIONS=fast_unwind_on_malloc=0)  # whose frames need this unwinder
  endif()
  if(impl STREQUAL "learner")
    set(labels "learner;${lab}")
  else()
    set(labels "reference")
  endif()
  set(largest 1)
  foreach(ranks IN LISTS MINIMODEL_LAB_${number}_RANKS)
    set(test ${lab}.${impl}.ranks${ranks})
    add_test(NAME ${test} COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${ranks} --oversubscribe
                                  $<TARGET_FILE:test-${lab}-${impl}> --gtest_brief=1)
    set_tests_properties(${test} PROPERTIES LABELS "${labels}" TIMEOUT 120
                                            ENVIRONMENT "${environment}")
    if(impl STREQUAL "learner")
      set_tests_properties(${test} PROPERTIES FIXTURES_REQUIRED ${lab}_learner_built)
    endif()
    if(ranks GREATER largest)
      set(largest ${ranks})
    endif()
  endforeach()
  add_test(NAME ${lab}.${impl}.verify COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${largest}
                                              --oversubscribe $<TARGET_FILE:verify-${lab}-${impl}>)
  set_tests_properties(${lab}.${impl}.verify PROPERTIES TIMEOUT 300 ENVIRONMENT "${environment}")
endfunction()

# minimodel_lab(NN)
#
# For lab NN: its tests and verify program are compiled once (xtensor is slow to compile) and
# linked against each implementation, giving
#   bin/test-labNN-{learner,reference}    GoogleTest, ctest names labNN.<impl>.<Suite>.<Test>
#   bin/verify-labNN-{learner,reference}  the verify program, ctest name labNN.<impl>.verify
# Labels: a learner's tests carry "learner" and "labNN" (so `ctest --preset learner -L labNN`
# runs one lab's); the reference's carry "reference"; verify programs also "verify".
# labNN.reference.artifacts checks the reference's artifacts, and labNN.stubs (label "stubs")
# that the pristine learner stubs fail every learner test with a TODO message, without crashing.
# A lab whose tests or verify program do not exist yet gets no targets: `workbook dev-check`
# names what it lacks.
function(minimodel_lab number)
  set(lab lab${number})
  set(tests ${MINIMODEL_LAB_${number}_TESTS})
  set(verify ${MINIMODEL_LAB_${number}_VERIFY})
  foreach(file IN ITEMS ${tests} ${verify})
    if(NOT EXISTS ${PROJECT_SOURCE_DIR}/${file})
      message(STATUS "lab ${number}: no ${file} yet, so no targets (workbook dev-check lists what it lacks)")
      return()
    endif()
  endforeach()

  add_library(${lab}_test_objects OBJECT ${tests})
  target_link_libraries(${lab}_test_objects PUBLIC minimodel_test_support PRIVATE minimodel_warnings)
  minimodel_precompiled_headers(${lab}_test_objects tests)
  add_library(${lab}_verify_objects OBJECT ${verify})
  target_link_libraries(${lab}_verify_objects PUBLIC lab_setup ${MINIMODEL_LAB_${number}_VERIFY_LIBRARIES}
                                              PRIVATE minimodel_warnings minimodel_driver_code)
  minimodel_precompiled_headers(${lab}_verify_objects code)
  if(MINIMODEL_LAB_${number}_RANKS)
    target_link_libraries(${lab}_test_objects PUBLIC MPI::MPI_CXX)
    target_link_libraries(${lab}_verify_objects PUBLIC MPI::MPI_CXX)
  endif()
  # Its experiment folder, relative to the source tree (workbench::source_dir()).
  target_compile_definitions(${lab}_verify_objects PRIVATE
    MINIMODEL_EXPERIMENT_DIR="${MINIMODEL_LAB_${number}_EXPERIMENT}")

  foreach(impl IN ITEMS learner reference)
    string(TOUPPER ${impl} IMPL)
    add_executable(test-${lab}-${impl})
    target_link_libraries(test-${lab}-${impl} PRIVATE ${lab}_test_objects minimodel_${impl}_${lab}
                                                      GTest::gtest_main)
    # The tests the learner writes (lab 01's head-permutation test), in each implementation.
    if(MINIMODEL_LAB_${number}_${IMPL}_TESTS)
      list(TRANSFORM MINIMODEL_LAB_${number}_${IMPL}_TESTS PREPEND ${PROJECT_SOURCE_DIR}/
           OUTPUT_VARIABLE own_tests)
      add_library(${lab}_${impl}_own_tests OBJECT ${own_tests})
      target_link_libraries(${lab}_${impl}_own_tests PUBLIC minimodel_test_support
                                                     PRIVATE minimodel_warnings)
      minimodel_precompiled_headers(${lab}_${impl}_own_tests tests)
      target_link_libraries(test-${lab}-${impl} PRIVATE ${lab}_${impl}_own_tests)
    endif()
    add_executable(verify-${lab}-${impl})
    target_link_libraries(verify-${lab}-${impl} PRIVATE ${lab}_verify_objects minimodel_${impl}_${lab})
    if(MINIMODEL_LAB_${number}_RANKS)
      minimodel_mpi_lab_tests(${number} ${impl})
    else()
      add_test(NAME ${lab}.${impl}.verify COMMAND verify-${lab}-${impl})
    endif()
  endforeach()
  if(NOT MINIMODEL_LAB_${number}_RANKS)
    minimodel_discover_tests(test-${lab}-learner "${lab}.learner." "learner;${lab}"
                             "${lab}_learner_built")
    minimodel_discover_tests(test-${lab}-reference "${lab}.reference." "reference")
  endif()
  add_dependencies(reference-checks test-${lab}-reference verify-${lab}-reference)
  add_dependencies(test-workbook-runner verify-${lab}-reference)  # its VerifyOutputs tests run it
  # What the workbook verbs build: labNN-learner, a lab's learner programs, and learner, every
  # lab's, which make brings up to date in one pass (it walks the shared libraries once, not once
  # per program: 3 s instead of 9 for labs 00–04).
  add_custom_target(${lab}-learner)
  add_dependencies(${lab}-learner test-${lab}-learner verify-${lab}-learner)
  if(NOT TARGET learner)
    add_custom_target(learner)
  endif()
  add_dependencies(learner ${lab}-learner)
  set_tests_properties(${lab}.learner.verify PROPERTIES LABELS "learner;${lab};verify"
                       FIXTURES_REQUIRED ${lab}_learner_built)
  # A learner's tests and verify program always run the current code: ctest rebuilds them first
  # (one build at a time), and skips them if the build fails, so no stale program writes a
  # learner's artifacts.
  add_test(NAME ${lab}.learner.build
           COMMAND ${CMAKE_COMMAND} --build ${PROJECT_BINARY_DIR} --target ${lab}-learner)
  set_tests_properties(${lab}.learner.build PROPERTIES LABELS "learner;${lab}"
                       FIXTURES_SETUP ${lab}_learner_built RESOURCE_LOCK build_tree)
  # Verify programs are the longest tests (lab 10's trains a model): ctest starts them first, so
  # that the unit tests fill the other cores beside them instead of waiting on them at the end.
  set_tests_properties(${lab}.reference.verify PROPERTIES LABELS "reference;verify" COST 60)

  # The reference's artifacts, in the folder its verify program just wrote. A lab whose real run
  # is long sets MINIMODEL_LAB_NN_SHORT_RUN (the subfolder its short runs write into): ctest runs
  # its verify programs in their short mode (MINIMODEL_VERIFY_SHORT=1).
  set(reference_run ${PROJECT_SOURCE_DIR}/${MINIMODEL_LAB_${number}_EXPERIMENT}/reference)
  if(MINIMODEL_LAB_${number}_SHORT_RUN)
    set_tests_properties(${lab}.learner.verify ${lab}.reference.verify
                         PROPERTIES ENVIRONMENT MINIMODEL_VERIFY_SHORT=1)
    set(reference_run ${reference_run}/${MINIMODEL_LAB_${number}_SHORT_RUN})
  endif()
  set_tests_properties(${lab}.reference.verify PROPERTIES FIXTURES_SETUP ${lab}_reference_artifacts)
  add_test(NAME ${lab}.reference.artifacts COMMAND check-artifacts ${reference_run})
  set_tests_properties(${lab}.reference.artifacts PROPERTIES LABELS "reference"
                       FIXTURES_REQUIRED ${lab}_reference_artifacts)

  set(prerequisite_files "")
  foreach(prerequisite IN LISTS MINIMODEL_LAB_${number}_PREREQUISITES)
    list(APPEND prerequisite_files ${MINIMODEL_LAB_${prerequisite}_LEARNER_FILES})
  endforeach()
  add_test(NAME ${lab}.stubs
           COMMAND ${CMAKE_COMMAND} -DLAB=${number} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
                   -DBUILD_DIR=${PROJECT_BINARY_DIR}
                   "-DLEARNER_FILES=${MINIMODEL_LAB_${number}_LEARNER_FILES}"
                   "-DPREREQUISITE_FILES=${prerequisite_files}"
                   -DTEST_EXE=$<TARGET_FILE:test-${lab}-learner>
                   -DVERIFY_EXE=$<TARGET_FILE:verify-${lab}-learner>
                   -DWORK_DIR=${PROJECT_BINARY_DIR}/stub-check/${lab}
                   -P ${PROJECT_SOURCE_DIR}/cmake/check_stubs.cmake)
  set_tests_properties(${lab}.stubs PROPERTIES LABELS "stubs" RESOURCE_LOCK build_tree
                       SKIP_REGULAR_EXPRESSION "pristine-stub check skipped")
endfunction()

# minimodel_lab_mutants(NN)
#
# Lab NN's mutants, from its catalogue (labs/mutants/NN-slug.json): each is the reference with one
# change ("replace" becomes "with"), written at configure time to BUILD/mutants/labNN/NAME/, and
# built only when asked, into
#   bin/test-labNN-mutant-NAME    the lab's tests on the mutated reference
#   bin/verify-labNN-mutant-NAME  its verify program (`workbook break NN NAME` passes --out)
# The lab's test and verify objects are the ones its other programs use, so a mutant costs one
# compile (at -O1: 10–25% less time than -O3, the same float arithmetic) and two links. The target
# labNN-mutants builds the lab's test programs, mutants every lab's (`workbook dev-check`). A change
# that does not occur exactly once in the reference makes no targets: dev-check names it.
function(minimodel_lab_mutants number)
  set(catalogue ${PROJECT_SOURCE_DIR}/${MINIMODEL_LAB_${number}_MUTANTS})
  if(NOT EXISTS ${catalogue} OR NOT TARGET lab${number}_test_objects)
    return()
  endif()
  set(references "")
  foreach(file IN LISTS MINIMODEL_LAB_${number}_REFERENCE_CODE)
    list(APPEND references ${PROJECT_SOURCE_DIR}/${file})
  endforeach()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${catalogue} ${references})
  file(READ ${catalogue} json)
  string(JSON n_mutants LENGTH "${json}" mutants)
  if(n_mutants EQUAL 0)
    return()
  endif()
  set(prerequisites "")
  foreach(prerequisite IN LISTS MINIMODEL_LAB_${number}_PREREQUISITES)
    list(APPEND prerequisites minimodel_reference_lab${prerequisite})
  endforeach()
  add_custom_target(lab${number}-mutants)
  math(EXPR last "${n_mutants} - 1")
  foreach(i RANGE ${last})
    string(JSON name GET "${json}" mutants ${i} name)
    string(JSON replace GET "${json}" mutants ${i} replace)
    string(JSON with GET "${json}" mutants ${i} with)
    set(dir ${PROJECT_BINARY_DIR}/mutants/lab${number}/${name})
    set(sources "")
    set(applied 0)
    foreach(file IN LISTS MINIMODEL_LAB_${number}_REFERENCE_CODE)
      file(READ ${PROJECT_SOURCE_DIR}/${file} text)
      string(FIND "${text}" "${replace}" first)
      string(FIND "${text}" "${replace}" final REVERSE)
      if(first GREATER -1 AND first EQUAL final)
        string(REPLACE "${replace}" "${with}" text "${text}")
        math(EXPR applied "${applied} + 1")
      elseif(first GREATER -1)
        math(EXPR applied "${applied} + 2")  # more than once
      endif()
      get_filename_component(filename ${file} NAME)
      set(source ${dir}/${filename})
      set(old "")
      if(EXISTS ${source})
        file(READ ${source} old)
      endif()
      if(NOT old STREQUAL text)  # unchanged files keep their time stamp: no rebuild
        file(WRITE ${source} "${text}")
      endif()
      list(APPEND sources ${source})
    endforeach()
    if(NOT applied EQUAL 1)
      message(STATUS "lab ${number}: mutant ${name}'s change does not occur exactly once in the reference (workbook dev-check)")
      continue()
    endif()
    set(code mutant_lab${number}_${name})
    add_library(${code} OBJECT EXCLUDE_FROM_ALL ${sources})
    target_link_libraries(${code} PUBLIC minimodel_api minimodel_tensor minimodel_mutant_name ${prerequisites}
                                         ${MINIMODEL_LAB_${number}_LIBRARIES})
    if(MINIMODEL_LAB_${number}_RANKS)
      target_link_libraries(${code} PUBLIC MPI::MPI_CXX)
    endif()
    # No minimodel_warnings: a mutant's leftovers (an unused `scale`) are the bug, not a defect.
    target_compile_options(${code} PRIVATE $<$<CONFIG:Release>:-O1>)
    foreach(kind IN ITEMS test verify)
      set(program ${kind}-lab${number}-mutant-${name})
      add_executable(${program} EXCLUDE_FROM_ALL)
      target_link_libraries(${program} PRIVATE lab${number}_${kind}_objects ${code})
    endforeach()
    target_link_libraries(test-lab${number}-mutant-${name} PRIVATE GTest::gtest_main)
    if(TARGET lab${number}_reference_own_tests)  # the reference's twin of a test the learner writes…
      target_link_libraries(test-lab${number}-mutant-${name} PRIVATE lab${number}_reference_own_tests)
      # …and the learner's own, alone, which `workbook break` also runs on the mutant.
      add_executable(test-lab${number}-mutant-${name}-yours EXCLUDE_FROM_ALL)
      target_link_libraries(test-lab${number}-mutant-${name}-yours PRIVATE lab${number}_learner_own_tests
                                                                         ${code} GTest::gtest_main)
    endif()
    add_dependencies(lab${number}-mutants test-lab${number}-mutant-${name})
  endforeach()
  if(NOT TARGET mutants)
    add_custom_target(mutants)
  endif()
  add_dependencies(mutants lab${number}-mutants)
endfunction()
