#pragma once
// Figure text said from what a verify program measured, not from what the reference is known to
// do: a learner's code that allocates in every call, or skips no tile, gets a legend that says so.
#include <cstddef>
#include <string>
#include <vector>

#include "figures/bar_chart.hpp"

namespace workbench {

/// The heap bytes of two calls of a layer on the same input, one after the other, and of the
/// output each returns.
struct CallHeapBytes {
  double first_call = 0.0;
  double second_call = 0.0;
  double output = 0.0;
};

/// The legend of a layer's line of heap bytes per call (the second call's), from the bytes
/// measured at length T. A call allocates "nothing beyond its output" when it allocates less than
/// an eighth of its output more (a tile's scratch, a few KiB, is not a (T, d_model) buffer):
///  - the second call does and the first does not: "LAYER: its output; buffers reused across calls"
///  - both do: "LAYER: its output alone"
///  - the second does not: "LAYER: 1.25 MiB per call at T = 1024, 5.0× its output"
/// @throws std::invalid_argument if a byte count is negative or not finite, or output is 0.
std::string heap_bytes_legend(const std::string& layer, std::size_t T, const CallHeapBytes& bytes);

/// The legend of a layer's causal line, from the tiles its kernel skipped in a causal run that
/// has `above_diagonal` tiles above the diagonal: "LAYER, causal: skips the tiles above the
/// diagonal", "LAYER, causal: skips 3 of the 28 tiles above the diagonal (check 4)",
/// or "LAYER, causal: computes every tile (check 4: skips none of 28)".
std::string causal_skip_legend(const std::string& layer, std::size_t skipped,
                               std::size_t above_diagonal);

/// GF/s of one shape, without and with the causal mask.
struct ShapeRates {
  std::string shape;  ///< the category label, e.g. "(128, 512, 8)"
  double plain = 0.0;
  double causal = 0.0;
};

/// A grouped bar chart of GF/s per shape: one group per shape of `ours`, with the bars of `layer`
/// (not causal, causal) and, when `torch` has a row for each shape (same shapes, same order), the
/// bars of torch MHA beside them. With `torch` empty, no torch bar is drawn and the x-axis title
/// ends with `torch_note` (why torch is missing, and how to get it). Shapes are categories, not
/// positions on an axis: no line joins two shapes, and every tick has its bars.
/// @throws std::invalid_argument if `ours` is empty, or `torch` is neither empty nor the same
///         shapes as `ours`.
BarChart rates_per_shape_chart(const std::string& title, const std::string& layer,
                               const std::vector<ShapeRates>& ours,
                               const std::vector<ShapeRates>& torch, const std::string& torch_note);

}  // namespace workbench
