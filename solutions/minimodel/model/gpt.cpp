// Lab 13, Block A: GELU, the MLP, the pre-LN block, the GPT and its loss. Reference solution.
// Every linear layer is one matrix product over all B·T rows forward, and two backward taken block
// of rows by block of rows (libxsmm's kernels, small_gemm.hpp; OpenBLAS in double); LayerNorm,
// GELU and softmax are row loops that write into the tape, so a tape kept across steps of one (B,
// T) is never reallocated. Attention runs per (sequence, head) in tiles of query rows, each tile
// multiplying only the keys it can see: the masked half is skipped but for the diagonal tiles.
#include "minimodel/model/gpt.hpp"

#include <cblas.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <initializer_list>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "minimodel/shapes.hpp"
#include "simd_rows.hpp"
#include "small_gemm.hpp"

namespace minimodel {

namespace {

constexpr double kLayerNormEps = 1e-5;
constexpr std::size_t kTile = 32;  // query rows per attention tile

// c (m, n) = op(a) (m, k) op(b) (k, n), plus c if accumulate, op = ᵀ if trans (a transposed
// stored (k, m), b (n, k)), by OpenBLAS.
template <class Real>
void blas_gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k,
               const Real* a, std::size_t lda, const Real* b, std::size_t ldb, bool accumulate,
               Real* c, std::size_t ldc) {
  const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
  const Real beta = accumulate ? 1 : 0;
  if constexpr (std::is_same_v<Real, float>)
    cblas_sgemm(CblasRowMajor, ta, tb, int(m), int(n), int(k), 1.0f, a, int(lda), b, int(ldb), beta,
                c, int(ldc));
  else
    cblas_dgemm(CblasRowMajor, ta, tb, int(m), int(n), int(k), 1.0, a, int(lda), b, int(ldb), beta,
                c, int(ldc));
}

// One product c (m, n) = op(a) (m, k) b (k, n) (+ c), on the calling thread: in float by
// libxsmm's kernel for its sizes, which reads the operands where they lie (small_gemm.hpp); in
// double (the finite-difference checks) by OpenBLAS.
template <class Real>
void product(bool trans_a, std::size_t m, std::size_t n, std::size_t k, const Real* a,
             std::size_t lda, const Real* b, std::size_t ldb, bool accumulate, Real* c,
             std::size_t ldc) {
  if constexpr (std::is_same_v<Real, float>)
    SmallGemm(trans_a, m, n, k, lda, ldb, ldc, accumulate)(a, b, c);
  else
    blas_gemm(trans_a, false, m, n, k, a, lda, b, ldb, accumulate, c, ldc);
}

// Gives `tensor` this shape, reallocating only if it has another.
template <class T, std::size_t R>
void ensure_shape(xt::xtensor<T, R>& tensor, const std::array<std::size_t, R>& shape) {
  if (!std::equal(shape.begin(), shape.end(), tensor.shape().begin())) tensor.resize(shape);
}

template <class T, std::size_t R>
bool same_shape(const xt::xtensor<T, R>& a, const xt::xtensor<T, R>& b) {
  return std::equal(a.shape().begin(), a.shape().end(), b.shape().begin());
}

// How many workers parallel_for uses for n items of `work` each (about the floating-point
// operations of one): as many as OpenBLAS has threads (OPENBLAS_NUM_THREADS), so that the row loops
// and the attention use the cores the matrix products use, but no more than give each
// `least` of work (a thread costs tens of µs to start, about 2^18 operations of a row loop: the
// tests' tiny models, and the forward of a few tokens, stay on one).
std::size_t worker_count(std::size_t n, std::size_t work, std::size_t least = 1 << 18) {
  const std::size_t threads = std::size_t(std::max(1, openblas_get_num_threads()));
  return std::max<std::size_t>(1, std::min({threads, n, n * work / least}));
}

// body(begin, end, worker) on contiguous chunks of [0, n), one per worker, the calling thread being
// worker 0. Nothing in a body may throw: inputs are checked before. Each item is computed by one
// worker in the same order whatever their number, so the results do not depend on it.
template <class Body>
void run_on_workers(std::size_t workers, std::size_t n, const Body& body) {
  if (workers == 1) {
    if (n > 0) body(std::size_t(0), n, std::size_t(0));
    return;
  }
  std::vector<std::thread> threads;
  for (std::size_t w = 1; w < workers; ++w)
    threads.emplace_back(
        [&body, n, workers, w] { body(w * n / workers, (w + 1) * n / workers, w); });
  body(std::size_t(0), n / workers, std::size_t(0));
  for (std::thread& thread : threads) thread.join();
}

// run_on_workers on worker_count(n, work) workers.
template <class Body>
void parallel_for(std::size_t n, std::size_t work, const Body& body) {
  run_on_workers(worker_count(n, work), n, body);
}

// OpenBLAS's thread count, set while this lasts. Where our workers split a product among
// themselves, OpenBLAS runs on one thread in each: its own threads would spin, idle between its
// calls, on the cores our workers need (a two-thread step took 139 ms instead of 99).
class OpenBlasThreads {
 public:
  explicit OpenBlasThreads(int threads) : saved_(openblas_get_num_threads()) {
    if (threads != saved_) openblas_set_num_threads(threads);
  }
  ~OpenBlasThreads() {
    if (openblas_get_num_threads() != saved_) openblas_set_num_threads(saved_);
  }
  OpenBlasThreads(const OpenBlasThreads&) = delete;
  OpenBlasThreads& operator=(const OpenBlasThreads&) = delete;

 private:
  int saved_;
};

// out (cols, rows) = the (rows, cols) block at m with row stride ld, transposed. In float by
// libxsmm's transposition (column-major: m is its (cols, rows)): a plain loop, writing rows 128
// floats apart, took 3 ms of a one-thread step on the heads' keys and values.
template <class Real>
void transpose(const Real* m, std::size_t rows, std::size_t cols, std::size_t ld, Real* out) {
  if constexpr (std::is_same_v<Real, float>) {
    libxsmm_otrans(out, m, sizeof(float), libxsmm_blasint(cols), libxsmm_blasint(rows),
                   libxsmm_blasint(ld), libxsmm_blasint(rows));
  } else {
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t j = 0; j < cols; ++j) out[j * rows + i] = m[i * ld + j];
  }
}

