// Lab 14 verify (placeholder while the program is written).
#include <mpi.h>

#include "lab_setup.hpp"
#include "minimodel/distributed/distributed_attention.hpp"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int status =
      lab_setup::run(argc, argv, 14, nlohmann::json::object(), [](workbench::VerifyRun& run) {
        minimodel::shard_heads(4, 0, 1);
        run.print("x");
      });
  MPI_Finalize();
  return status;
}
