#pragma once
// The tuned rung of lab 07's ladder (STYLE.md, "Kernels"): the same two efficient_forward as the
// plain reference in solutions/minimodel/attention/efficient_attention.cpp, equal to them to 1e-6
// (tests/fast_attention_test.cpp checks it), each step a little faster. `workbook bench` times it
// as the row "lab07_tuned" beside the plain reference, and `workbook attend --impl reference` runs
// it. What it adds over the plain reference, one idea at a time:
//   1. Workspaces kept across calls (thread_local): after a first call at the largest shape, a call
//      allocates its output alone.
//   2. Heads in groups whose keys and values fit in 16 MiB, queries projected one block of rows at
//      a time: scratch O(block · d_model) per thread beyond one group's keys and values, 17 MiB at
//      T = 16384, d_model 512, where the plain reference keeps four (T, d_model) buffers.
//   3. Threads over blocks of query rows, last block first (a causal block costs more the later it
//      is); for lab 06's layer, heads on threads.
//   4. A causal block of queries reads only the keys up to its last query (tile_kernel.hpp's
//      first_query), so it never even reaches the skipped tiles.
// The kernel itself is tile_kernel.cpp, the lab's Block B with step 4 offset by first_query, and
//   5. K stored transposed once per call (kᵀ, as the score product reads it), the tile products
//      libxsmm's small-GEMM kernels that read their operands in place (issue 28): OpenBLAS no
//      longer repacks them every tile, nor attend_tiles K for every block of queries.
//   6. Tiles from this machine's L2 (machine_tiles), and step 5 of a tile without masks in one
//      vectorised pass per row (tile_rows.hpp).
//
// Threads and OpenBLAS: these functions run on `threads` threads of their own (the caller's
// included) and call OpenBLAS from each. They never read or change OpenBLAS's process-wide thread
// count: their GEMMs run on whatever count the process set. With threads > 1, set OpenBLAS to one
// thread (openblas_set_num_threads(1), or OPENBLAS_NUM_THREADS=1) first, or OpenBLAS's threads
// and these compete for the cores; `workbook bench` and `workbook attend` do that around the call.
// Two callers on two threads may call them at once: each has its own workspace.
#include <cstddef>
#include <optional>

#include "minimodel/attention/cross_attention.hpp"
#include "minimodel/attention/efficient_attention.hpp"

namespace minimodel::fast {

/// How the tuned path runs: the tiles of its kernel, and how many threads of its own it uses.
struct FastOptions {
  std::optional<Tiles> tiles;  ///< none: machine_tiles(d_head), chosen from this CPU's L2
  std::size_t threads = 1;     ///< at least 1; OpenBLAS's count is the caller's business (above)
  /// Lab 01's layer: the keys and values of a group of heads take at most this many bytes (at
  /// least one head a group): every head at once for the shapes of `workbook bench`, two at a time
  /// at T = 16384, d_head 64. Tests lower it to make groups of small shapes.
  std::size_t key_value_bytes = std::size_t{16} << 20;
  /// Issue 28's bounds (`bench-reference --bounds`), nothing else: `projections` runs the four
  /// GEMMs alone (the context stays whatever the workspace held: y is not the layer's output),
  /// `core` runs the attention alone (attend_tiles on whatever queries, keys and values the
  /// workspace holds: make a whole call first). Lab 06's layer ignores it.
  enum class Part { whole, projections, core };
  Part part = Part::whole;
};

/// The tiles of heads of d_head columns on this machine (issue 28: from its caches, not a constant
/// tuned on another CPU): the largest queries x keys, each 32, 64 or 128, whose step's working
/// set fits a quarter of a core's L2 cache (the rest holds the head's keys and values, which every
/// block of queries reads again): the query block and its output (2 · queries · d_head floats),
/// the packed key panel and the value rows (2 · keys · d_head), the scores (queries · keys); more
/// keys than queries where they tie. L2 from sysconf(_SC_LEVEL2_CACHE_SIZE), else
/// /sys/devices/system/cpu/cpu0/cache; if neither says, lab 07's 64 x 64. At d_head 64: 32 x 64
/// with 256 KiB, 64 x 128 with 512 KiB (issue 28's Zen 3), 128 x 128 with 1 MiB (a Zen 4).
Tiles machine_tiles(std::size_t d_head);

/// A core's L2 cache in bytes, as machine_tiles reads it; 0 if the machine does not say.
std::size_t l2_cache_bytes();

/// Lab 07's efficient_forward for lab 01's layer, tuned: x (B, T, d_model) -> (B, T, d_model),
/// equal to minimodel::efficient_forward(layer, x, causal, tiles), tiles = options.tiles or
/// machine_tiles(d_head).
/// @throws std::invalid_argument if x is not (·, ·, d_model), a tile size is 0 or threads is 0.
Tensor3 efficient_forward(const MultiHeadAttention& layer, const Tensor3& x, bool causal = false,
                          const FastOptions& options = {});

/// Lab 07's efficient_forward for lab 06's layer, tuned (heads on threads):
/// query (B, T, d_model), key and value (B, S, d_model) -> (B, T, d_model), equal to
/// minimodel::efficient_forward(layer, query, key, value, masks, causal, tiles), tiles as above.
/// @throws std::invalid_argument for what that function rejects, and if threads is 0.
Tensor3 efficient_forward(const MultiheadCrossAttention& layer, const Tensor3& query,
                          const Tensor3& key, const Tensor3& value,
                          const CrossAttentionOptions& masks = {}, bool causal = false,
                          const FastOptions& options = {});

}  // namespace minimodel::fast
