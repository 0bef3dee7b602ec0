#pragma once
// The API of lab 14: attention across processes. The same program runs on P MPI ranks; each
// function here is collective over its communicator `comm` (every rank of it calls it, with the
// same sizes), and sends through counted_mpi.hpp, so that its traffic can be measured.
//   Block A: tensor-parallel heads: rank r owns H / P heads, its column blocks of W_Q, W_K, W_V
//            and its row block of W_O; one all-reduce sums the ranks' shares of the output.
//   Block B: ring attention: the sequence's rows are split over the ranks; key/value blocks travel
//            around the ring while each rank merges them with lab 07's online softmax; causal,
//            with the tiles above the diagonal skipped; and a zig-zag layout that balances them.
//   Block C: data-parallel training of lab 10's model: each rank its share of the global batch,
//            the gradients summed by one all-reduce, the same Adam step on every rank.
//
// Shape names: T tokens, d_model the width, H heads of d_head = d_model / H, P ranks, B sequences.
// Every check of the inputs happens before the first message, on every rank alike, so that a bad
// input makes every rank throw the same error and none waits forever for the others.
#include <mpi.h>

#include <cstddef>
#include <vector>

#include "minimodel/attention/attention.hpp"
#include "minimodel/distributed/counted_mpi.hpp"
#include "minimodel/model/tiny_transformer.hpp"

namespace minimodel {

// ---- Block A: tensor-parallel heads -------------------------------------------------------------

/// The heads one rank owns: first, first + 1, …, first + count − 1.
struct HeadShard {
  std::size_t first = 0;
  std::size_t count = 0;
};

/// Block A. Rank `rank` of `n_ranks` owns the contiguous heads rank · H / P … (rank + 1) · H / P
/// − 1.
/// @throws std::invalid_argument if n_ranks is 0 or does not divide n_heads ("lab 14: 4 heads do
///         not split over 3 ranks"), or rank is not in 0 … n_ranks − 1.
HeadShard shard_heads(std::size_t n_heads, int rank, int n_ranks);

/// Block A. Lab 01's layer split by heads over the ranks of a communicator: this rank keeps only
/// the columns of its heads in W_Q, W_K, W_V (d_model, count · d_head) and the same rows of W_O
/// (count · d_head, d_model).
class TensorParallelAttention {
 public:
  /// Takes this rank's blocks of `layer`'s weights; `comm` must outlive the object.
  /// @throws std::invalid_argument as shard_heads, when comm's size does not divide the heads:
  ///         on every rank, before any message.
  TensorParallelAttention(const MultiHeadAttention& layer, MPI_Comm comm);

  /// x: (T, d_model), the same on every rank -> (T, d_model), the same on every rank: lab 01's
  /// forward (with lab 02's causal mask if `causal`). Each rank attends with its heads, multiplies
  /// their merged output (T, count · d_head) by its rows of W_O, and one allreduce_sum of T ·
  /// d_model floats adds the P partial outputs.
  /// @throws std::invalid_argument if x is not (·, d_model) or has no rows.
  Tensor2 forward(const Tensor2& x, bool causal = false) const;

  const HeadShard& heads() const { return heads_; }
  std::size_t d_model() const { return w_q_.shape(0); }
  std::size_t d_head() const { return d_head_; }
  const Tensor2& w_q() const { return w_q_; }  ///< (d_model, count · d_head)
  const Tensor2& w_k() const { return w_k_; }
  const Tensor2& w_v() const { return w_v_; }
  const Tensor2& w_o() const { return w_o_; }  ///< (count · d_head, d_model)

