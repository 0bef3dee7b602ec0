# Precompiled headers, for the maintainers' sanitizer build (MINIMODEL_PRECOMPILE_HEADERS, set by
# the sanitize preset): at -O0 clang spends 2–3 s of every file parsing xtensor, xtensor-blas,
# nlohmann_json and GoogleTest, a third of a test file's time. Two sets, each compiled once and
# reused by every target: "code" for the labs' code and verify programs, "tests" (code + GoogleTest)
# for the tests. Learners' builds (-O3, a few files rebuilt at a time) compile without them.

if(MINIMODEL_PRECOMPILE_HEADERS)
  set(code_headers <xtensor/xarray.hpp> <xtensor/xtensor.hpp> <xtensor/xview.hpp> <xtensor/xmath.hpp>
                   <xtensor/xrandom.hpp> <xtensor-blas/xlinalg.hpp> <nlohmann/json.hpp>)
  file(CONFIGURE OUTPUT generated/precompiled_headers.cpp CONTENT "// only the headers\n")
  foreach(set IN ITEMS code tests)
    add_library(minimodel_pch_${set} OBJECT ${PROJECT_BINARY_DIR}/generated/precompiled_headers.cpp)
    target_link_libraries(minimodel_pch_${set} PRIVATE minimodel_tensor nlohmann_json::nlohmann_json
                                                       minimodel_warnings)
    target_precompile_headers(minimodel_pch_${set} PRIVATE ${code_headers})
  endforeach()
  target_link_libraries(minimodel_pch_tests PRIVATE GTest::gtest)
  target_precompile_headers(minimodel_pch_tests PRIVATE <gtest/gtest.h>)
endif()

# minimodel_precompiled_headers(TARGET SET)
#
# TARGET's files include the headers of SET ("code" or "tests") precompiled, if
# MINIMODEL_PRECOMPILE_HEADERS is on. A file that includes OpenBLAS's <cblas.h>, whose declarations
# clash with xtensor-blas's, is compiled without them.
function(minimodel_precompiled_headers target set)
  if(NOT MINIMODEL_PRECOMPILE_HEADERS)
    return()
  endif()
  target_precompile_headers(${target} REUSE_FROM minimodel_pch_${set})
  get_target_property(sources ${target} SOURCES)
  foreach(source IN LISTS sources)
    file(STRINGS ${source} cblas REGEX "#include <cblas.h>")
    if(cblas)
      set_source_files_properties(${source} TARGET_DIRECTORY ${target} PROPERTIES
                                  SKIP_PRECOMPILE_HEADERS ON)
    endif()
  endforeach()
endfunction()