// A whole layer's product c (m, n) = a (m, k) op(b) (k, n) (+ c), op(b) = bᵀ if trans_b (b stored
// (n, k)), as blas_gemm, the rows of c split evenly over the workers. In float by libxsmm's
// kernels, a call per block of at most kGemmRows rows and kGemmColumns columns (the unembedding's
// 2048 columns of wteᵀ do not stay in L2 at once); libxsmm 1.17 makes no kernel for op(b) = bᵀ,
// so b is transposed first, into a buffer kept for the next call. In double by OpenBLAS on one
// thread in each worker. Either computes each element of c by the same chain of multiply-adds over
// k whatever the rows around it, so the results do not depend on the number of workers
// (tests/gpt_checkpoint_test.cpp). prepare(first, count), if given, runs on rows first … first +
// count − 1 of c just before their block's product, while they are in cache: it can write what the
// product adds to (accumulate).
constexpr std::size_t kGemmRows = 256, kGemmColumns = 512;

struct NoPreparation {
  void operator()(std::size_t, std::size_t) const {}
};

template <class Real, class Prepare = NoPreparation>
void gemm(bool trans_b, std::size_t m, std::size_t n, std::size_t k, const Real* a, std::size_t lda,
          const Real* b, std::size_t ldb, bool accumulate, Real* c, std::size_t ldc,
          const Prepare& prepare = Prepare{}) {
  constexpr bool blas = !std::is_same_v<Real, float>;
  if (trans_b && !blas) {
    static thread_local std::vector<Real> b_t;
    b_t.resize(k * n);
    transpose(b, n, k, ldb, b_t.data());
    b = b_t.data();
    ldb = n;
    trans_b = false;
  }
  // a kernel does 2^22 flops in about the 40 µs a thread takes to start
  const std::size_t workers = worker_count(m, 2 * n * k, 1 << 22);
  const std::size_t per_worker = (m + workers - 1) / workers;
  const std::size_t block_rows = blas ? per_worker : std::min(kGemmRows, per_worker);
  const std::size_t blocks = (m + block_rows - 1) / block_rows;
  const OpenBlasThreads one_each(1);  // read by worker_count: set after it
  run_on_workers(workers, blocks, [&](std::size_t first, std::size_t last, std::size_t) {
    for (std::size_t block = first; block < last; ++block) {
      const std::size_t r0 = block * block_rows, rows = std::min(block_rows, m - r0);
      prepare(r0, rows);
      if (blas)
        blas_gemm(false, trans_b, rows, n, k, a + r0 * lda, lda, b, ldb, accumulate, c + r0 * ldc,
                  ldc);
      else
        for (std::size_t c0 = 0; c0 < n; c0 += kGemmColumns)
          product(false, rows, std::min(kGemmColumns, n - c0), k, a + r0 * lda, lda, b + c0, ldb,
                  accumulate, c + r0 * ldc + c0, ldc);
    }
  });
}

// A layer's backward has two products that read the same rows of d_out (N, n): dx = d_out wᵀ row
// by row, and dw = Σ over the rows of x_rowᵀ d_out_row. Two whole-layer products read d_out from
// memory twice; here each block of kBackwardRows rows gets both while it is in cache (5 to 9 % of
// the products' time in lab 13's step on a Zen 4). row_product(r0, count) computes the block's rows
// of the first; sum_product(r0, count, first, m) adds the block's part to rows first … first + m −
// 1 of the second (of sum_rows, at most kGemmRows a call). Each worker takes its share of the
// blocks' rows and of the sum's rows from every block, in order: each element is the same chain of
// multiply-adds whatever the number of workers. work is the flops of a row.
constexpr std::size_t kBackwardRows = 128;

template <class RowProduct, class SumProduct>
void backward_products(std::size_t rows, std::size_t sum_rows, std::size_t work,
                       const RowProduct& row_product, const SumProduct& sum_product) {
  const std::size_t workers = worker_count(rows, 2 * work, 1 << 22);
  const std::size_t blocks = (rows + kBackwardRows - 1) / kBackwardRows;
  const OpenBlasThreads one_each(1);  // in double; read by worker_count: set after it
  run_on_workers(workers, workers, [&](std::size_t worker, std::size_t, std::size_t) {
    const std::size_t first_block = worker * blocks / workers,
                      last_block = (worker + 1) * blocks / workers;
    const std::size_t first = worker * sum_rows / workers, last = (worker + 1) * sum_rows / workers;
    for (std::size_t block = 0; block < blocks; ++block) {
      const std::size_t r0 = block * kBackwardRows, count = std::min(kBackwardRows, rows - r0);
      if (block >= first_block && block < last_block) row_product(r0, count);
      for (std::size_t s0 = first; s0 < last; s0 += kGemmRows)
        sum_product(r0, count, s0, std::min(kGemmRows, last - s0));
    }
  });
}

// out (N, n) = x (N, k) @ w (k, n) + b (n), plus residual (N, n) if given: each block of out's
// rows starts as its bias (and residual) just before its product adds to it.
template <class Real>
void linear_forward(const Matrix<Real>& x, const Matrix<Real>& w, const Vector<Real>& b,
                    Matrix<Real>& out, const Matrix<Real>* residual = nullptr) {
  const std::size_t rows = x.shape(0), k = w.shape(0), n = w.shape(1);
  ensure_shape(out, {rows, n});
  const Real* bias = b.data();
  gemm(false, rows, n, k, x.data(), k, w.data(), n, true, out.data(), n,
       [&](std::size_t first, std::size_t count) {
         for (std::size_t r = first; r < first + count; ++r) {
           Real* row = out.data() + r * n;
           if (!residual) {
             std::copy(bias, bias + n, row);
             continue;
           }
           const Real* skip = residual->data() + r * n;
           for (std::size_t j = 0; j < n; ++j) row[j] = bias[j] + skip[j];
         }
       });
}

