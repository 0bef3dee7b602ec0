// Lab 14: attention across processes. One program, run on 1, 2 or 4 MPI ranks (ctest runs it
// under `mpiexec -n P` for each; run alone it is one rank). Every test runs on every rank: it
// splits MPI_COMM_WORLD into groups of 1, 2 and 4 ranks (those that divide the world), and each
// group runs the lab's collective code as if it were the whole job, so that one run of 4 ranks
// checks P = 1, 2 and 4. Rank 0 prints the results; a failure on another rank is reported by
// rank 0 as "on rank r of P: …" (the fixture's TearDown gathers them). A rank stuck in a
// collective for a minute (another rank failed inside the lab's code and never joined it) stops
// the whole job with a message, instead of hanging.
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <xtensor/xview.hpp>

#include "minimodel/distributed/distributed_attention.hpp"
#include "support/checks.hpp"
#include "support/random_model.hpp"

namespace minimodel {
namespace {

using testing::all_close;
using testing::throws_invalid_argument;

int world_rank() { return rank_of(MPI_COMM_WORLD); }
int world_size() { return size_of(MPI_COMM_WORLD); }

// ---- The harness: failures from every rank, and no rank left waiting ---------------------------

// The failure messages of the running test on this rank, and their lock (the watchdog reads them).
std::vector<std::string>& failures_here() {
  static std::vector<std::string> messages;
  return messages;
}
std::mutex failures_lock;
// When the running test started, for the watchdog (steady clock, in ms; 0: none running).
std::atomic<long long> test_started_ms{0};
std::atomic<const char*> test_running{""};
long long now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class RankListener : public ::testing::EmptyTestEventListener {
  void OnTestStart(const ::testing::TestInfo& info) override {
    const std::lock_guard<std::mutex> lock(failures_lock);
    failures_here().clear();
    static std::string name;
    name = std::string(info.test_suite_name()) + "." + info.name();
    test_running = name.c_str();
    test_started_ms = now_ms();
  }
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    const std::lock_guard<std::mutex> lock(failures_lock);
    if (result.failed()) failures_here().push_back(result.message());
  }
  void OnTestEnd(const ::testing::TestInfo&) override { test_started_ms = 0; }
};

// Every lab 14 test: after its body, each rank reports what failed on the others.
class MpiTest : public ::testing::Test {
 protected:
  void TearDown() override {
    std::string mine;
    {
      const std::lock_guard<std::mutex> lock(failures_lock);
      if (!failures_here().empty()) mine = failures_here().front().substr(0, 4000);
    }
    const int P = world_size();
    int length = int(mine.size());
    std::vector<int> lengths(static_cast<std::size_t>(P)), offsets(lengths.size());
    MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, MPI_COMM_WORLD);
    int total = 0;
    for (int r = 0; r < P; ++r) offsets[std::size_t(r)] = total, total += lengths[std::size_t(r)];
    std::string all(std::size_t(total), ' ');
    MPI_Allgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(),
                   MPI_CHAR, MPI_COMM_WORLD);
    // Every rank adds the others' failures, so that all agree on which tests failed (with
    // --gtest_fail_fast they stop together); rank 0's are the ones printed.
    for (int r = 0; r < P; ++r) {
      if (r == world_rank()) continue;
      const std::string theirs =
          all.substr(std::size_t(offsets[std::size_t(r)]), std::size_t(lengths[std::size_t(r)]));
      if (!theirs.empty() && theirs != mine)
        ADD_FAILURE() << "on rank " << r << " of " << P << ": " << theirs;
    }
  }
};

// Runs `body(comm, P)` for each group size P of 1, 2 and 4 that divides the world: the world split
// into groups of P consecutive ranks, each group's communicator `comm`.
void for_each_group(const std::function<void(MPI_Comm, int)>& body) {
  for (const int P : {1, 2, 4}) {
    if (P > world_size() || world_size() % P != 0) continue;
    MPI_Comm group;
    MPI_Comm_split(MPI_COMM_WORLD, world_rank() / P, world_rank(), &group);
    SCOPED_TRACE("P = " + std::to_string(P) + " ranks, this one " + std::to_string(rank_of(group)));
    try {
      body(group, P);
    } catch (...) {
      MPI_Comm_free(&group);
      throw;
    }
    MPI_Comm_free(&group);
  }
}

