# Warnings for minimodel's own code only: linked PRIVATE, never put in global flags.
add_library(minimodel_warnings INTERFACE)
target_compile_options(minimodel_warnings INTERFACE -Wall -Wextra -Wpedantic -Wshadow -Wconversion
                                                    -Wno-sign-conversion)
if(MINIMODEL_WARNINGS_AS_ERRORS)
  target_compile_options(minimodel_warnings INTERFACE -Werror)
endif()

# The code that drives the labs' code (tests, verify programs, the workbook's infrastructure) compiles
# at -O1 in a Release build, in about 70% of -O3's time: it checks, prints and draws, and runs as
# fast either way. The labs' code, which the tests, benchmarks and training time, and the engines
# that run it (attend, bench, generate) keep the build type's -O3. Linked PRIVATE.
add_library(minimodel_driver_code INTERFACE)
target_compile_options(minimodel_driver_code INTERFACE $<$<CONFIG:Release>:-O1>)

# xtensor + xtensor-blas on OpenBLAS: everything that touches tensors links this.
add_library(minimodel_tensor INTERFACE)
target_link_libraries(minimodel_tensor INTERFACE xtensor xtensor-blas xsimd BLAS::BLAS)
if(MINIMODEL_NATIVE)
  target_compile_options(minimodel_tensor INTERFACE -march=native)
endif()