// One linear layer out = x w + b in a backward: its weight, the gradient of its output (N, n), and
// where its weights' gradients go.
template <class Real>
struct LinearGrads {
  const Matrix<Real>& w;
  const Matrix<Real>& d_out;
  Matrix<Real>& dw;
  Vector<Real>& db;
};

// The backward of linear layers on one input x (N, k) (q, k and v share ln_1's output): for each,
// dw = xᵀ d_out and db = Σ_rows d_out; dx (written) = Σ over them of d_out wᵀ. All from each block
// of rows in turn, x's block read once for all of them.
template <class Real>
void linear_backward(const Matrix<Real>& x, std::initializer_list<LinearGrads<Real>> layers,
                     Matrix<Real>& dx) {
  const std::size_t rows = x.shape(0), k = x.shape(1);
  ensure_shape(dx, {rows, k});
  std::size_t work = 0;                       // flops of a row, each product
  static thread_local std::vector<Real> w_t;  // each layer's wᵀ (n, k), one after the other
  w_t.resize(0);
  for (const LinearGrads<Real>& layer : layers) {
    const std::size_t n = layer.w.shape(1);
    ensure_shape(layer.dw, {k, n});
    ensure_shape(layer.db, {n});
    w_t.resize(w_t.size() + n * k);
    transpose(layer.w.data(), k, n, n, w_t.data() + w_t.size() - n * k);
    work += 2 * n * k;
  }
  const Real* all_w_t = w_t.data();  // the workers' threads see their own w_t
  backward_products(
      rows, k, work,
      [&](std::size_t r0, std::size_t count) {
        const Real* layer_w_t = all_w_t;
        bool accumulate = false;
        for (const LinearGrads<Real>& layer : layers) {
          const std::size_t n = layer.w.shape(1);
          product(false, count, k, n, layer.d_out.data() + r0 * n, n, layer_w_t, k, accumulate,
                  dx.data() + r0 * k, k);
          layer_w_t += n * k;
          accumulate = true;
        }
      },
      [&](std::size_t r0, std::size_t count, std::size_t first, std::size_t m) {
        for (const LinearGrads<Real>& layer : layers) {
          const std::size_t n = layer.w.shape(1);
          const Real* d_out = layer.d_out.data() + r0 * n;
          product(true, m, n, count, x.data() + r0 * k + first, k, d_out, n, r0 > 0,
                  layer.dw.data() + first * n, n);
          if (first != 0) continue;  // the worker with dw's first rows sums db too
          Real* sum = layer.db.data();
          if (r0 == 0) std::fill(sum, sum + n, Real(0));
          for (std::size_t r = 0; r < count; ++r)
            for (std::size_t j = 0; j < n; ++j) sum[j] += d_out[r * n + j];
        }
      });
}

// Σ row[j] and Σ a[j] b[j] over j < n: in float through the SIMD loops of lab 07 (a loop's float
// sum cannot be vectorised, each add waiting for the last: half of LayerNorm's time).
template <class Real>
Real row_sum(const Real* row, std::size_t n) {
  if constexpr (std::is_same_v<Real, float>) return simd::row_sum(row, n);
  Real sum = 0;
  for (std::size_t j = 0; j < n; ++j) sum += row[j];
  return sum;
}

template <class Real>
Real row_dot(const Real* a, const Real* b, std::size_t n) {
  if constexpr (std::is_same_v<Real, float>) return simd::row_dot(a, b, n);
  Real sum = 0;
  for (std::size_t j = 0; j < n; ++j) sum += a[j] * b[j];
  return sum;
}

// LayerNorm over each row of x (N, d), biased variance, eps 1e-5, into `norm`.
template <class Real>
void layer_norm_rows(const Matrix<Real>& x, const Vector<Real>& gain, const Vector<Real>& bias,
                     LayerNormRows<Real>& norm) {
  const std::size_t rows = x.shape(0), d = x.shape(1);
  ensure_shape(norm.normalized, {rows, d});
  ensure_shape(norm.out, {rows, d});
  ensure_shape(norm.inv_std, {rows});
  const Real *g = gain.data(), *b = bias.data();
  parallel_for(rows, 8 * d, [&](std::size_t first, std::size_t last, std::size_t) {
    for (std::size_t r = first; r < last; ++r) {
      const Real* in = x.data() + r * d;
      Real* xhat = norm.normalized.data() + r * d;
      Real* out = norm.out.data() + r * d;
      const Real mean = row_sum(in, d) / Real(d);
      for (std::size_t j = 0; j < d; ++j) xhat[j] = in[j] - mean;
      const Real var = row_dot(xhat, xhat, d) / Real(d);
      const Real inv_std = Real(1) / std::sqrt(var + Real(kLayerNormEps));
      norm.inv_std(r) = inv_std;
      for (std::size_t j = 0; j < d; ++j) {
        xhat[j] *= inv_std;
        out[j] = xhat[j] * g[j] + b[j];
      }
    }
  });
}

// From d_y (N, d) of LayerNorm's output: d_gain = Σ d_y ⊙ x̂, d_bias = Σ d_y, and dx = residual +
// inv_std ⊙ (d_x̂ − mean(d_x̂) − x̂ ⊙ mean(d_x̂ ⊙ x̂)), d_x̂ = d_y ⊙ gain, all written; residual
// is the residual path's gradient (none: 0). d_y and dx may be one matrix: a row is read before
// it is written.
template <class Real>
void layer_norm_rows_backward(const LayerNormRows<Real>& norm, const Vector<Real>& gain,
                              const Matrix<Real>& d_y, Vector<Real>& d_gain, Vector<Real>& d_bias,
                              const Matrix<Real>* residual, Matrix<Real>& dx) {
  const std::size_t rows = d_y.shape(0), d = d_y.shape(1);
  ensure_shape(dx, {rows, d});
  ensure_shape(d_gain, {d});
  ensure_shape(d_bias, {d});
  std::fill(d_gain.begin(), d_gain.end(), Real(0));
  std::fill(d_bias.begin(), d_bias.end(), Real(0));
  const Real* g = gain.data();
  Real *dg = d_gain.data(), *db = d_bias.data();
  std::vector<Real> row(d);  // one row of d_x̂
  Real* dxhat = row.data();
  for (std::size_t r = 0; r < rows; ++r) {
    const Real* dy = d_y.data() + r * d;
    const Real* xhat = norm.normalized.data() + r * d;
    Real* out = dx.data() + r * d;
    for (std::size_t j = 0; j < d; ++j) dxhat[j] = dy[j] * g[j];
    for (std::size_t j = 0; j < d; ++j) {  // apart, so that the compiler vectorises both
      dg[j] += dy[j] * xhat[j];
      db[j] += dy[j];
    }
    const Real mean_dxhat = row_sum(dxhat, d) / Real(d);
    const Real mean_dxhat_xhat = row_dot(dxhat, xhat, d) / Real(d);
    const Real inv_std = norm.inv_std(r);
    for (std::size_t j = 0; j < d; ++j)
      dxhat[j] = inv_std * (dxhat[j] - mean_dxhat - xhat[j] * mean_dxhat_xhat);
    if (!residual) {
      std::copy(dxhat, dxhat + d, out);
      continue;
    }
    const Real* skip = residual->data() + r * d;
    for (std::size_t j = 0; j < d; ++j) out[j] = skip[j] + dxhat[j];
  }
}