// (rows, cols) from N(0, 1), the same on every rank for one seed.
Tensor2 normal(std::size_t rows, std::size_t cols, std::uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> draw(0.0f, 1.0f);
  Tensor2 t({rows, cols});
  for (float& x : t) x = scale * draw(rng);
  return t;
}

// The rows `rows` of `t`, in that order.
Tensor2 take_rows(const Tensor2& t, const std::vector<std::size_t>& rows) {
  Tensor2 out({rows.size(), t.shape(1)});
  for (std::size_t i = 0; i < rows.size(); ++i) xt::row(out, i) = xt::row(t, rows[i]);
  return out;
}

// ---- Block A: tensor-parallel heads -------------------------------------------------------------

// Lab 01's toy sizes, small: T = 8 tokens, d_model = 16, H = 4 heads of 4, split over 1, 2, 4.
constexpr std::size_t kT = 8, kD = 16, kH = 4;
// Each output is a sum of d_model products of O(1) numbers, which the ranks add in another
// grouping than one dot does: float32 rounding of a few 1e-7; 1e-5 is the labs' tolerance.
constexpr double kTolerance = 1e-5;

using ShardHeads = MpiTest;
using TensorParallel = MpiTest;

TEST_F(ShardHeads, GivesEveryRankAnEqualContiguousShare) {
  for (const int P : {1, 2, 4, 8}) {
    for (int r = 0; r < P; ++r) {
      const HeadShard shard = shard_heads(8, r, P);
      EXPECT_EQ(shard.first, std::size_t(r) * 8 / std::size_t(P)) << "rank " << r << " of " << P;
      EXPECT_EQ(shard.count, 8 / std::size_t(P)) << "rank " << r << " of " << P;
    }
  }
}

TEST_F(ShardHeads, RejectsRanksThatDoNotDivideTheHeads) {
  EXPECT_TRUE(throws_invalid_argument([] { shard_heads(6, 0, 4); }, {"6 heads", "4 ranks"}));
  EXPECT_TRUE(throws_invalid_argument([] { shard_heads(3, 1, 2); }, {"3 heads", "2 ranks"}));
  EXPECT_TRUE(throws_invalid_argument([] { shard_heads(4, 0, 0); }, {"0 ranks"}));
  EXPECT_TRUE(throws_invalid_argument([] { shard_heads(4, 2, 2); }, {"rank 2"}));
}

TEST_F(TensorParallel, KeepsItsColumnsOfWqWkWvAndItsRowsOfWo) {
  const MultiHeadAttention layer(kD, kH, 7);
  for_each_group([&](MPI_Comm comm, int P) {
    const TensorParallelAttention shard(layer, comm);
    const std::size_t width = kD / std::size_t(P), first = std::size_t(rank_of(comm)) * width;
    EXPECT_EQ(shard.heads().first, std::size_t(rank_of(comm)) * kH / std::size_t(P));
    EXPECT_TRUE(all_close(shard.w_q(),
                          xt::view(layer.w_q(), xt::all(), xt::range(first, first + width)), 0.0));
    EXPECT_TRUE(all_close(shard.w_k(),
                          xt::view(layer.w_k(), xt::all(), xt::range(first, first + width)), 0.0));
    EXPECT_TRUE(all_close(shard.w_v(),
                          xt::view(layer.w_v(), xt::all(), xt::range(first, first + width)), 0.0));
    EXPECT_TRUE(all_close(shard.w_o(),
                          xt::view(layer.w_o(), xt::range(first, first + width), xt::all()), 0.0));
  });
}

