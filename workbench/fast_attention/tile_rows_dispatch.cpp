// The choice among tile_rows.cpp's copies, made once when the program starts, at namespace scope
// as the reference's simd_dispatch.cpp does (it says why: xsimd's cpuid under a hypervisor).
#include "fast_attention/tile_rows.hpp"

namespace minimodel::fast {
namespace {

auto dispatched_online_softmax_rows = xsimd::dispatch<simd::Archs>(OnlineSoftmaxRows{});

}  // namespace

void online_softmax_rows(const TileRows& tile, float scale) {
  dispatched_online_softmax_rows(tile, scale);
}

}  // namespace minimodel::fast