// GELU's tanh form and its derivative at one value.
template <class Real>
Real gelu_at(Real x) {
  const Real c = Real(0.7978845608028654);  // sqrt(2 / π)
  return Real(0.5) * x * (Real(1) + std::tanh(c * (x + Real(0.044715) * x * x * x)));
}

template <class Real>
Real gelu_grad_at(Real x) {
  const Real c = Real(0.7978845608028654);
  const Real t = std::tanh(c * (x + Real(0.044715) * x * x * x));
  return Real(0.5) * (Real(1) + t) +
         Real(0.5) * x * (Real(1) - t * t) * c * (Real(1) + Real(3 * 0.044715) * x * x);
}

// g = gelu(h) over (N, k) rows. In float by the SIMD row loops (simd_rows.hpp), which write
// GELU's tanh form as x · σ(2u), u = sqrt(2/π) (x + 0.044715 x³) (libm's tanhf, one value at a
// time, was a third of a training step).
template <class Real>
void gelu_rows(const Matrix<Real>& h, Matrix<Real>& g) {
  if constexpr (std::is_same_v<Real, float>) {
    const std::size_t cols = h.shape(1);
    parallel_for(h.shape(0), 16 * cols, [&](std::size_t first, std::size_t last, std::size_t) {
      simd::gelu_row(h.data() + first * cols, g.data() + first * cols, (last - first) * cols);
    });
  } else {
    std::transform(h.begin(), h.end(), g.begin(), gelu_at<Real>);
  }
}

// d_g (N, k), holding dL/dg, becomes dL/dh in place: times gelu'(h). In float by the SIMD row
// loops, which recover σ(2u) from the forward's g = h σ as g / h (σ = 1/2 at h = 0), within two
// roundings of σ: no second exponential.
template <class Real>
void gelu_backward_rows(const Matrix<Real>& h, const Matrix<Real>& g, Matrix<Real>& d_g) {
  if constexpr (std::is_same_v<Real, float>) {
    const std::size_t cols = h.shape(1);
    parallel_for(h.shape(0), 8 * cols, [&](std::size_t first, std::size_t last, std::size_t) {
      simd::gelu_backward_row(h.data() + first * cols, g.data() + first * cols,
                              d_g.data() + first * cols, (last - first) * cols);
    });
  } else {
    for (std::size_t i = 0; i < h.size(); ++i) d_g.data()[i] *= gelu_grad_at(h.data()[i]);
  }
}

// A causal attention row: row[0, width) holds scores, the first `visible` of keys the query sees;
// it becomes softmax(scale · row[0, visible)), then zeros. In float by the SIMD row loops.
template <class Real>
void causal_softmax_row(Real* row, std::size_t visible, std::size_t width, Real scale) {
  if constexpr (std::is_same_v<Real, float>) {
    simd::causal_softmax_row(row, visible, width, scale);
  } else {
    for (std::size_t j = 0; j < visible; ++j) row[j] *= scale;
    const Real top = *std::max_element(row, row + visible);
    Real sum = 0;
    for (std::size_t j = 0; j < visible; ++j) sum += row[j] = std::exp(row[j] - top);
    for (std::size_t j = 0; j < visible; ++j) row[j] /= sum;
    std::fill(row + visible, row + width, Real(0));
  }
}

// Its backward: g[0, width), holding dL/dp of the row p, becomes dL/dscores = scale · p ⊙ (g −
// Σ g ⊙ p) on the visible keys, then zeros.
template <class Real>
void causal_softmax_backward_row(const Real* p, Real* g, std::size_t visible, std::size_t width,
                                 Real scale) {
  if constexpr (std::is_same_v<Real, float>) {
    simd::causal_softmax_backward_row(p, g, visible, width, scale);
  } else {
    const Real dot = row_dot(g, p, visible);
    for (std::size_t j = 0; j < visible; ++j) g[j] = p[j] * (g[j] - dot) * scale;
    std::fill(g + visible, g + width, Real(0));
  }
}