 private:
  MPI_Comm comm_;
  HeadShard heads_;
  std::size_t d_head_ = 0;
  Tensor2 w_q_, w_k_, w_v_, w_o_;
};

// ---- Block B: ring attention --------------------------------------------------------------------

/// How a sequence's T rows are dealt to P ranks. contiguous: P blocks of T / P rows, block r to
/// rank r. zigzag: 2P blocks of T / (2P) rows, blocks r and 2P − 1 − r to rank r (one early, one
/// late), so that every rank has the same causal work.
enum class SequenceLayout { contiguous, zigzag };

/// Block B. The positions (0 … T − 1) of the rows rank `rank` holds, in the order it holds them:
/// its blocks in increasing order, each block's rows in order.
/// @throws std::invalid_argument if T is 0, P (contiguous) or 2P (zigzag) does not divide T, or
///         rank is not in 0 … n_ranks − 1.
std::vector<std::size_t> rows_of_rank(std::size_t T, int rank, int n_ranks, SequenceLayout layout);

/// What one rank's ring_attention did: its share of the causal work.
struct RingWork {
  std::size_t tiles_computed = 0;  ///< (query block, key block) pairs whose scores it computed
  std::size_t tiles_skipped = 0;   ///< pairs entirely above the diagonal, left out
  std::size_t scores = 0;          ///< query-key scores it computed (a diagonal tile: all of it)
};

/// Block B. Single-head causal attention softmax(q kᵀ / sqrt(d_head) + causal mask) v over a
/// sequence of T rows split over the ranks of `comm` by `layout`: q, k, v (T / P, d_head) are this
/// rank's rows, as rows_of_rank lists them -> (T / P, d_head), this rank's rows of lab 02's causal
/// attention. The key/value rows travel around the ring in P − 1 steps (each a sendrecv of this
/// rank's current K and V to rank + 1, from rank − 1); each query row keeps lab 07's
/// RunningSoftmax and its unnormalised output, rescaled whenever the max grows, and is divided by
/// the sum at the end. A (query block, key block) tile entirely above the diagonal is skipped;
/// `work`, if given, receives the counts.
/// @throws std::invalid_argument if q, k, v are not (T / P, d) of one d, or as rows_of_rank.
Tensor2 ring_attention(const Tensor2& q, const Tensor2& k, const Tensor2& v, std::size_t T,
                       SequenceLayout layout, MPI_Comm comm, RingWork* work = nullptr);

// ---- Block C: data-parallel training ------------------------------------------------------------

/// The sequences one rank takes from a global batch: first, …, first + count − 1.
struct BatchShard {
  std::size_t first = 0;
  std::size_t count = 0;
};

/// Block C. Rank `rank`'s share of a global batch of B sequences: contiguous, the first B mod P
/// ranks one sequence more than the others (B = 10, P = 4: 3, 3, 2, 2).
/// @throws std::invalid_argument if B < P (a rank would have nothing), P is 0 or rank is not in
///         0 … P − 1.
BatchShard shard_batch(std::size_t batch, int rank, int n_ranks);

/// What data_parallel_gradients returns: the gradient of the global batch's mean loss, and that
/// mean, both the same on every rank.
struct DataParallelGradients {
  ModelParams<float> grads;  ///< shaped as the parameters
  double mean_loss = 0.0;    ///< the mean of the global batch's B · (T − 1) next-token losses
};

/// Block C. This rank runs lab 10's model_forward, next_token_loss and model_backward on its share
/// (shard_batch) of `global_batch`, weighting its gradient by count / B so that the ranks' sum is
/// the gradient of the global mean; then one allreduce_sum of every gradient and the loss sum,
/// packed into one buffer in tensors_of's order (N + 1 floats for N parameters).
/// @throws std::invalid_argument as shard_batch, or as lab 10's functions for the batch.
DataParallelGradients data_parallel_gradients(const ModelParams<float>& params, std::size_t n_heads,
                                              const TokenBatch& global_batch, MPI_Comm comm);

/// Block C. One data-parallel training step: data_parallel_gradients, then adam.step on every
/// rank's copy of the parameters (equal before, equal after). Returns the global batch's mean loss
/// before the update: lab 10's train_step on the whole batch, to rounding.
double data_parallel_step(ModelParams<float>& params, std::size_t n_heads, Adam& adam,
                          const TokenBatch& global_batch, MPI_Comm comm);

}  // namespace minimodel
