// The engine behind `workbook attend`: built once per implementation (attend-learner,
// attend-reference). Loads the inputs, runs that implementation's attention, writes Y and the
// weights. Exit status: 0 done, 1 a TODO stub was reached, 2 bad input (nothing is written).
//
// Which labs' code runs:
//   no bias, --kv, --key-padding-mask or --rope-theta  lab 01's MultiHeadAttention (+ lab 02's
//                                                      mask)
//   any of them                                        lab 06's MultiheadCrossAttention, with
//                                                      lab 05's RoPE as its transform_qk
//   no --attn-out                                      lab 07's efficient_forward for either
//                                                      layer: no weights are ever formed (the
//                                                      reference's tuned twin in
//                                                      attend-reference: efficient_engine.hpp)
//   --kv-heads N                                       lab 08's GroupedQueryAttention::forward
//                                                      (causal, RoPE if asked; no lab 06 feature)
//   --block                                            lab 04's attention_block around it
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <limits>
#include <new>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <cblas.h>  // OpenBLAS's own: openblas_set_num_threads

#include <CLI/CLI.hpp>
#include <xtensor/xnpy.hpp>
#include <xtensor/xview.hpp>

#include "attend/attend_options.hpp"
#include "attend/efficient_engine.hpp"
#include "minimodel/attention/attention.hpp"
#include "minimodel/attention/attention_block.hpp"
#include "minimodel/attention/cross_attention.hpp"
#include "minimodel/attention/efficient_attention.hpp"
#include "minimodel/attention/kv_cache.hpp"
#include "minimodel/attention/rope.hpp"
#include "minimodel/implementation.hpp"
#include "minimodel/shapes.hpp"
#include "minimodel/todo.hpp"
#include "tensors/npy_io.hpp"
#include "util/files.hpp"