// Causal attention of every (sequence, head): merged = softmax(q kᵀ / sqrt(d_head) + causal) v,
// probs (B, H, T, T) recorded with zeros above the diagonal.
template <class Real>
void attention_forward_rows(GptBlockTape<Real>& tape, std::size_t n_heads) {
  const std::size_t B = tape.batch, T = tape.length, d = tape.q.shape(1), dh = d / n_heads;
  const Real scale = Real(1) / std::sqrt(Real(dh));
  // Only the tiles' keys are written below: the zeros above them, written when the tape gets its
  // shape, stay.
  if (tape.probs.shape() != std::array<std::size_t, 4>{B, n_heads, T, T})
    tape.probs = xt::zeros<Real>({B, n_heads, T, T});
  ensure_shape(tape.merged, {B * T, d});
  parallel_for(B * n_heads, 2 * T * T * dh, [&](std::size_t first, std::size_t last, std::size_t) {
    std::vector<Real> k_t(dh * T);
    for (std::size_t bh = first; bh < last; ++bh) {
      const std::size_t b = bh / n_heads, h = bh % n_heads;
      const std::size_t offset = b * T * d + h * dh;  // row 0 of sequence b, column block h
      const Real *q = tape.q.data() + offset, *v = tape.v.data() + offset;
      transpose(tape.k.data() + offset, T, dh, d, k_t.data());  // no transposed operand
      Real* probs = tape.probs.data() + (b * n_heads + h) * T * T;
      Real* out = tape.merged.data() + offset;
      for (std::size_t r0 = 0; r0 < T; r0 += kTile) {
        const std::size_t rows = std::min(kTile, T - r0), keys = r0 + rows;  // keys 0 … keys − 1
        // scores (rows, keys) = q[r0 …] kᵀ[·, 0 … keys), scaled in the softmax (libxsmm's kernels
        // do not scale)
        product(false, rows, keys, dh, q + r0 * d, d, k_t.data(), T, false, probs + r0 * T, T);
        for (std::size_t t = r0; t < keys; ++t)
          causal_softmax_row(probs + t * T, t + 1, keys, scale);
        // out (rows, dh) = probs (rows, keys) v[0 … keys)
        product(false, rows, dh, keys, probs + r0 * T, T, v, d, false, out + r0 * d, d);
      }
    }
  });
}

// From d_merged (N, d): d_q, d_k, d_v (N, d), every (sequence, head) in tiles: first of query rows
// as the forward (d_scores and dq), then of keys (dk and dv, each key tile from the rows that see
// it: one product with every such row, written once).
template <class Real>
void attention_backward_rows(GptBlockTape<Real>& tape, std::size_t n_heads) {
  const std::size_t B = tape.batch, T = tape.length, d = tape.q.shape(1), dh = d / n_heads;
  const Real scale = Real(1) / std::sqrt(Real(dh));
  for (Matrix<Real>* m : {&tape.d_q, &tape.d_k, &tape.d_v}) ensure_shape(*m, {B * T, d});
  ensure_shape(tape.d_scores,
               {worker_count(B * n_heads, 4 * T * T * dh) * T, T});  // (T, T) per worker
  parallel_for(
      B * n_heads, 4 * T * T * dh, [&](std::size_t first, std::size_t last, std::size_t worker) {
        Real* ds = tape.d_scores.data() + worker * T * T;
        std::vector<Real> v_t(dh * T);
        for (std::size_t bh = first; bh < last; ++bh) {
          const std::size_t b = bh / n_heads, h = bh % n_heads;
          const std::size_t offset = b * T * d + h * dh;
          const Real *q = tape.q.data() + offset, *k = tape.k.data() + offset,
                     *d_out = tape.d_merged.data() + offset;
          transpose(tape.v.data() + offset, T, dh, d, v_t.data());
          const Real* probs = tape.probs.data() + (b * n_heads + h) * T * T;
          Real *dq = tape.d_q.data() + offset, *dk = tape.d_k.data() + offset,
               *dv = tape.d_v.data() + offset;
          for (std::size_t r0 = 0; r0 < T; r0 += kTile) {
            const std::size_t rows = std::min(kTile, T - r0), keys = r0 + rows;
            // d_probs (rows, keys) = d_out[r0 …] vᵀ[·, 0 … keys), into d_scores' rows
            product(false, rows, keys, dh, d_out + r0 * d, d, v_t.data(), T, false, ds + r0 * T, T);
            // d_scores = probs ⊙ (d_probs − Σ d_probs ⊙ probs) · scale, on the visible keys
            for (std::size_t t = r0; t < keys; ++t)
              causal_softmax_backward_row(probs + t * T, ds + t * T, t + 1, keys, scale);
            // dq[r0 …] = d_scores (rows, keys) k[0 … keys)
            product(false, rows, dh, keys, ds + r0 * T, T, k, d, false, dq + r0 * d, d);
          }
          for (std::size_t k0 = 0; k0 < T; k0 += kTile) {
            const std::size_t width = std::min(kTile, T - k0), seen_by = T - k0;  // rows k0 …
            // dv[k0 …] = probs[k0 …, k0 …]ᵀ d_out[k0 …];  dk[k0 …] = d_scores[k0 …, k0 …]ᵀ q[k0 …]
            product(true, width, dh, seen_by, probs + k0 * T + k0, T, d_out + k0 * d, d, false,
                    dv + k0 * d, d);
            product(true, width, dh, seen_by, ds + k0 * T + k0, T, q + k0 * d, d, false,
                    dk + k0 * d, d);
          }
        }
      });
}

template <class Real>
void check_vector(const char* where, const char* name, const Vector<Real>& v, std::size_t n,
                  const std::string& of) {
  if (v.shape(0) != n)
    throw std::invalid_argument(std::string(where) + ": " + name + " is " + shape_of(v) + " but " +
                                of + " needs (" + std::to_string(n) + ")");
}

template <class Real>
void check_matrix(const char* where, const char* name, const Matrix<Real>& m, std::size_t rows,
                  std::size_t cols, const std::string& of) {
  if (m.shape(0) != rows || m.shape(1) != cols)
    throw std::invalid_argument(std::string(where) + ": " + name + " is " + shape_of(m) + " but " +
                                of + " needs (" + std::to_string(rows) + ", " +
                                std::to_string(cols) + ")");
}

template <class Real>
void check_mlp(const char* where, const GptMlp<Real>& mlp, std::size_t d, const std::string& of) {
  check_matrix(where, "w_fc", mlp.w_fc, d, 4 * d, of);
  check_vector(where, "b_fc", mlp.b_fc, 4 * d, of);
  check_matrix(where, "w_proj", mlp.w_proj, 4 * d, d, of);
  check_vector(where, "b_proj", mlp.b_proj, d, of);
}

