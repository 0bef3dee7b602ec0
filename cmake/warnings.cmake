# Warnings for minimodel's own code only: linked PRIVATE, never put in global flags.
add_library(minimodel_warnings INTERFACE)
target_compile_options(minimodel_warnings INTERFACE -Wall -Wextra -Wpedantic -Wshadow -Wconversion
                                                    -Wno-sign-conversion)
if(MINIMODEL_WARNINGS_AS_ERRORS)
  target_compile_options(minimodel_warnings INTERFACE -Werror)
endif()

# xtensor + xtensor-blas on OpenBLAS: everything that touches tensors links this.
add_library(minimodel_tensor INTERFACE)
target_link_libraries(minimodel_tensor INTERFACE xtensor xtensor-blas xsimd BLAS::BLAS)
if(MINIMODEL_NATIVE)
  target_compile_options(minimodel_tensor INTERFACE -march=native)
endif()
