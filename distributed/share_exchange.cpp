#include "distributed/share_exchange.h"

#include <csignal>
#include <cstdlib>

#include "base/json_fields.h"
#include "base/sha256.h"
#include "distributed/step_gather.h"

namespace ckpt {

Status status_from_code(int code, std::string message) {
  switch (static_cast<StatusCode>(code)) {
    case StatusCode::kOk: return Status::ok();
    case StatusCode::kCorruption: return Status::corruption(std::move(message));
    case StatusCode::kTruncated: return Status::truncated(std::move(message));
    case StatusCode::kIoError: return Status::io_error(std::move(message));
    case StatusCode::kNotSupported: return Status::not_supported(std::move(message));
    case StatusCode::kInvalidArgument: return Status::invalid_argument(std::move(message));
    case StatusCode::kNotFound: return Status::not_found(std::move(message));
    case StatusCode::kAmbiguous: return Status::ambiguous(std::move(message));
  }
  return Status::io_error(std::move(message));
}

void die_here_if_told(int rank) {
  const char* kill_rank = std::getenv("CKPTCHECK_TEST_KILL_RANK");
  if (kill_rank && *kill_rank && std::atoi(kill_rank) == rank) std::raise(SIGKILL);
}

Status exchange_unit_results(ByteCollective& world, const std::string& step,
                             const std::vector<uint64_t>& sizes, const std::vector<int>& owners,
                             const std::function<nlohmann::json(size_t)>& result,
                             const std::function<Status(size_t, const nlohmann::json&)>& take) {
  const std::string plan_digest = sha256_hex(nlohmann::json(sizes).dump());
  nlohmann::json mine = {{"plan", plan_digest}, {"units", nlohmann::json::array()}};
  for (size_t u = 0; u < sizes.size(); ++u) {
    if (owners[u] == world.rank()) mine["units"].push_back({u, result(u)});
  }
  die_here_if_told(world.rank());
  CKPT_ASSIGN_OR_RETURN(const std::vector<std::string> all, all_gather_step(world, step, mine.dump()));
  for (size_t r = 0; r < all.size(); ++r) {
    auto theirs = parse_json(all[r], "rank " + std::to_string(r) + "'s results");
    if (!theirs.is_ok()) return theirs.status();
    if (!theirs->is_object() || theirs->value("plan", std::string()) != plan_digest) {
      return Status::invalid_argument(
          "rank " + std::to_string(r) + " planned other scan units than rank " +
          std::to_string(world.rank()) +
          " (it sees other files or sizes): every task must see the same checkpoint");
    }
    if (static_cast<int>(r) == world.rank()) continue;
    try {
      for (const nlohmann::json& unit : theirs->at("units")) {
        const size_t u = unit.at(0).get<size_t>();
        if (u >= sizes.size() || owners[u] != static_cast<int>(r))
          return Status::corruption("rank " + std::to_string(r) + " sent unit " + std::to_string(u) +
                                    " it does not own");
        CKPT_RETURN_IF_ERROR(take(u, unit.at(1)));
      }
    } catch (const nlohmann::json::exception& e) {
      return Status::corruption("rank " + std::to_string(r) + "'s results are malformed: " + e.what());
    }
  }
  return Status::ok();
}

}  // namespace ckpt