template <class Real>
void check_layer(const char* where, const GptLayer<Real>& layer, std::size_t d,
                 const std::string& of) {
  check_vector(where, "ln_1_gain", layer.ln_1_gain, d, of);
  check_vector(where, "ln_1_bias", layer.ln_1_bias, d, of);
  check_vector(where, "ln_2_gain", layer.ln_2_gain, d, of);
  check_vector(where, "ln_2_bias", layer.ln_2_bias, d, of);
  const GptAttention<Real>& a = layer.attn;
  check_matrix(where, "w_q", a.w_q, d, d, of);
  check_matrix(where, "w_k", a.w_k, d, d, of);
  check_matrix(where, "w_v", a.w_v, d, d, of);
  check_matrix(where, "w_o", a.w_o, d, d, of);
  check_vector(where, "b_q", a.b_q, d, of);
  check_vector(where, "b_k", a.b_k, d, of);
  check_vector(where, "b_v", a.b_v, d, of);
  check_vector(where, "b_o", a.b_o, d, of);
  check_mlp(where, layer.mlp, d, of);
}

bool ends_with(const std::string& text, const std::string& end) {
  return text.size() >= end.size() && text.compare(text.size() - end.size(), end.size(), end) == 0;
}

}  // namespace

// ---- Block A: GELU and the MLP ------------------------------------------------------------------

template <class Real>
Matrix<Real> gelu(const Matrix<Real>& x) {
  Matrix<Real> y(x.shape());
  std::transform(x.begin(), x.end(), y.begin(), gelu_at<Real>);
  return y;
}

template <class Real>
Matrix<Real> gelu_backward(const Matrix<Real>& x, const Matrix<Real>& d_y) {
  if (!same_shape(x, d_y))
    throw std::invalid_argument("gelu_backward: x is " + shape_of(x) + " but d_y is " +
                                shape_of(d_y) + "; they must have one shape");
  Matrix<Real> dx(x.shape());
  for (std::size_t i = 0; i < x.size(); ++i)
    dx.data()[i] = d_y.data()[i] * gelu_grad_at(x.data()[i]);
  return dx;
}

template <class Real>
const Matrix<Real>& mlp_forward(const GptMlp<Real>& mlp, const Matrix<Real>& x,
                                MlpTape<Real>& tape) {
  const std::size_t d = x.shape(1);
  check_mlp("mlp_forward", mlp, d, "x " + shape_of(x));
  if (&x != &tape.x) {
    ensure_shape(tape.x, {x.shape(0), d});
    std::copy(x.begin(), x.end(), tape.x.begin());
  }
  linear_forward(tape.x, mlp.w_fc, mlp.b_fc, tape.h);  // (N, 4d)
  ensure_shape(tape.g, {x.shape(0), 4 * d});
  gelu_rows(tape.h, tape.g);
  linear_forward(tape.g, mlp.w_proj, mlp.b_proj, tape.out);  // (N, d)
  return tape.out;
}

template <class Real>
const Matrix<Real>& mlp_backward(const GptMlp<Real>& mlp, MlpTape<Real>& tape,
                                 const Matrix<Real>& d_out, GptMlp<Real>& grads) {
  if (!same_shape(d_out, tape.out))
    throw std::invalid_argument("mlp_backward: d_out is " + shape_of(d_out) +
                                " but the forward's output was " + shape_of(tape.out));
  linear_backward(tape.g, {{mlp.w_proj, d_out, grads.w_proj, grads.b_proj}}, tape.d_h);
  gelu_backward_rows(tape.h, tape.g, tape.d_h);
  linear_backward(tape.x, {{mlp.w_fc, tape.d_h, grads.w_fc, grads.b_fc}}, tape.dx);
  return tape.dx;
}

// ---- Block A: the block
// --------------------------------------------------------------------------

template <class Real>
const Matrix<Real>& gpt_block_forward(const GptLayer<Real>& layer, std::size_t n_heads,
                                      std::size_t batch, const Matrix<Real>& x,
                                      GptBlockTape<Real>& tape) {
  const std::size_t rows = x.shape(0), d = x.shape(1);
  if (n_heads == 0 || d % n_heads != 0)
    throw std::invalid_argument("gpt_block_forward: n_heads " + std::to_string(n_heads) +
                                " does not divide d_model " + std::to_string(d) + " of x " +
                                shape_of(x));
  if (batch == 0 || rows % batch != 0 || rows == 0)
    throw std::invalid_argument("gpt_block_forward: x is " + shape_of(x) + " but batch " +
                                std::to_string(batch) +
                                "; x must hold batch sequences of one length");
  check_layer("gpt_block_forward", layer, d, "x " + shape_of(x));
  tape.batch = batch;
  tape.length = rows / batch;
  if (&x != &tape.x) {
    ensure_shape(tape.x, {rows, d});
    std::copy(x.begin(), x.end(), tape.x.begin());
  }
  // attention: ln_1, project, causal attention per (sequence, head), output projection
  layer_norm_rows(tape.x, layer.ln_1_gain, layer.ln_1_bias, tape.ln_1);
  linear_forward(tape.ln_1.out, layer.attn.w_q, layer.attn.b_q, tape.q);
  linear_forward(tape.ln_1.out, layer.attn.w_k, layer.attn.b_k, tape.k);
  linear_forward(tape.ln_1.out, layer.attn.w_v, layer.attn.b_v, tape.v);
  attention_forward_rows(tape, n_heads);
  linear_forward(tape.merged, layer.attn.w_o, layer.attn.b_o, tape.mid, &tape.x);  // + x
  // MLP: ln_2, the MLP, the residual
  layer_norm_rows(tape.mid, layer.ln_2_gain, layer.ln_2_bias, tape.ln_2);
  const Matrix<Real>& mlp_out = mlp_forward(layer.mlp, tape.ln_2.out, tape.mlp);
  ensure_shape(tape.out, {rows, d});
  for (std::size_t i = 0; i < tape.out.size(); ++i)
    tape.out.data()[i] = tape.mid.data()[i] + mlp_out.data()[i];
  return tape.out;
}

