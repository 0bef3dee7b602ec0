// Lab 14 reference: attention across processes. See labs/14-distributed-attention.md; the API and
// its shapes are in distributed_attention.hpp.
#include "minimodel/distributed/distributed_attention.hpp"

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include <xtensor-blas/xlinalg.hpp>
#include <xtensor/xview.hpp>

#include "minimodel/attention/efficient_attention.hpp"
#include "minimodel/shapes.hpp"

namespace minimodel {

namespace {

void check_rank(const char* where, int rank, int n_ranks) {
  if (n_ranks <= 0 || rank < 0 || rank >= n_ranks)
    throw std::invalid_argument(std::string(where) + ": rank " + std::to_string(rank) +
                                " is not one of 0 … " + std::to_string(n_ranks - 1));
}

}  // namespace

// ---- Block A: tensor-parallel heads -------------------------------------------------------------

HeadShard shard_heads(std::size_t n_heads, int rank, int n_ranks) {
  if (n_ranks <= 0 || n_heads % std::size_t(n_ranks) != 0)
    throw std::invalid_argument("lab 14: " + std::to_string(n_heads) + " heads do not split over " +
                                std::to_string(n_ranks) + " ranks (P must divide H)");
  check_rank("shard_heads", rank, n_ranks);
  const std::size_t count = n_heads / std::size_t(n_ranks);
  return {std::size_t(rank) * count, count};
}

TensorParallelAttention::TensorParallelAttention(const MultiHeadAttention& layer, MPI_Comm comm)
    : comm_(comm),
      heads_(shard_heads(layer.n_heads(), rank_of(comm), size_of(comm))),
      d_head_(layer.d_head()) {
  // This rank's heads are the columns c0 … c1 − 1 of W_Q, W_K, W_V and the rows c0 … c1 − 1 of W_O.
  const std::size_t c0 = heads_.first * d_head_, c1 = c0 + heads_.count * d_head_;
  w_q_ = xt::view(layer.w_q(), xt::all(), xt::range(c0, c1));  // (d_model, count · d_head)
  w_k_ = xt::view(layer.w_k(), xt::all(), xt::range(c0, c1));
  w_v_ = xt::view(layer.w_v(), xt::all(), xt::range(c0, c1));
  w_o_ = xt::view(layer.w_o(), xt::range(c0, c1), xt::all());  // (count · d_head, d_model)
}

// x: (T, d_model) -> (T, d_model), the same on every rank
Tensor2 TensorParallelAttention::forward(const Tensor2& x, bool causal) const {
  if (x.shape(1) != d_model() || x.shape(0) == 0)
    throw std::invalid_argument("TensorParallelAttention::forward: x is " + shape_of(x) +
                                " but d_model is " + std::to_string(d_model()));
  const std::size_t T = x.shape(0);
  // 1. Project onto this rank's heads only: a P-th of lab 01's projections.
  const Tensor2 q = xt::linalg::dot(x, w_q_), k = xt::linalg::dot(x, w_k_),
                v = xt::linalg::dot(x, w_v_);  // (T, count · d_head)
  const std::optional<Tensor2> mask =
      causal ? std::optional<Tensor2>(causal_mask(T)) : std::nullopt;
  // 2. Each local head attends on its own, as in lab 01.
  Tensor2 merged = xt::zeros<float>({T, heads_.count * d_head_});  // (T, count · d_head)
  for (std::size_t h = 0; h < heads_.count; ++h) {
    auto cols = xt::range(h * d_head_, (h + 1) * d_head_);
    const Tensor2 q_h = xt::view(q, xt::all(), cols), k_h = xt::view(k, xt::all(), cols),
                  v_h = xt::view(v, xt::all(), cols);  // (T, d_head)
    xt::view(merged, xt::all(), cols) = single_head_attention(q_h, k_h, v_h, mask).output;
  }
  // 3. This rank's share of the output projection: its heads' rows of W_O.
  Tensor2 out = xt::linalg::dot(merged, w_o_);  // (T, d_model), a partial sum
  // 4. One all-reduce adds the P shares: Σ_r merged_r W_O[rows of r] = merge_heads(all) W_O.
  allreduce_sum(out.data(), out.size(), comm_);
  return out;
}

// ---- Block B: ring attention --------------------------------------------------------------------

std::vector<std::size_t> rows_of_rank(std::size_t T, int rank, int n_ranks, SequenceLayout layout) {
  check_rank("rows_of_rank", rank, n_ranks);
  const std::size_t P = std::size_t(n_ranks), blocks = layout == SequenceLayout::zigzag ? 2 * P : P;
  if (T == 0 || T % blocks != 0)
    throw std::invalid_argument("rows_of_rank: T = " + std::to_string(T) + " does not split into " +
                                std::to_string(blocks) + " equal blocks for " + std::to_string(P) +
                                " ranks");
  const std::size_t size = T / blocks, r = std::size_t(rank);
  std::vector<std::size_t> own = {r};
  if (layout == SequenceLayout::zigzag) own.push_back(2 * P - 1 - r);  // one early, one late
  std::vector<std::size_t> rows;
  for (const std::size_t block : own)
    for (std::size_t i = 0; i < size; ++i) rows.push_back(block * size + i);
  return rows;
}

// q, k, v: (T / P, d) this rank's rows -> (T / P, d)
Tensor2 ring_attention(const Tensor2& q, const Tensor2& k, const Tensor2& v, std::size_t T,
                       SequenceLayout layout, MPI_Comm comm, RingWork* work) {
  const int rank = rank_of(comm), P = size_of(comm);
  const std::vector<std::size_t> rows = rows_of_rank(T, rank, P, layout);
  const std::size_t local = rows.size(), d = q.shape(1);
  if (q.shape(0) != local || k.shape() != q.shape() || v.shape() != q.shape() || d == 0)
    throw std::invalid_argument("ring_attention: q is " + shape_of(q) + ", k " + shape_of(k) +
                                " and v " + shape_of(v) + " but this rank holds " +
                                std::to_string(local) + " of the " + std::to_string(T) +
                                " rows, all of one width");
  const std::size_t n_blocks = layout == SequenceLayout::zigzag ? 2 : 1, block = local / n_blocks;
  const float scale = 1.0f / std::sqrt(float(d));
  RingWork counts;

  // What travels: K then V of one rank's rows, (2, T / P, d) in one buffer.
  std::vector<float> kv(2 * local * d), incoming(kv.size());
  std::copy(k.begin(), k.end(), kv.begin());
  std::copy(v.begin(), v.end(), kv.begin() + std::ptrdiff_t(local * d));
  std::vector<RunningSoftmax> running(local);  // per query row: its max and its sum so far
  Tensor2 out = xt::zeros<float>({local, d});  // per query row: Σ exp(score − max) v, unnormalised

  for (int step = 0; step < P; ++step) {
    // The keys held now are those of rank − step: one step around the ring per sendrecv.
    const int owner = (rank - step + P) % P;
    const std::vector<std::size_t> keys = rows_of_rank(T, owner, P, layout);
    const float* k_held = kv.data();
    const float* v_held = kv.data() + local * d;
    for (std::size_t qb = 0; qb < n_blocks; ++qb)
      for (std::size_t kb = 0; kb < n_blocks; ++kb) {
        const std::size_t q_first = rows[qb * block], k_first = keys[kb * block];
        if (k_first > q_first + block - 1) {  // every key after every query: masked, skipped
          ++counts.tiles_skipped;
          continue;
        }
        ++counts.tiles_computed;
        // A tile of block × block: each query row meets each key row its position allows.
        for (std::size_t i = 0; i < block; ++i) {
          const std::size_t qi = qb * block + i;
          float* o = &out(qi, 0);
          for (std::size_t j = 0; j < block; ++j) {
            if (k_first + j > q_first + i) break;  // the diagonal tile's upper triangle
            const float* k_row = k_held + (kb * block + j) * d;
            const float* v_row = v_held + (kb * block + j) * d;
            float score = 0.0f;
            for (std::size_t c = 0; c < d; ++c) score += q(qi, c) * k_row[c];
            score *= scale;
            ++counts.scores;
            const float factor = running[qi].add(score);  // rescales what came before
            const float weight = std::exp(score - running[qi].max);
            for (std::size_t c = 0; c < d; ++c) o[c] = o[c] * factor + weight * v_row[c];
          }
        }
      }
    if (step + 1 < P) {  // pass the held K and V on to rank + 1, take rank − 1's
      sendrecv(kv.data(), kv.size(), (rank + 1) % P, incoming.data(), incoming.size(),
               (rank - 1 + P) % P, comm);
      std::swap(kv, incoming);
    }
  }
  for (std::size_t i = 0; i < local; ++i)
    for (std::size_t c = 0; c < d; ++c) out(i, c) /= running[i].sum;
  if (work) *work = counts;
  return out;
}

// ---- Block C: data-parallel training ------------------------------------------------------------

BatchShard shard_batch(std::size_t batch, int rank, int n_ranks) {
  check_rank("shard_batch", rank, n_ranks);
  const std::size_t P = std::size_t(n_ranks), r = std::size_t(rank);
  if (batch < P)
    throw std::invalid_argument("shard_batch: a batch of " + std::to_string(batch) +
                                " sequences leaves a rank of " + std::to_string(P) +
                                " without any");
  const std::size_t base = batch / P, extra = batch % P;
  return {r * base + std::min(r, extra), base + (r < extra ? 1 : 0)};
}

DataParallelGradients data_parallel_gradients(const ModelParams<float>& params, std::size_t n_heads,
                                              const TokenBatch& global_batch, MPI_Comm comm) {
  const BatchShard shard = shard_batch(global_batch.size(), rank_of(comm), size_of(comm));
  const TokenBatch mine(global_batch.begin() + std::ptrdiff_t(shard.first),
                        global_batch.begin() + std::ptrdiff_t(shard.first + shard.count));
  // 1. This rank's share, as lab 10's train_step does for the whole batch.
  ModelTape<float> tape;
  const xt::xtensor<float, 3> logits = model_forward(params, n_heads, mine, tape);
  xt::xtensor<float, 3> d_logits;
  const Matrix<float> losses = next_token_loss(logits, mine, d_logits);  // d of the local mean
  // 2. The local mean's gradient, weighted by count / B: the ranks' sum is the global mean's.
  d_logits *= float(shard.count) / float(global_batch.size());
  DataParallelGradients result{model_backward(params, n_heads, tape, d_logits), 0.0};
  // 3. One buffer: every gradient in tensors_of's order, then this rank's loss sum.
  std::vector<Matrix<float>*> grads = tensors_of(result.grads);
  std::size_t n = 1;
  for (const Matrix<float>* g : grads) n += g->size();
  std::vector<float> buffer;
  buffer.reserve(n);
  for (const Matrix<float>* g : grads) buffer.insert(buffer.end(), g->begin(), g->end());
  buffer.push_back(xt::sum(losses)());
  allreduce_sum(buffer.data(), buffer.size(), comm);
  std::size_t at = 0;
  for (Matrix<float>* g : grads) {
    std::copy(buffer.begin() + std::ptrdiff_t(at), buffer.begin() + std::ptrdiff_t(at + g->size()),
              g->begin());
    at += g->size();
  }
  result.mean_loss = double(buffer.back()) / double(global_batch.size() * losses.shape(1));
  return result;
}

double data_parallel_step(ModelParams<float>& params, std::size_t n_heads, Adam& adam,
                          const TokenBatch& global_batch, MPI_Comm comm) {
  const DataParallelGradients result = data_parallel_gradients(params, n_heads, global_batch, comm);
  adam.step(params, result.grads);  // the same gradient on every rank: the same update
  return result.mean_loss;
}

}  // namespace minimodel
