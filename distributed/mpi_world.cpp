#include "distributed/mpi_world.h"

#include <mpi.h>

#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace ckpt {

Result<std::unique_ptr<MpiWorld>> MpiWorld::init() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return Status::invalid_argument("MPI is already initialized in this process");
  // A task of an srun step with no PMI in its environment: srun ran without an MPI plugin, and
  // Open MPI's MPI_Init would abort it with exit 1 (which here means a failed check). Refuse first,
  // naming the fix. mpirun's ranks have OMPI_COMM_WORLD_SIZE, srun --mpi=pmix's PMIX_RANK.
  const char* step_tasks = std::getenv("SLURM_STEP_NUM_TASKS");
  const bool by_mpi =
      std::getenv("PMIX_RANK") || std::getenv("PMI_RANK") || std::getenv("OMPI_COMM_WORLD_SIZE");
  if (step_tasks && !by_mpi) {
    return Status::invalid_argument(
        std::string("--distributed: this is a task of a Slurm step (") + step_tasks +
        " tasks) that srun started without an MPI plugin, so MPI cannot join its "
        "tasks: run `srun --mpi=pmix ...` (see `srun --mpi=list`), or mpirun inside "
        "the allocation");
  }
  if (MPI_Init(nullptr, nullptr) != MPI_SUCCESS) return Status::io_error("MPI_Init failed");
  std::unique_ptr<MpiWorld> world(new MpiWorld());
  MPI_Comm_rank(MPI_COMM_WORLD, &world->rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &world->size_);
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  MPI_Get_processor_name(name, &length);
  world->host_.assign(name, static_cast<size_t>(length));
  // Under Slurm the node's name, which tells apart nodes that share a host (and names them as
  // squeue and sinfo do).
  if (const char* node = std::getenv("SLURMD_NODENAME"); node && *node) world->host_ = node;
  return world;
}

MpiWorld::~MpiWorld() {
  MPI_Finalize();
}

std::vector<std::string> MpiWorld::all_gather_bytes(const std::string& bytes) {
  // MPI counts are ints: a task's bytes, and all of them together, must stay below 2 GiB.
  uint64_t mine = bytes.size();
  std::vector<uint64_t> sizes(static_cast<size_t>(size_));
  MPI_Allgather(&mine, 1, MPI_UINT64_T, sizes.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
  std::vector<int> counts(sizes.size()), displacements(sizes.size());
  uint64_t total = 0;
  for (size_t r = 0; r < sizes.size(); ++r) {
    if (total + sizes[r] > static_cast<uint64_t>(INT_MAX)) {
      std::fprintf(stderr, "ckptcheck: rank %d: the tasks' results exceed MPI's 2 GiB count limit\n", rank_);
      abort(2);
    }
    displacements[r] = static_cast<int>(total);
    counts[r] = static_cast<int>(sizes[r]);
    total += sizes[r];
  }
  std::string all(total, '\0');
  MPI_Allgatherv(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, all.data(), counts.data(),
                 displacements.data(), MPI_BYTE, MPI_COMM_WORLD);
  std::vector<std::string> out(sizes.size());
  for (size_t r = 0; r < sizes.size(); ++r) out[r] = all.substr(displacements[r], counts[r]);
  return out;
}

void MpiWorld::abort(int exit_code) {
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);  // MPI_Abort does not return; this keeps [[noreturn]] honest
}

}  // namespace ckpt
