#pragma once
// Lab 14's only doors to MPI: every message the lab's code sends goes through these wrappers,
// which count the bytes this rank hands to MPI and the time it spends inside MPI, so that the
// verify program can set each scheme's traffic against its formula and its time against its
// computing. Given, not a stub: a learner calls them instead of MPI_Allreduce and MPI_Sendrecv.
//
// The count is what this rank asks MPI to send (the "logical" bytes of the lab's formulas). What
// the library really moves for an all-reduce depends on its algorithm: a ring sends 2 (P − 1) / P
// times the buffer, recursive doubling log2(P) times it (theory/17-attention-across-processes.md).
#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <string>

namespace minimodel {

/// This rank's traffic since the last reset_comm_stats().
struct CommStats {
  std::size_t bytes_sent = 0;  ///< bytes handed to MPI to send (an all-reduce's whole buffer)
  std::size_t calls = 0;       ///< counted MPI calls
  double seconds = 0.0;        ///< wall time spent inside them (waiting for the others included)
};

/// This process's counters (one per rank).
inline CommStats& comm_stats() {
  static CommStats stats;
  return stats;
}
inline void reset_comm_stats() { comm_stats() = CommStats{}; }

namespace detail {
inline void check_mpi(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw std::runtime_error(std::string(call) +
                           " failed: " + std::string(text, std::size_t(length)));
}
// Times one MPI call into comm_stats(), counting `bytes` sent.
template <class Call>
void counted(std::size_t bytes, const char* name, Call call) {
  const auto start = std::chrono::steady_clock::now();
  check_mpi(call(), name);
  CommStats& stats = comm_stats();
  stats.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stats.bytes_sent += bytes;
  stats.calls += 1;
}
}  // namespace detail

/// Sums `n` floats element-wise over every rank of `comm`, in place (MPI_Allreduce): counts
/// n · 4 bytes.
inline void allreduce_sum(float* data, std::size_t n, MPI_Comm comm) {
  detail::counted(n * sizeof(float), "MPI_Allreduce", [&] {
    return MPI_Allreduce(MPI_IN_PLACE, data, int(n), MPI_FLOAT, MPI_SUM, comm);
  });
}

/// Sends `n_send` floats to rank `dest` while receiving `n_recv` floats from rank `source` of
/// `comm` (MPI_Sendrecv, one step of a ring): counts n_send · 4 bytes.
inline void sendrecv(const float* send, std::size_t n_send, int dest, float* recv,
                     std::size_t n_recv, int source, MPI_Comm comm) {
  detail::counted(n_send * sizeof(float), "MPI_Sendrecv", [&] {
    return MPI_Sendrecv(send, int(n_send), MPI_FLOAT, dest, 14, recv, int(n_recv), MPI_FLOAT,
                        source, 14, comm, MPI_STATUS_IGNORE);
  });
}

/// This rank's index and the number of ranks of `comm`.
inline int rank_of(MPI_Comm comm) {
  int rank = 0;
  detail::check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  return rank;
}
inline int size_of(MPI_Comm comm) {
  int size = 0;
  detail::check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  return size;
}

}  // namespace minimodel