template <class Real>
const Matrix<Real>& gpt_block_backward(const GptLayer<Real>& layer, std::size_t n_heads,
                                       GptBlockTape<Real>& tape, const Matrix<Real>& d_out,
                                       GptLayer<Real>& grads) {
  if (!same_shape(d_out, tape.out) || tape.out.size() == 0)
    throw std::invalid_argument("gpt_block_backward: d_out is " + shape_of(d_out) +
                                " but the forward's output was " + shape_of(tape.out));
  // out = mid + mlp(ln_2(mid)): d_mid = d_out + ln_2's backward of the MLP's dx
  const Matrix<Real>& d_ln_2 = mlp_backward(layer.mlp, tape.mlp, d_out, grads.mlp);
  layer_norm_rows_backward(tape.ln_2, layer.ln_2_gain, d_ln_2, grads.ln_2_gain, grads.ln_2_bias,
                           &d_out, tape.d_mid);
  // mid = x + attn(ln_1(x))
  linear_backward(tape.merged, {{layer.attn.w_o, tape.d_mid, grads.attn.w_o, grads.attn.b_o}},
                  tape.d_merged);
  attention_backward_rows(tape, n_heads);
  linear_backward(tape.ln_1.out,
                  {{layer.attn.w_q, tape.d_q, grads.attn.w_q, grads.attn.b_q},
                   {layer.attn.w_k, tape.d_k, grads.attn.w_k, grads.attn.b_k},
                   {layer.attn.w_v, tape.d_v, grads.attn.w_v, grads.attn.b_v}},
                  tape.d_ln);
  layer_norm_rows_backward(tape.ln_1, layer.ln_1_gain, tape.d_ln, grads.ln_1_gain, grads.ln_1_bias,
                           &tape.d_mid, tape.dx);
  return tape.dx;
}

// ---- Block A: the model and its loss ------------------------------------------------------------

GptParams<float> init_gpt(const GptConfig& config, std::uint64_t seed) {
  GptParams<float> params = zero_gpt<float>(config);
  for (GptLayer<float>& layer : params.layers) {
    std::fill(layer.ln_1_gain.begin(), layer.ln_1_gain.end(), 1.0f);
    std::fill(layer.ln_2_gain.begin(), layer.ln_2_gain.end(), 1.0f);
  }
  std::fill(params.ln_f_gain.begin(), params.ln_f_gain.end(), 1.0f);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float residual = 0.02f / std::sqrt(2.0f * float(config.n_layers));
  for (const ParamTensor<float>& tensor : parameter_tensors(params)) {
    const bool embedding = tensor.name == "wte" || tensor.name == "wpe";
    if (!embedding && !tensor.decay) continue;  // biases and LayerNorms are not drawn
    const bool projection = ends_with(tensor.name, ".attn.w_o") ||
                            ends_with(tensor.name, ".mlp.w_proj");  // residual projections
    const float std_dev = projection ? residual : 0.02f;
    for (std::size_t i = 0; i < tensor.size(); ++i) tensor.data[i] = std_dev * normal(rng);
  }
  return params;
}

template <class Real>
const xt::xtensor<Real, 3>& gpt_forward(const GptParams<Real>& params, const BatchTokens& tokens,
                                        GptTape<Real>& tape) {
  const GptConfig& c = params.config;
  const std::size_t B = tokens.shape(0), T = tokens.shape(1), d = c.d_model, V = c.vocab;
  if (B == 0 || T == 0)
    throw std::invalid_argument("gpt_forward: tokens are " + shape_of(tokens) +
                                "; a batch needs a sequence of a token");
  if (T > c.max_len)
    throw std::invalid_argument("gpt_forward: tokens are " + shape_of(tokens) + " but wpe is " +
                                shape_of(params.wpe) + ": at most max_len tokens");
  const std::string of = "the config (vocab " + std::to_string(V) + ", max_len " +
                         std::to_string(c.max_len) + ", d_model " + std::to_string(d) + ")";
  check_matrix("gpt_forward", "wte", params.wte, V, d, of);
  check_matrix("gpt_forward", "wpe", params.wpe, c.max_len, d, of);
  check_vector("gpt_forward", "ln_f_gain", params.ln_f_gain, d, of);
  check_vector("gpt_forward", "ln_f_bias", params.ln_f_bias, d, of);
  if (params.layers.size() != c.n_layers || params.layers.empty())
    throw std::invalid_argument("gpt_forward: params have " + std::to_string(params.layers.size()) +
                                " layers but the config " + std::to_string(c.n_layers));
  for (std::size_t i = 0; i < tokens.size(); ++i)
    if (tokens.data()[i] < 0 || std::size_t(tokens.data()[i]) >= V)
      throw std::invalid_argument("gpt_forward: token " + std::to_string(tokens.data()[i]) +
                                  " at (" + std::to_string(i / T) + ", " + std::to_string(i % T) +
                                  ") of tokens " + shape_of(tokens) + " but the vocabulary has " +
                                  std::to_string(V));
  ensure_shape(tape.tokens, {B, T});
  std::copy(tokens.begin(), tokens.end(), tape.tokens.begin());
  tape.layers.resize(c.n_layers);
  // x = wte[token] + wpe[t], written straight into the first block's input
  Matrix<Real>& x = tape.layers[0].x;
  ensure_shape(x, {B * T, d});
  for (std::size_t r = 0; r < B * T; ++r) {
    const Real* token = params.wte.data() + std::size_t(tokens.data()[r]) * d;
    const Real* position = params.wpe.data() + (r % T) * d;
    Real* row = x.data() + r * d;
    for (std::size_t j = 0; j < d; ++j) row[j] = token[j] + position[j];
  }
  const Matrix<Real>* input = &x;
  for (std::size_t l = 0; l < c.n_layers; ++l)
    input = &gpt_block_forward(params.layers[l], c.n_heads, B, *input, tape.layers[l]);
  // ln_f, then the tied unembedding: logits (N, V) = ln_f.out (N, d) wteᵀ
  layer_norm_rows(*input, params.ln_f_gain, params.ln_f_bias, tape.ln_f);
  ensure_shape(tape.logits, {B, T, V});
  gemm(true, B * T, V, d, tape.ln_f.out.data(), d, params.wte.data(), d, false, tape.logits.data(),
       V);
  return tape.logits;
}

