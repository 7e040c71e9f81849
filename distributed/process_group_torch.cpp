#include "distributed/process_group_torch.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#if defined(CKPTCHECK_WITH_CUDA) && defined(USE_C10D_NCCL) && \
    __has_include(<torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>)
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#define CKPTCHECK_HAVE_NCCL 1
#endif

#include <ATen/detail/CUDAHooksInterface.h>

#include <chrono>
#include <cstring>

namespace ckpt {

namespace {

using Clock = std::chrono::steady_clock;

class CommunicationTimer {
 public:
  explicit CommunicationTimer(double* total) : total_(total), start_(Clock::now()) {}
  ~CommunicationTimer() { *total_ += std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  double* total_;
  Clock::time_point start_;
};

class SingleProcessGroup final : public ProcessGroup {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  void all_reduce_sum(std::vector<at::Tensor>&) override {}
  std::vector<at::Tensor> all_gather(const at::Tensor& tensor) override { return {tensor.clone()}; }
  void barrier() override {}
};

class C10dProcessGroup final : public ProcessGroup {
 public:
  C10dProcessGroup(c10::intrusive_ptr<c10d::Store> store, c10::intrusive_ptr<c10d::ProcessGroup> pg, int rank,
                   int world)
      : store_(std::move(store)), pg_(std::move(pg)), rank_(rank), world_(world) {}

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }

  void all_reduce_sum(std::vector<at::Tensor>& tensors) override {
    if (tensors.empty()) return;
    CommunicationTimer timer(&communication_seconds_);
    // One flat buffer per dtype would be faster; the pilot is small and this keeps order obvious.
    for (at::Tensor& t : tensors) {
      std::vector<at::Tensor> one{t};
      pg_->allreduce(one)->wait();
    }
  }

  std::vector<at::Tensor> all_gather(const at::Tensor& tensor) override {
    CommunicationTimer timer(&communication_seconds_);
    std::vector<at::Tensor> input{tensor.contiguous()};
    std::vector<std::vector<at::Tensor>> output(1);
    for (int r = 0; r < world_; ++r) output[0].push_back(at::empty_like(input[0]));
    pg_->allgather(output, input)->wait();
    return output[0];
  }

  void barrier() override {
    CommunicationTimer timer(&communication_seconds_);
    pg_->barrier()->wait();
  }

 private:
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::ProcessGroup> pg_;
  int rank_;
  int world_;
};

}  // namespace

int visible_accelerators() {
  try {
    return at::hasCUDA() ? at::detail::getCUDAHooks().getNumGPUs() : 0;
  } catch (const std::exception&) {
    return 0;
  }
}

std::shared_ptr<ProcessGroup> ProcessGroup::single() {
  return std::make_shared<SingleProcessGroup>();
}

Result<std::shared_ptr<ProcessGroup>> ProcessGroup::connect(const RankEnv& env, double timeout_seconds) {
  if (env.world_size <= 1) return single();
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000));
  try {
    c10d::TCPStoreOptions o;
    o.port = static_cast<uint16_t>(env.master_port);
    o.isServer = env.rank == 0;
    o.numWorkers = static_cast<size_t>(env.world_size);
    o.timeout = timeout;
    auto store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, o);
    c10::intrusive_ptr<c10d::ProcessGroup> pg;
#ifdef CKPTCHECK_HAVE_NCCL
    if (at::hasCUDA()) {
      auto nccl = c10d::ProcessGroupNCCL::Options::create();
      nccl->timeout = timeout;
      pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, env.rank, env.world_size, nccl);
    }
#endif
    if (!pg) {
      auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
      opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(env.master_addr));
      pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, env.rank, env.world_size, opts);
    }
    return std::shared_ptr<ProcessGroup>(
        std::make_shared<C10dProcessGroup>(store, pg, env.rank, env.world_size));
  } catch (const std::exception& e) {
    return Status::io_error("rank " + std::to_string(env.rank) + "/" + std::to_string(env.world_size) +
                            ": c10d rendezvous at " + env.master_addr + ":" +
                            std::to_string(env.master_port) + " failed: " + e.what());
  }
}

std::vector<std::string> ProcessGroup::all_gather_bytes(const std::string& bytes) {
  const int world = world_size();
  if (world == 1) return {bytes};
  at::Tensor length = at::scalar_tensor(static_cast<int64_t>(bytes.size()), at::kLong).reshape({1});
  std::vector<at::Tensor> lengths = all_gather(length);
  int64_t longest = 0;
  for (const at::Tensor& l : lengths) longest = std::max(longest, l.item<int64_t>());
  at::Tensor padded = at::zeros({std::max<int64_t>(longest, 1)}, at::kByte);
  if (!bytes.empty()) std::memcpy(padded.data_ptr(), bytes.data(), bytes.size());
  std::vector<at::Tensor> gathered = all_gather(padded);
  std::vector<std::string> out;
  for (int r = 0; r < world; ++r) {
    const auto* p = static_cast<const char*>(gathered[static_cast<size_t>(r)].data_ptr());
    out.emplace_back(p, static_cast<size_t>(lengths[static_cast<size_t>(r)].item<int64_t>()));
  }
  return out;
}

}  // namespace ckpt