TEST_F(TensorParallel, EqualsLab01sLayerOnOneTwoAndFourRanks) {
  MultiHeadAttention layer(kD, kH, 11);
  const Tensor2 x = normal(kT, kD, 12);
  const Tensor2 expected = layer.forward(x);
  for_each_group([&](MPI_Comm comm, int) {
    const TensorParallelAttention shard(layer, comm);
    EXPECT_TRUE(all_close(shard.forward(x), expected, kTolerance));
  });
}

TEST_F(TensorParallel, EqualsLab02sCausalLayerOnOneTwoAndFourRanks) {
  MultiHeadAttention layer(kD, kH, 13);
  const Tensor2 x = normal(kT, kD, 14);
  const Tensor2 expected = layer.forward(x, causal_mask(kT));
  for_each_group([&](MPI_Comm comm, int) {
    const TensorParallelAttention shard(layer, comm);
    EXPECT_TRUE(all_close(shard.forward(x, true), expected, kTolerance));
  });
}

TEST_F(TensorParallel, SendsOneAllReduceOfTTimesDModelFloats) {
  const MultiHeadAttention layer(kD, kH, 15);
  const Tensor2 x = normal(kT, kD, 16);
  for_each_group([&](MPI_Comm comm, int) {
    const TensorParallelAttention shard(layer, comm);
    reset_comm_stats();
    shard.forward(x);
    EXPECT_EQ(comm_stats().calls, 1u) << "one all-reduce per layer";
    EXPECT_EQ(comm_stats().bytes_sent, kT * kD * sizeof(float)) << "T · d_model floats";
  });
}

TEST_F(TensorParallel, EveryRankRejectsRanksThatDoNotDivideTheHeads) {
  // 3 heads over every rank of the world: 2 and 4 ranks do not divide them. Every rank must throw
  // the same error before it sends anything (a rank that went on would wait forever). Run alone,
  // one rank divides everything: then the error of 2 ranks is asked of shard_heads.
  const MultiHeadAttention layer(12, 3, 17);
  const int P = world_size();
  if (P == 1) {
    EXPECT_TRUE(throws_invalid_argument([] { shard_heads(3, 0, 2); }, {"3 heads", "2 ranks"}));
    return;
  }
  EXPECT_TRUE(throws_invalid_argument([&] { TensorParallelAttention(layer, MPI_COMM_WORLD); },
                                      {"3 heads", std::to_string(P) + " ranks"}));
}

TEST_F(TensorParallel, RejectsInputOfTheWrongWidth) {
  const MultiHeadAttention layer(kD, kH, 18);
  for_each_group([&](MPI_Comm comm, int) {
    const TensorParallelAttention shard(layer, comm);
    EXPECT_TRUE(
        throws_invalid_argument([&] { shard.forward(normal(kT, kD + 1, 19)); }, {"(8, 17)", "16"}));
  });
}

// ---- Block B: ring attention --------------------------------------------------------------------

// A sequence of 16 rows of width 8: 4 blocks of 4 (contiguous) or 8 of 2 (zigzag) on 4 ranks.
constexpr std::size_t kSeq = 16, kWidth = 8;

using RowsOfRank = MpiTest;
using RingAttention = MpiTest;