template <class Real>
Real cross_entropy(const xt::xtensor<Real, 3>& logits, const BatchTokens& targets,
                   xt::xtensor<Real, 3>& d_logits) {
  const std::size_t B = logits.shape(0), T = logits.shape(1), V = logits.shape(2);
  if (targets.shape(0) != B || targets.shape(1) != T || B * T == 0)
    throw std::invalid_argument("cross_entropy: logits are " + shape_of(logits) +
                                " but targets are " + shape_of(targets) +
                                "; targets must be (B, T) of the logits");
  for (std::size_t r = 0; r < B * T; ++r)
    if (targets.data()[r] < 0 || std::size_t(targets.data()[r]) >= V)
      throw std::invalid_argument("cross_entropy: target " + std::to_string(targets.data()[r]) +
                                  " at (" + std::to_string(r / T) + ", " + std::to_string(r % T) +
                                  ") but the logits are " + shape_of(logits) + ": V is " +
                                  std::to_string(V));
  ensure_shape(d_logits, {B, T, V});
  const Real inv_count = Real(1) / Real(B * T);
  std::vector<double> losses(B * T);  // summed in order after the rows: one result for any workers
  parallel_for(B * T, 4 * V, [&](std::size_t first, std::size_t last, std::size_t) {
    for (std::size_t r = first; r < last; ++r) {
      const std::size_t target = std::size_t(targets.data()[r]);
      const Real* row = logits.data() + r * V;
      Real* grad = d_logits.data() + r * V;
      // −log softmax = log Σ exp(l − max) − (l_target − max), the softmax left in grad
      Real top, sum;
      if constexpr (std::is_same_v<Real, float>) {
        top = simd::row_max(row, V);
        sum = simd::exponentiate_row(row, grad, V, top);
      } else {
        top = *std::max_element(row, row + V);
        sum = 0;
        for (std::size_t j = 0; j < V; ++j) sum += grad[j] = std::exp(row[j] - top);
      }
      losses[r] = double(std::log(sum)) - double(row[target] - top);
      const Real scale = inv_count / sum;
      for (std::size_t j = 0; j < V; ++j) grad[j] *= scale;
      grad[target] -= inv_count;
    }
  });
  double total = 0;
  for (const double loss : losses) total += loss;
  return Real(total / double(B * T));
}

// gpt_block_backward's workspace (not its result, dx), handed from the block just done to the
// next: one set of buffers, still in cache, serves every block instead of one set per block, each
// written from memory (11 MB a block in lab 13's model). Blocks of one tape have one shape.
template <class Real>
void hand_over_workspace(GptBlockTape<Real>& done, GptBlockTape<Real>& next) {
  for (Matrix<Real> GptBlockTape<Real>::*buffer :
       {&GptBlockTape<Real>::d_mid, &GptBlockTape<Real>::d_ln, &GptBlockTape<Real>::d_q,
        &GptBlockTape<Real>::d_k, &GptBlockTape<Real>::d_v, &GptBlockTape<Real>::d_merged,
        &GptBlockTape<Real>::d_scores})
    std::swap(done.*buffer, next.*buffer);
  std::swap(done.mlp.d_h, next.mlp.d_h);
  std::swap(done.mlp.dx, next.mlp.dx);
}

template <class Real>
void gpt_backward(const GptParams<Real>& params, GptTape<Real>& tape,
                  const xt::xtensor<Real, 3>& d_logits, GptParams<Real>& grads) {
  if (!same_shape(d_logits, tape.logits) || tape.logits.size() == 0)
    throw std::invalid_argument("gpt_backward: d_logits is " + shape_of(d_logits) +
                                " but the forward's logits were " + shape_of(tape.logits));
  if (params.layers.size() != tape.layers.size())
    throw std::invalid_argument("gpt_backward: params have " +
                                std::to_string(params.layers.size()) + " layers but the tape " +
                                std::to_string(tape.layers.size()) +
                                "; pass the forward's parameters");
  const std::size_t B = d_logits.shape(0), T = d_logits.shape(1), V = d_logits.shape(2),
                    d = params.wte.shape(1), rows = B * T;
  grads.config = params.config;
  grads.layers.resize(params.layers.size());
  ensure_shape(grads.wte, {V, d});
  ensure_shape(grads.wpe, {params.wpe.shape(0), d});
  // logits = ln_f.out wteᵀ: d_ln_f = d_logits wte (N, d), d_wte = d_logitsᵀ ln_f.out (V, d), both
  // from each block of d_logits' rows in turn
  Matrix<Real>& d_ln_f = tape.d_x;  // first d(ln_f.out), then in place the residual stream's
  ensure_shape(d_ln_f, {rows, d});
  backward_products(
      rows, V, 2 * V * d,
      [&](std::size_t r0, std::size_t count) {
        product(false, count, d, V, d_logits.data() + r0 * V, V, params.wte.data(), d, false,
                d_ln_f.data() + r0 * d, d);
      },
      [&](std::size_t r0, std::size_t count, std::size_t first, std::size_t m) {
        product(true, m, d, count, d_logits.data() + r0 * V + first, V,
                tape.ln_f.out.data() + r0 * d, d, r0 > 0, grads.wte.data() + first * d, d);
      });
  const Matrix<Real>* no_residual = nullptr;  // the residual stream starts here
  layer_norm_rows_backward(tape.ln_f, params.ln_f_gain, d_ln_f, grads.ln_f_gain, grads.ln_f_bias,
                           no_residual, tape.d_x);
  const Matrix<Real>* dx = &tape.d_x;
  for (std::size_t l = params.layers.size(); l-- > 0;) {
    if (l + 1 < params.layers.size()) hand_over_workspace(tape.layers[l + 1], tape.layers[l]);
    dx = &gpt_block_backward(params.layers[l], params.config.n_heads, tape.layers[l], *dx,
                             grads.layers[l]);
  }
  // x = wte[token] + wpe[t]: scatter-add each row's gradient into its token's and position's rows
  std::fill(grads.wpe.begin(), grads.wpe.end(), Real(0));
  for (std::size_t r = 0; r < rows; ++r) {
    const Real* g = dx->data() + r * d;
    Real* token = grads.wte.data() + std::size_t(tape.tokens.data()[r]) * d;
    Real* position = grads.wpe.data() + (r % T) * d;
    for (std::size_t j = 0; j < d; ++j) {
      token[j] += g[j];
      position[j] += g[j];
    }
  }
}

MINIMODEL_LAB13_INSTANTIATE(float)
MINIMODEL_LAB13_INSTANTIATE(double)

}  // namespace minimodel
