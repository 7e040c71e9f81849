// The tasks of an MPI job (mpirun, or srun with a PMI Open MPI understands) as a ByteCollective:
// what `verify --distributed` gathers its tasks' results through. MPI, not a protocol of our own:
// the launcher wires the tasks up, and a task that dies takes the job down with it (Open MPI's
// mpirun and Slurm's srun --kill-on-bad-exit end every other task and exit non-zero), so a run
// never reports a partial result. Only the torch-free `ckptcheck` links this (ckpt_distributed_mpi).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "distributed/byte_collective.h"

namespace ckpt {

class MpiWorld final : public ByteCollective {
 public:
  // MPI_Init, once per process: only a command given --distributed calls it, so every other
  // command runs without a launcher. A process started without one is a world of one (singleton).
  // A task of an srun step started without an MPI plugin is refused (kInvalidArgument) first.
  static Result<std::unique_ptr<MpiWorld>> init();
  ~MpiWorld() override;  // MPI_Finalize
  MpiWorld(const MpiWorld&) = delete;
  MpiWorld& operator=(const MpiWorld&) = delete;

  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  // Collective: every task must call it. An MPI error ends the job (MPI_ERRORS_ARE_FATAL).
  std::vector<std::string> all_gather_bytes(const std::string& bytes) override;
  // This task's node: Slurm's name for it (SLURMD_NODENAME) or MPI_Get_processor_name.
  const std::string& host() const { return host_; }
  // Ends every task of the job with `exit_code` (MPI_Abort): how one task's own failure, found
  // outside a collective, fails the whole run instead of leaving the others waiting.
  [[noreturn]] void abort(int exit_code);

 private:
  MpiWorld() = default;
  int rank_ = 0;
  int size_ = 1;
  std::string host_;
};

}  // namespace ckpt
