// The engine behind `workbook attend`: built once per implementation (attend-learner,
// attend-reference). Loads X and the weights, runs MultiHeadAttention, writes Y and the weights.
// Exit status: 0 done, 1 a TODO stub was reached, 2 bad input (nothing is written).
#include <filesystem>
#include <iostream>

#include <CLI/CLI.hpp>
#include <xtensor/xview.hpp>

#include "attend_options.hpp"
#include "minimodel/attention/attention.hpp"
#include "minimodel/implementation.hpp"
#include "minimodel/shapes.hpp"
#include "workbench/npy_io.hpp"

namespace {

using minimodel::shape_of;
using minimodel::Tensor2;

struct Result {
  xt::xarray<float> y;     // X's shape
  xt::xarray<float> attn;  // (H, T, T) for 2-D X, (B, H, T, T) for 3-D X
};

Tensor2 load_weight(const std::filesystem::path& path, const char* flag, std::size_t d,
                    const xt::xarray<float>& x) {
  const xt::xarray<float> w = workbench::load_npy_f32(path);
  if (w.dimension() != 2 || w.shape()[0] != d || w.shape()[1] != d)
    throw std::invalid_argument(std::string(flag) + " " + path.string() + " is " + shape_of(w) +
                                " but X is " + shape_of(x) + ", so it must be (" +
                                std::to_string(d) + ", " + std::to_string(d) + ")");
  return w;
}

Result attend(const workbench::AttendOptions& o) {
  const xt::xarray<float> x = workbench::load_npy_f32(o.x);
  if (x.dimension() != 2 && x.dimension() != 3)
    throw std::invalid_argument("--x " + o.x.string() + " is " + shape_of(x) +
                                " but must be (T, d) or (B, T, d)");
  const std::size_t d = x.shape().back(), T = x.shape()[x.dimension() - 2];
  if (d % o.heads != 0)
    throw std::invalid_argument("--heads " + std::to_string(o.heads) + " does not divide d = " +
                                std::to_string(d) + " of X " + shape_of(x));
  minimodel::MultiHeadAttention mha(load_weight(o.w_q, "--wq", d, x), load_weight(o.w_k, "--wk", d, x),
                                    load_weight(o.w_v, "--wv", d, x), load_weight(o.w_o, "--wo", d, x),
                                    o.heads);
  const auto mask = o.causal ? std::optional<Tensor2>(minimodel::causal_mask(T)) : std::nullopt;
  if (x.dimension() == 2) {
    xt::xarray<float> y = mha.forward(Tensor2(x), mask);
    return {std::move(y), xt::view(mha.attention_weights(), 0)};
  }
  xt::xarray<float> y = mha.forward(minimodel::Tensor3(x), mask);
  return {std::move(y), mha.attention_weights()};
}

}  // namespace

int main(int argc, char** argv) {
  const std::string impl = minimodel::implementation_name();
  CLI::App app{"Multi-head attention on .npy files with the " + impl + " implementation. " +
               "Normally run through `workbook attend`."};
  workbench::AttendOptions options;
  workbench::add_attend_options(app, options);
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return "workbook attend: " + std::string(e.what()) + "\n";
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return e.get_exit_code() == 0 ? app.exit(e) : (app.exit(e), 2);
  }

  try {
    const Result result = attend(options);
    workbench::save_npy_f32(options.out, result.y);
    if (!options.attn_out.empty()) {
      try {
        workbench::save_npy_f32(options.attn_out, result.attn);
      } catch (...) {
        std::filesystem::remove(options.out);  // all or nothing
        throw;
      }
    }
    return 0;
  } catch (const minimodel::Todo& e) {
    std::cerr << "workbook attend --impl " << impl << ": " << e.what() << '\n';
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "workbook attend: " << e.what() << '\n';
    return 2;
  }
}