namespace {

using minimodel::shape_of;
using minimodel::Tensor1;
using minimodel::Tensor2;
using minimodel::Tensor3;
using minimodel::Tensor4;

// The outputs, in the shapes of the files: the arrays keep their batch axis (B = 1 for a 2-D X),
// which the files drop. They are written as they are, never copied: at T = 16384, one copy of Y
// is 32 MiB.
struct Result {
  Tensor3 y;                            // (B, T, d)
  std::vector<std::size_t> y_shape;     // X's shape
  Tensor4 attn;                         // (B, H, T, S); empty without --attn-out
  std::vector<std::size_t> attn_shape;  // (H, T, S) for 2-D X, (B, H, T, S) for 3-D X
};

[[noreturn]] void reject(const std::string& message) { throw std::invalid_argument(message); }

// "nan at (0, 2, 1)" for the first NaN or infinity in `values`, or "" when every value is finite.
template <class E>
std::string first_non_finite(const E& values) {
  const auto bad =
      std::find_if(values.begin(), values.end(), [](float v) { return !std::isfinite(v); });
  if (bad == values.end()) return "";
  const auto index =
      xt::unravel_index(static_cast<std::size_t>(bad - values.begin()), values.shape());
  std::string at;
  for (const auto i : index) at += (at.empty() ? "" : ", ") + std::to_string(i);
  std::ostringstream value;
  value << *bad;
  return value.str() + " at (" + at + ")";
}

// Loads a float32 input and rejects a NaN or an infinity, naming the first: one of them would
// silently turn every output into NaN.
xt::xarray<float> load_finite(const std::filesystem::path& path, const std::string& flag) {
  xt::xarray<float> values = workbench::load_npy_f32(path);
  if (const std::string bad = first_non_finite(values); !bad.empty())
    reject(flag + " " + path.string() + " holds " + bad + "; every input must be finite");
  return values;
}

// The largest |value|: how large an input is, for an overflow's message.
template <class E>
double largest_magnitude(const E& values) {
  return values.size() == 0 ? 0.0 : static_cast<double>(xt::amax(xt::abs(values))());
}

std::string scientific(double value) {
  std::ostringstream text;
  text << std::setprecision(2) << value;
  return text.str();
}

// A 2-D (rows, d) input becomes a batch of one, (1, rows, d).
Tensor3 as_batch(const xt::xarray<float>& a) {
  if (a.dimension() == 3) return a;
  return xt::reshape_view(a, std::array<std::size_t, 3>{1, a.shape()[0], a.shape()[1]});
}

// A weight (d, cols); `why` says where cols comes from when it is not d.
Tensor2 load_weight(const std::filesystem::path& path, const char* flag, std::size_t d,
                    const std::string& x_shape, std::size_t cols, const std::string& why = "") {
  const xt::xarray<float> w = load_finite(path, flag);
  if (w.dimension() != 2 || w.shape()[0] != d || w.shape()[1] != cols)
    reject(std::string(flag) + " " + path.string() + " is " + shape_of(w) + " but X is " + x_shape +
           why + ", so it must be (" + std::to_string(d) + ", " + std::to_string(cols) + ")");
  return w;
}

std::optional<Tensor1> load_bias(const std::filesystem::path& path, const char* flag,
                                 std::size_t d) {
  if (path.empty()) return std::nullopt;
  const xt::xarray<float> b = load_finite(path, flag);
  if (b.dimension() != 1 || b.shape()[0] != d)
    reject(std::string(flag) + " " + path.string() + " is " + shape_of(b) + " but must be (" +
           std::to_string(d) + ")");
  return Tensor1(b);
}

// (S) or (B, S), matching X's rank -> (B, S).
minimodel::BoolTensor2 load_padding(const std::filesystem::path& path, const Tensor3& kv,
                                    bool batched) {
  const xt::xarray<bool> m = workbench::load_npy_bool(path);
  const std::size_t B = kv.shape(0), S = kv.shape(1);
  const bool ok = batched ? m.dimension() == 2 && m.shape()[0] == B && m.shape()[1] == S
                          : m.dimension() == 1 && m.shape()[0] == S;
  if (!ok)
    reject("--key-padding-mask " + path.string() + " is " + shape_of(m) + " but the keys are " +
           shape_of(kv) + ", so it must be " +
           (batched ? "(" + std::to_string(B) + ", " + std::to_string(S) + ")"
                    : "(" + std::to_string(S) + ")"));
  return xt::reshape_view(m, std::array<std::size_t, 2>{B, S});
}

// The token positions as (B, T) rows, and whether the file gave each sequence its own row (a (T)
// file is shared by every sequence; lab 05's RoPE takes it as it is).
struct TokenPositions {
  minimodel::BatchPositions rows;  // (B, T)
  bool per_sequence = false;
};

TokenPositions load_positions(const workbench::AttendOptions& o, std::size_t B, std::size_t T,
                              const std::string& x_shape) {
  if (o.positions.empty())
    return {xt::broadcast(xt::arange<std::int64_t>(static_cast<std::int64_t>(T)), {B, T}), false};
  const xt::xarray<std::int64_t> p = workbench::load_npy_i64(o.positions);
  const bool shared = p.dimension() == 1 && p.shape()[0] == T;
  const bool per_sequence = p.dimension() == 2 && p.shape()[0] == B && p.shape()[1] == T;
  if (!shared && !per_sequence)
    reject("--positions " + o.positions.string() + " is " + shape_of(p) + " but X is " + x_shape +
           ", so it must be (T) = (" + std::to_string(T) + ") or (B, T) = (" + std::to_string(B) +
           ", " + std::to_string(T) + ")");
  if (xt::amin(p)() < 0)
    reject("--positions " + o.positions.string() + " holds a negative position");
  if (shared) return {xt::broadcast(p, {B, T}), false};
  return {p, true};
}

// The bytes this process may still allocate, as far as Linux says: the least of MemAvailable, the
// address-space limit (ulimit -v) less what is mapped, and the cgroup's memory.max less its use.
std::size_t available_memory() {
  std::size_t available = std::numeric_limits<std::size_t>::max();
  const auto read_number = [](const std::filesystem::path& path, const std::string& key) {
    std::ifstream in(path);
    std::string word;
    while (in >> word)  // "MemAvailable: 123 kB", or one number ("max" for none)
      if (key.empty() || word == key) {
        if (!key.empty()) in >> word;
        return word.find_first_not_of("0123456789") == std::string::npos && !word.empty()
                   ? std::optional<std::size_t>(std::stoull(word))
                   : std::nullopt;
      }
    return std::optional<std::size_t>();
  };
  if (const auto kib = read_number("/proc/meminfo", "MemAvailable:"))
    available = std::min(available, *kib * 1024);
  if (rlimit limit{}; getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    const auto pages = read_number("/proc/self/statm", "");  // the first field: mapped pages
    const std::size_t mapped = pages ? *pages * static_cast<std::size_t>(sysconf(_SC_PAGESIZE)) : 0;
    available = std::min(available, limit.rlim_cur > mapped ? limit.rlim_cur - mapped : 0);
  }
  const auto cgroup_max = read_number("/sys/fs/cgroup/memory.max", "");
  const auto cgroup_used = read_number("/sys/fs/cgroup/memory.current", "");
  if (cgroup_max && cgroup_used)
    available = std::min(available, *cgroup_max > *cgroup_used ? *cgroup_max - *cgroup_used : 0);
  return available;
}

std::string gib(double bytes) {
  std::ostringstream text;
  text << std::setprecision(3) << bytes / double(std::size_t{1} << 30) << " GiB";
  return text.str();
}

// --attn-out asks for the (B, H, T, S) weights: refuses them, before anything is computed, when
// they cannot fit. Lab 01's path keeps them in the layer and copies them out; either path holds a
// head's scores, exponentials and weights (T, S) while it computes, and a causal mask (T, T).
void check_weights_fit(std::size_t B, std::size_t H, std::size_t T, std::size_t S, bool causal,
                       bool lab06) {
  const double head = double(T) * double(S) * sizeof(float);  // one (T, S)
  const double weights = double(B) * double(H) * head;
  const double needed = (lab06 ? 1 : 2) * weights + (3 + (causal ? 1 : 0)) * head;
  const std::size_t available = available_memory();
  if (needed <= double(available)) return;
  reject("--attn-out asks for the attention weights (B, H, T, S) = (" + std::to_string(B) + ", " +
         std::to_string(H) + ", " + std::to_string(T) + ", " + std::to_string(S) + "), " +
         gib(weights) + ", and computing them needs " + gib(needed) + " but " +
         gib(static_cast<double>(available)) +
         " of memory is available; leave out --attn-out (lab 07's efficient path never forms them "
         "and needs no T·S memory) or use shorter sequences");
}

Result attend(const workbench::AttendOptions& o) {
  // 1. Inputs and their shapes. X as loaded is dropped once it is a batch: one copy of X at a time.
  std::vector<std::size_t> x_shape;
  std::string x_text;  // "(T, d)" or "(B, T, d)", for messages
  const Tensor3 x = [&] {
    const xt::xarray<float> x_in = load_finite(o.x, "--x");
    if (x_in.dimension() != 2 && x_in.dimension() != 3)
      reject("--x " + o.x.string() + " is " + shape_of(x_in) + " but must be (T, d) or (B, T, d)");
    x_shape.assign(x_in.shape().begin(), x_in.shape().end());
    x_text = shape_of(x_in);
    return as_batch(x_in);  // (B, T, d)
  }();
  const bool batched = x_shape.size() == 3;
  const std::size_t B = x.shape(0), T = x.shape(1), d = x.shape(2);
  if (B == 0 || T == 0 || d == 0)
    reject("--x " + o.x.string() + " is " + x_text +
           "; attention needs at least one sequence, one token and one feature");
  if (d % o.heads != 0)
    reject("--heads " + std::to_string(o.heads) + " does not divide d = " + std::to_string(d) +
           " of X " + x_text);
  const bool lab06_feature = !o.b_q.empty() || !o.b_k.empty() || !o.b_v.empty() || !o.b_o.empty() ||
                             !o.kv.empty() || !o.key_padding_mask.empty();
  const bool grouped = o.kv_heads > 0;  // lab 08's layer
  if (grouped) {
    if (o.heads % o.kv_heads != 0)
      reject("--kv-heads " + std::to_string(o.kv_heads) + " does not divide --heads " +
             std::to_string(o.heads));
    if (!o.causal) reject("--kv-heads runs lab 08's decoder layer, which is causal: add --causal");
    if (!o.attn_out.empty())
      reject(
          "--kv-heads runs lab 08's layer, which never forms the attention weights: leave out "
          "--attn-out");
    if (lab06_feature)
      reject(
          "--kv-heads runs lab 08's decoder self-attention, which has no biases, --kv or "
          "--key-padding-mask");
  }
  const std::size_t kv_width = grouped ? o.kv_heads * (d / o.heads) : d;
  const std::string kv_why = grouped ? " and --kv-heads " + std::to_string(o.kv_heads) +
                                           " of --heads " + std::to_string(o.heads) +
                                           " give W_K, W_V of (d, N * d / H)"
                                     : "";
  const Tensor2 w_q = load_weight(o.w_q, "--wq", d, x_text, d),
                w_k = load_weight(o.w_k, "--wk", d, x_text, kv_width, kv_why),
                w_v = load_weight(o.w_v, "--wv", d, x_text, kv_width, kv_why),
                w_o = load_weight(o.w_o, "--wo", d, x_text, d);

  std::optional<Tensor3> kv;  // (B, S, d)
  if (!o.kv.empty()) {
    const xt::xarray<float> kv_in = load_finite(o.kv, "--kv");
    if (kv_in.dimension() != x_shape.size() || kv_in.shape().back() != d ||
        (batched && kv_in.shape()[0] != B))
      reject(
          "--kv " + o.kv.string() + " is " + shape_of(kv_in) + " but X is " + x_text +
          (batched ? ", so it must be (" + std::to_string(B) + ", S, " : ", so it must be (S, ") +
          std::to_string(d) + ")");
    if (kv_in.shape()[kv_in.dimension() - 2] == 0)
      reject("--kv " + o.kv.string() + " is " + shape_of(kv_in) +
             "; attention needs at least one key (S >= 1)");
    kv = as_batch(kv_in);
  }
  const std::size_t S = kv ? kv->shape(1) : T;
  const bool rope = !std::isnan(o.rope_theta);
  if (o.causal && S != T)
    reject("--causal needs as many keys as queries, but X has T = " + std::to_string(T) +
           " and --kv has S = " + std::to_string(S));
  if (!o.attn_out.empty()) check_weights_fit(B, o.heads, T, S, o.causal, lab06_feature || rope);
  if (rope && kv)
    reject(
        "--rope-theta rotates the queries and keys of self-attention by their positions; "
        "it cannot be combined with --kv");
  if (!o.positions.empty() && !rope) reject("--positions needs --rope-theta");
  const TokenPositions positions =
      load_positions(o, B, T, x_text);  // 0 … T − 1 without --positions
  std::optional<minimodel::RotaryPositionalEmbedding> rotary;
  if (rope) {
    // The tables hold every position up to the largest: (largest + 1, d_head / 2) angles, as cos
    // and sin. A --positions file may ask for more than X's own positions 0 … T − 1 would, but
    // only up to kMaxTableBytes: beyond it a table takes long to build and little memory is left.
    const std::size_t d_head = d / o.heads;
    const std::size_t largest = static_cast<std::size_t>(xt::amax(positions.rows)());
    constexpr std::size_t kMaxTableBytes = std::size_t{64} << 20;
    const std::size_t bytes_per_position = d_head * sizeof(float);  // cos and sin
    const std::size_t fitting = std::max(T, kMaxTableBytes / bytes_per_position);
    if (largest >= fitting) {
      std::ostringstream need;
      need << std::setprecision(3)
           << (static_cast<double>(largest) + 1) * double(bytes_per_position) / double(1 << 20);
      reject("--positions " + o.positions.string() + " holds position " + std::to_string(largest) +
             ", too large for a RoPE table: its cos and sin tables of (" +
             std::to_string(largest + 1) + ", " + std::to_string(d_head / 2) + ") would take " +
             need.str() + " MiB, over the limit of 64 MiB; positions up to " +
             std::to_string(fitting - 1) + " fit");
    }
    rotary.emplace(o.rope_theta, d / o.heads, largest + 1);
  }

  // 2. The attention: lab 01's layer, or lab 06's when a lab 05/06 feature is asked for, run by
  //    lab 07's efficient_forward when no weights are asked for, or lab 08's grouped-query layer.
  //    Only with weights is the (T, T) causal mask built, and (B, H, T, S) weights kept.
  const auto causal_mask = [&] {
    return o.causal ? std::optional<Tensor2>(minimodel::causal_mask(T)) : std::nullopt;
  };
  Tensor4 weights;  // (B, H, T, S) of the last call; empty from lab 07's layer
  std::function<Tensor3(const Tensor3&)> attention;
  std::optional<minimodel::MultiHeadAttention> mha;
  std::optional<minimodel::MultiheadCrossAttention> cross;
  std::optional<minimodel::GroupedQueryAttention> gqa;
  minimodel::CrossAttentionOptions options;
  const bool general = lab06_feature || rope;
  if (grouped) {
    gqa.emplace(w_q, w_k, w_v, w_o, o.heads, o.kv_heads, rotary);
    attention = [&](const Tensor3& h) { return gqa->forward(h, positions.rows); };
  } else if (!general && o.attn_out.empty()) {
    mha.emplace(w_q, w_k, w_v, w_o, o.heads);
    attention = [&](const Tensor3& h) { return workbench::efficient_attention(*mha, h, o.causal); };
  } else if (!general) {
    mha.emplace(w_q, w_k, w_v, w_o, o.heads);
    attention = [&, mask = causal_mask()](const Tensor3& h) {
      Tensor3 y = mha->forward(h, mask);
      weights = mha->attention_weights();
      return y;
    };
  } else {
    cross.emplace(w_q, w_k, w_v, w_o, load_bias(o.b_q, "--bq", d), load_bias(o.b_k, "--bk", d),
                  load_bias(o.b_v, "--bv", d), load_bias(o.b_o, "--bo", d), o.heads);
    if (!o.key_padding_mask.empty())
      options.key_padding_mask = load_padding(o.key_padding_mask, kv ? *kv : x, batched);
    options.need_weights = !o.attn_out.empty();
    if (const auto mask = causal_mask(); mask && options.need_weights)
      options.attn_mask = minimodel::as_attn_mask(*mask);
    if (rope && positions.per_sequence) {  // lab 08's (B, T) overload
      options.transform_qk = [&](Tensor4& q, Tensor4& k) {
        q = rotary->apply(q, positions.rows);
        k = rotary->apply(k, positions.rows);
      };
    } else if (rope) {  // lab 05's: one row of positions for every sequence
      options.transform_qk = [&, shared = minimodel::Positions(xt::view(positions.rows, 0))](
                                 Tensor4& q, Tensor4& k) {
        q = rotary->apply(q, shared);
        k = rotary->apply(k, shared);
      };
    }
    attention = [&](const Tensor3& h) {
      const Tensor3& source = kv ? *kv : h;  // self-attention attends over its own input
      if (!options.need_weights)
        return workbench::efficient_attention(*cross, h, source, source, options, o.causal);
      minimodel::AttentionOutput r = cross->forward(h, source, source, options);
      if (r.weights) weights = std::move(*r.weights);
      return std::move(r.output);
    };
  }

  // 3. Run it, inside lab 04's block if asked.
  Tensor3 y = o.block.empty()
                  ? attention(x)
                  : minimodel::attention_block(
                        x, o.block == "pre-ln" ? minimodel::Norm::pre_ln : minimodel::Norm::post_ln,
                        attention);
  // 4. Finite inputs can still overflow float32 on the way: a NaN output is never written. A
  //    query entry is at most d · |X| · |W_Q|, a key entry d · |KV| · |W_K|, a score d_head times
  //    their product over sqrt(d_head): past float32's 3.4e38 the softmax gives NaN.
  for (const auto& [name, bad] : {std::pair{"Y", first_non_finite(y)},
                                  {"the attention weights", first_non_finite(weights)}}) {
    if (bad.empty()) continue;
    const double query = double(d) * largest_magnitude(x) * largest_magnitude(w_q),
                 key = double(d) * largest_magnitude(kv ? *kv : x) * largest_magnitude(w_k),
                 score = query * key * std::sqrt(double(d / o.heads));
    const std::string what = score > std::numeric_limits<float>::max()
                                 ? "the scores overflow float32: the queries and keys can reach " +
                                       scientific(query) + " and " + scientific(key) +
                                       ", so a score can reach " + scientific(score) +
                                       " (float32 stops at 3.4e+38)"
                                 : "a step overflowed float32 (the largest |X| is " +
                                       scientific(largest_magnitude(x)) + ")";
    reject(std::string(name) + " holds " + bad + " although every input is finite: " + what +
           "; scale the inputs down. Nothing was written");
  }
  std::vector<std::size_t> attn_shape(weights.shape().begin() + (batched ? 0 : 1),
                                      weights.shape().end());
  return {std::move(y), std::move(x_shape), std::move(weights), std::move(attn_shape)};
}

// Every input is a regular file (or missing, which loading it reports): a FIFO or a device would
// block the engine or never end.
void check_inputs(const workbench::AttendOptions& o) {
  for (const auto& [flag, path] : workbench::input_paths(o))
    if (const std::string kind = path->empty() ? "" : workbench::non_regular_kind(*path);
        !kind.empty())
      reject(std::string(flag) + " " + path->string() + " names " + kind +
             ", not a regular .npy file");
}

// An output goes into a folder that exists (a typo in a path creates nothing), is a regular file
// or nothing yet (never a device, a FIFO or a link: /dev/null stays a device), and is none of the
// inputs nor the other output, which it would overwrite.
void check_outputs(const workbench::AttendOptions& o) {
  auto inputs = workbench::input_paths(o);
  inputs.emplace_back("--out", &o.out);
  auto same = [](const std::filesystem::path& a, const std::filesystem::path& b) {
    return !a.empty() && !b.empty() &&
           std::filesystem::weakly_canonical(a) == std::filesystem::weakly_canonical(b);
  };
  for (const auto& [output, path] : {std::pair{"--out", &o.out}, {"--attn-out", &o.attn_out}}) {
    const std::filesystem::path folder = path->parent_path();
    if (!path->empty() && !folder.empty() && !std::filesystem::is_directory(folder))
      throw std::invalid_argument(std::string(output) + " " + path->string() + ": the folder " +
                                  folder.string() + " does not exist; create it first");
    if (!path->empty()) {
      try {
        workbench::check_replaceable(*path);
      } catch (const std::runtime_error& e) {
        throw std::invalid_argument(std::string(output) + ": " + e.what());
      }
    }
    for (const auto& [input, input_path] : inputs)
      if (path != input_path && same(*path, *input_path))
        throw std::invalid_argument(std::string(output) + " " + path->string() + " is also " +
                                    input +
                                    "; choose another file, so that no input is overwritten");
  }
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
    // Every BLAS call; attend-reference's tuned lab 07 path takes as many threads of its own.
    openblas_set_num_threads(static_cast<int>(
        options.threads > 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency())));
    check_inputs(options);
    check_outputs(options);
    const Result result = attend(options);
    // All or nothing, and never a file this run did not create: both outputs are written to
    // temporaries and renamed into place only when both are written.
    std::vector<std::pair<std::filesystem::path, workbench::FileWriter>> outputs = {
        {options.out, [&](std::ostream& out) {
           workbench::write_npy_f32(out, result.y.data(), result.y_shape);
         }}};
    if (!options.attn_out.empty())
      outputs.emplace_back(options.attn_out, [&](std::ostream& out) {
        workbench::write_npy_f32(out, result.attn.data(), result.attn_shape);
      });
    workbench::write_files_atomically(outputs);
    return 0;
  } catch (const minimodel::Todo& e) {
    std::cerr << "workbook attend --impl " << impl << ": " << e.what() << '\n';
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "workbook attend: out of memory (std::bad_alloc); nothing was written. The inputs "
              << "are too large for the memory available"
              << (options.attn_out.empty()
                      ? ""
                      : ", and --attn-out keeps (B, H, T, S) weights: leave "
                        "it out to run lab 07's path, which needs no T·S memory")
              << '\n';
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "workbook attend: " << e.what() << '\n';
    return 2;
  }
}
