// Lab 14: attention across processes.
// Read labs/14-distributed-attention.md first. The API and its shapes are in
// distributed_attention.hpp; send every message through counted_mpi.hpp's allreduce_sum and
// sendrecv (not MPI directly), so that the verify program can count your bytes. Check every input
// before the first message, so that a bad input stops every rank alike.
#include "minimodel/distributed/distributed_attention.hpp"

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include <xtensor-blas/xlinalg.hpp>
#include <xtensor/xview.hpp>

#include "minimodel/attention/efficient_attention.hpp"
#include "minimodel/shapes.hpp"
#include "minimodel/todo.hpp"

namespace minimodel {

// ---- Block A: tensor-parallel heads -------------------------------------------------------------

HeadShard shard_heads(std::size_t n_heads, int rank, int n_ranks) {
  // TODO(lab 14, Block A): reject P not dividing H, then give rank r the heads r·H/P … — see
  // labs/14-distributed-attention.md
  throw Todo(
      "TODO(lab 14, Block A): reject P not dividing H, then give rank r the heads r·H/P … — "
      "see labs/14-distributed-attention.md");
}

TensorParallelAttention::TensorParallelAttention(const MultiHeadAttention& layer, MPI_Comm comm)
    : comm_(comm) {
  // TODO(lab 14, Block A): keep this rank's columns of W_Q, W_K, W_V and rows of W_O — see
  // labs/14-distributed-attention.md
  throw Todo(
      "TODO(lab 14, Block A): keep this rank's columns of W_Q, W_K, W_V and rows of W_O — "
      "see labs/14-distributed-attention.md");
}

// x: (T, d_model) -> (T, d_model), the same on every rank
Tensor2 TensorParallelAttention::forward(const Tensor2& x, bool causal) const {
  // TODO(lab 14, Block A): this rank's heads, its share of the output projection, one
  // allreduce_sum — see labs/14-distributed-attention.md
  throw Todo(
      "TODO(lab 14, Block A): this rank's heads, its share of the output projection, one "
      "allreduce_sum — see labs/14-distributed-attention.md");
}

// ---- Block B: ring attention --------------------------------------------------------------------

std::vector<std::size_t> rows_of_rank(std::size_t T, int rank, int n_ranks, SequenceLayout layout) {
  // TODO(lab 14, Block B): the positions of rank r's block (contiguous) or blocks r and 2P − 1 − r
  // (zigzag) — see labs/14-distributed-attention.md
  throw Todo(
      "TODO(lab 14, Block B): the positions of rank r's block (contiguous) or blocks r and "
      "2P − 1 − r (zigzag) — see labs/14-distributed-attention.md");
}

// q, k, v: (T / P, d) this rank's rows -> (T / P, d)
Tensor2 ring_attention(const Tensor2& q, const Tensor2& k, const Tensor2& v, std::size_t T,
                       SequenceLayout layout, MPI_Comm comm, RingWork* work) {
  // TODO(lab 14, Block B): pass K and V around the ring, merging each tile into RunningSoftmax
  // rows, the tiles above the diagonal skipped — see labs/14-distributed-attention.md
  throw Todo(
      "TODO(lab 14, Block B): pass K and V around the ring, merging each tile into "
      "RunningSoftmax rows, the tiles above the diagonal skipped — see "
      "labs/14-distributed-attention.md");
}

// ---- Block C: data-parallel training ------------------------------------------------------------

BatchShard shard_batch(std::size_t batch, int rank, int n_ranks) {
  // TODO(lab 14, Block C): rank r's contiguous share, the first B mod P ranks one more — see
  // labs/14-distributed-attention.md
  throw Todo(
      "TODO(lab 14, Block C): rank r's contiguous share, the first B mod P ranks one more — "
      "see labs/14-distributed-attention.md");
}

DataParallelGradients data_parallel_gradients(const ModelParams<float>& params, std::size_t n_heads,
                                              const TokenBatch& global_batch, MPI_Comm comm) {
  // TODO(lab 14, Block C): your share's gradient weighted by count / B, then one allreduce_sum of
  // every gradient and the loss sum — see labs/14-distributed-attention.md
  throw Todo(
      "TODO(lab 14, Block C): your share's gradient weighted by count / B, then one "
      "allreduce_sum of every gradient and the loss sum — see "
      "labs/14-distributed-attention.md");
}

double data_parallel_step(ModelParams<float>& params, std::size_t n_heads, Adam& adam,
                          const TokenBatch& global_batch, MPI_Comm comm) {
  // TODO(lab 14, Block C): data_parallel_gradients, then the same Adam step on every rank — see
  // labs/14-distributed-attention.md
  throw Todo(
      "TODO(lab 14, Block C): data_parallel_gradients, then the same Adam step on every "
      "rank — see labs/14-distributed-attention.md");
}

}  // namespace minimodel