TEST_F(RowsOfRank, ContiguousGivesRankRBlockR) {
  EXPECT_EQ(rows_of_rank(8, 0, 1, SequenceLayout::contiguous),
            (std::vector<std::size_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(rows_of_rank(8, 1, 4, SequenceLayout::contiguous), (std::vector<std::size_t>{2, 3}));
  EXPECT_EQ(rows_of_rank(8, 3, 4, SequenceLayout::contiguous), (std::vector<std::size_t>{6, 7}));
}

TEST_F(RowsOfRank, ZigzagGivesEachRankOneEarlyAndOneLateBlock) {
  EXPECT_EQ(rows_of_rank(8, 0, 2, SequenceLayout::zigzag), (std::vector<std::size_t>{0, 1, 6, 7}));
  EXPECT_EQ(rows_of_rank(8, 1, 2, SequenceLayout::zigzag), (std::vector<std::size_t>{2, 3, 4, 5}));
  EXPECT_EQ(rows_of_rank(8, 0, 4, SequenceLayout::zigzag), (std::vector<std::size_t>{0, 7}));
  EXPECT_EQ(rows_of_rank(8, 2, 4, SequenceLayout::zigzag), (std::vector<std::size_t>{2, 5}));
  EXPECT_EQ(rows_of_rank(4, 0, 1, SequenceLayout::zigzag), (std::vector<std::size_t>{0, 1, 2, 3}));
}

TEST_F(RowsOfRank, RejectsALengthThatDoesNotSplit) {
  EXPECT_TRUE(throws_invalid_argument([] { rows_of_rank(6, 0, 4, SequenceLayout::contiguous); },
                                      {"T = 6", "4 ranks"}));
  EXPECT_TRUE(throws_invalid_argument([] { rows_of_rank(12, 0, 4, SequenceLayout::zigzag); },
                                      {"T = 12", "8 equal blocks"}));
  EXPECT_TRUE(throws_invalid_argument([] { rows_of_rank(8, 4, 4, SequenceLayout::contiguous); },
                                      {"rank 4"}));
}

// Lab 02's causal attention of the whole sequence against the ring's rows on each rank.
void expect_ring_equals_causal(float q_scale, double tolerance) {
  const Tensor2 q = normal(kSeq, kWidth, 21, q_scale), k = normal(kSeq, kWidth, 22),
                v = normal(kSeq, kWidth, 23);
  const Tensor2 expected = single_head_attention(q, k, v, causal_mask(kSeq)).output;
  for (const SequenceLayout layout : {SequenceLayout::contiguous, SequenceLayout::zigzag}) {
    SCOPED_TRACE(layout == SequenceLayout::zigzag ? "zigzag" : "contiguous");
    for_each_group([&](MPI_Comm comm, int P) {
      const std::vector<std::size_t> rows = rows_of_rank(kSeq, rank_of(comm), P, layout);
      const Tensor2 out = ring_attention(take_rows(q, rows), take_rows(k, rows), take_rows(v, rows),
                                         kSeq, layout, comm);
      EXPECT_TRUE(all_close(out, take_rows(expected, rows), tolerance));
    });
  }
}

TEST_F(RingAttention, EqualsLab02sCausalAttentionOnOneTwoAndFourRanks) {
  // The online softmax adds the same terms as lab 00's softmax in another order: float32 rounding.
  expect_ring_equals_causal(1.0f, kTolerance);
}

TEST_F(RingAttention, IsStableForLargeScores) {
  // Queries 40 times larger: scores q·k / sqrt(8) with a standard deviation of 40, the largest
  // above 100, whose exp overflows float32 (above 88) unless the running max is subtracted. With
  // it every exponent is <= 0, and the reference stays within 2e-6 of lab 02's attention (the
  // scores' rounding, relative to their size, moves the weights a little): the labs' 1e-5 holds.
  expect_ring_equals_causal(40.0f, kTolerance);
}

TEST_F(RingAttention, SkipsTheTilesAboveTheDiagonal) {
  // Contiguous: rank r's queries meet the key blocks 0 … r (r + 1 tiles) and skip the P − 1 − r
  // later ones. Zigzag: its early block r meets r + 1 key blocks, its late block 2P − 1 − r meets
  // 2P − r: 2P + 1 tiles of the 4P, 2P − 1 skipped.
  const Tensor2 q = normal(kSeq, kWidth, 24);
  for_each_group([&](MPI_Comm comm, int P) {
    const std::size_t r = std::size_t(rank_of(comm)), p = std::size_t(P);
    for (const SequenceLayout layout : {SequenceLayout::contiguous, SequenceLayout::zigzag}) {
      const Tensor2 mine = take_rows(q, rows_of_rank(kSeq, rank_of(comm), P, layout));
      RingWork work;
      ring_attention(mine, mine, mine, kSeq, layout, comm, &work);
      if (layout == SequenceLayout::contiguous) {
        const std::size_t b = kSeq / p;
        EXPECT_EQ(work.tiles_computed, r + 1) << "contiguous";
        EXPECT_EQ(work.tiles_skipped, p - 1 - r) << "contiguous";
        EXPECT_EQ(work.scores, r * b * b + b * (b + 1) / 2) << "contiguous";
      } else {
        EXPECT_EQ(work.tiles_computed, 2 * p + 1) << "zigzag";
        EXPECT_EQ(work.tiles_skipped, 2 * p - 1) << "zigzag";
      }
    }
  });
}

TEST_F(RingAttention, ZigzagGivesEveryRankTheSameWork) {
  // Every rank computes (2P − 1) full tiles and two diagonal ones: kSeq (kSeq + 1) / 2 scores in
  // all, split evenly. (Contiguous: the last rank does 2P − 1 times the first's, for large blocks.)
  const Tensor2 q = normal(kSeq, kWidth, 25);
  for_each_group([&](MPI_Comm comm, int P) {
    const Tensor2 mine = take_rows(q, rows_of_rank(kSeq, rank_of(comm), P, SequenceLayout::zigzag));
    RingWork work;
    ring_attention(mine, mine, mine, kSeq, SequenceLayout::zigzag, comm, &work);
    long long scores = static_cast<long long>(work.scores), least = 0, most = 0, total = 0;
    MPI_Allreduce(&scores, &least, 1, MPI_LONG_LONG, MPI_MIN, comm);
    MPI_Allreduce(&scores, &most, 1, MPI_LONG_LONG, MPI_MAX, comm);
    MPI_Allreduce(&scores, &total, 1, MPI_LONG_LONG, MPI_SUM, comm);
    EXPECT_EQ(least, most) << "the ranks' scores differ";
    EXPECT_EQ(total, static_cast<long long>(kSeq * (kSeq + 1) / 2)) << "the causal triangle";
  });
}

TEST_F(RingAttention, SendsPMinusOneBlocksOfKAndV) {
  const Tensor2 q = normal(kSeq, kWidth, 26);
  for_each_group([&](MPI_Comm comm, int P) {
    for (const SequenceLayout layout : {SequenceLayout::contiguous, SequenceLayout::zigzag}) {
      const Tensor2 mine = take_rows(q, rows_of_rank(kSeq, rank_of(comm), P, layout));
      reset_comm_stats();
      ring_attention(mine, mine, mine, kSeq, layout, comm);
      const std::size_t p = std::size_t(P);
      EXPECT_EQ(comm_stats().calls, p - 1) << "P − 1 steps around the ring";
      EXPECT_EQ(comm_stats().bytes_sent, (p - 1) * 2 * (kSeq / p) * kWidth * sizeof(float))
          << "each step: this rank's T / P rows of K and of V";
    }
  });
}

TEST_F(RingAttention, RejectsRowsOfTheWrongShape) {
  for_each_group([&](MPI_Comm comm, int P) {
    const std::size_t local = kSeq / std::size_t(P);
    const Tensor2 good = normal(local, kWidth, 27), wide = normal(local, kWidth + 1, 28),
                  long_ = normal(local + 1, kWidth, 29);
    const std::string rows = std::to_string(local);
    EXPECT_TRUE(throws_invalid_argument(
        [&] { ring_attention(long_, long_, long_, kSeq, SequenceLayout::contiguous, comm); },
        {shape_of(long_), rows}));
    EXPECT_TRUE(throws_invalid_argument(
        [&] { ring_attention(good, wide, good, kSeq, SequenceLayout::contiguous, comm); },
        {shape_of(good), shape_of(wide)}));
    EXPECT_TRUE(throws_invalid_argument(
        [&] { ring_attention(good, good, good, kSeq + 1, SequenceLayout::zigzag, comm); },
        {"T = 17"}));
  });
}

// ---- Block C: data-parallel training ------------------------------------------------------------

using ShardBatch = MpiTest;
using DataParallel = MpiTest;

// A small model of lab 10: V 8, sequences of 8, d_model 16, 2 heads, 2 layers.
const ModelConfig kModel{8, 8, 16, 2, 2};

TEST_F(ShardBatch, GivesTheFirstRanksOneSequenceMore) {
  const std::vector<std::pair<std::size_t, std::size_t>> ten_over_four = {
      {0, 3}, {3, 3}, {6, 2}, {8, 2}};
  for (int r = 0; r < 4; ++r) {
    const BatchShard shard = shard_batch(10, r, 4);
    EXPECT_EQ(shard.first, ten_over_four[std::size_t(r)].first) << "rank " << r;
    EXPECT_EQ(shard.count, ten_over_four[std::size_t(r)].second) << "rank " << r;
  }
  EXPECT_EQ(shard_batch(8, 1, 2).first, 4u);
  EXPECT_EQ(shard_batch(8, 1, 2).count, 4u);
  EXPECT_EQ(shard_batch(5, 0, 1).count, 5u);
}

TEST_F(ShardBatch, RejectsABatchSmallerThanTheRanks) {
  EXPECT_TRUE(throws_invalid_argument([] { shard_batch(3, 0, 4); }, {"3 sequences", "4"}));
  EXPECT_TRUE(throws_invalid_argument([] { shard_batch(8, 2, 2); }, {"rank 2"}));
}

// A global batch of 6 sequences: 6, 3 + 3, 2 + 2 + 1 + 1 on 1, 2, 4 ranks.
TokenBatch global_batch(std::uint64_t seed, std::size_t sequences = 6) {
  std::mt19937_64 rng(seed);
  return copy_task(sequences, kModel.max_len, kModel.vocab, rng).tokens;
}

TEST_F(DataParallel, GradientsEqualLab10sOnTheGlobalBatch) {
  const ModelParams<float> params = testing::random_model(kModel, 31);
  const TokenBatch batch = global_batch(32);
  ModelTape<float> tape;
  const xt::xtensor<float, 3> logits = model_forward(params, kModel.n_heads, batch, tape);
  xt::xtensor<float, 3> d_logits;
  const Matrix<float> losses = next_token_loss(logits, batch, d_logits);
  const ModelParams<float> expected = model_backward(params, kModel.n_heads, tape, d_logits);
  const double mean = double(xt::mean(losses)());
  for_each_group([&](MPI_Comm comm, int) {
    const DataParallelGradients got = data_parallel_gradients(params, kModel.n_heads, batch, comm);
    const auto g = tensors_of(got.grads);
    const auto e = tensors_of(expected);
    ASSERT_EQ(g.size(), e.size());
    // Gradients of order 0.1 summed over the batch in another grouping: float32 rounding.
    for (std::size_t i = 0; i < g.size(); ++i)
      EXPECT_TRUE(all_close(*g[i], *e[i], kTolerance)) << "tensor " << i << " of tensors_of";
    EXPECT_NEAR(got.mean_loss, mean, kTolerance) << "the global batch's mean loss";
  });
}

TEST_F(DataParallel, SendsEveryParameterOnceAndTheLossSum) {
  const ModelParams<float> params = testing::random_model(kModel, 33);
  std::size_t n = 0;
  for (const Matrix<float>* t : tensors_of(params)) n += t->size();
  const TokenBatch batch = global_batch(34);
  for_each_group([&](MPI_Comm comm, int) {
    reset_comm_stats();
    data_parallel_gradients(params, kModel.n_heads, batch, comm);
    EXPECT_EQ(comm_stats().calls, 1u) << "one all-reduce per step";
    EXPECT_EQ(comm_stats().bytes_sent, (n + 1) * sizeof(float)) << n << " parameters and the loss";
  });
}

TEST_F(DataParallel, LossCurveEqualsTheSingleProcessRun) {
  // 12 steps of Adam at lr 1e-2 on fresh batches of 6. Run alone, train_step on the whole batch;
  // across ranks, data_parallel_step. Their gradients differ by float32 rounding (the batch is
  // summed in another order), and Adam divides by sqrt(v): a first step moves every parameter by
  // about lr whatever its gradient's size, so a rounding difference in a tiny gradient can flip a
  // step's sign. On 2 and 4 ranks the reference's losses differ from the single run's by at most
  // 3.6e-7 (two float32 ulps of a loss near 2.2); 1e-5 leaves a factor of 30 and is still 35000
  // times below the loss's fall over the run.
  constexpr int kSteps = 12;
  constexpr double kLossTolerance = 1e-5;
  const AdamOptions options{1e-2f, 0.9f, 0.999f, 1e-8f};
  std::vector<double> single;
  {
    ModelParams<float> params = testing::random_model(kModel, 35);
    Adam adam(params, options);
    for (int step = 0; step < kSteps; ++step)
      single.push_back(double(xt::mean(
          train_step(params, kModel.n_heads, adam, global_batch(100 + std::uint64_t(step))))()));
  }
  for_each_group([&](MPI_Comm comm, int) {
    ModelParams<float> params = testing::random_model(kModel, 35);
    Adam adam(params, options);
    for (int step = 0; step < kSteps; ++step) {
      const double loss = data_parallel_step(params, kModel.n_heads, adam,
                                             global_batch(100 + std::uint64_t(step)), comm);
      EXPECT_NEAR(loss, single[std::size_t(step)], kLossTolerance) << "step " << step;
    }
  });
  EXPECT_GT(single.front() - single.back(), 0.1) << "the run learns something";
}

TEST_F(DataParallel, EveryRankKeepsTheSameParameters) {
  // The all-reduce hands every rank the same sum, so every rank takes the same Adam step: after a
  // few steps the copies are equal bit for bit, not merely close.
  for_each_group([&](MPI_Comm comm, int) {
    ModelParams<float> params = testing::random_model(kModel, 36);
    Adam adam(params, {1e-2f, 0.9f, 0.999f, 1e-8f});
    for (int step = 0; step < 3; ++step)
      data_parallel_step(params, kModel.n_heads, adam, global_batch(200 + std::uint64_t(step)),
                         comm);
    for (Matrix<float>* t : tensors_of(params)) {
      Matrix<float> least = *t, most = *t;
      MPI_Allreduce(MPI_IN_PLACE, least.data(), int(least.size()), MPI_FLOAT, MPI_MIN, comm);
      MPI_Allreduce(MPI_IN_PLACE, most.data(), int(most.size()), MPI_FLOAT, MPI_MAX, comm);
      EXPECT_TRUE(all_close(least, most, 0.0)) << "the ranks' copies differ";
    }
  });
}

}  // namespace
}  // namespace minimodel

// MPI around GoogleTest: only rank 0 prints and writes --gtest_output; a watchdog stops the job
// when one test runs for a minute (MINIMODEL_MPI_TEST_SECONDS sets another limit).
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  const int rank = minimodel::world_rank();
  ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (rank != 0) {
    delete listeners.Release(listeners.default_result_printer());
    GTEST_FLAG_SET(output, "");
  }
  listeners.Append(new minimodel::RankListener);
  const char* limit_text = std::getenv("MINIMODEL_MPI_TEST_SECONDS");
  const long long limit_ms = 1000LL * (limit_text ? std::atoll(limit_text) : 60);
  std::atomic<bool> finished{false};
  std::thread watchdog([&] {
    while (!finished) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      const long long started = minimodel::test_started_ms;
      if (started != 0 && minimodel::now_ms() - started > limit_ms) {
        std::string failed;
        {
          const std::lock_guard<std::mutex> lock(minimodel::failures_lock);
          if (!minimodel::failures_here().empty())
            failed = " It failed first with: " + minimodel::failures_here().front();
        }
        std::fprintf(stderr,
                     "lab 14 tests, rank %d: %s has run for %lld s; a rank probably failed or "
                     "stopped while this one waits for it in a collective. Stopping every "
                     "rank.%s\n",
                     rank, minimodel::test_running.load(), limit_ms / 1000, failed.c_str());
        std::fflush(stderr);
        std::_Exit(3);  // mpiexec then stops the other ranks
      }
    }
  });
  const int status = RUN_ALL_TESTS();
  finished = true;
  watchdog.join();
  MPI_Finalize();
  return status;
}
