#include "faultfs/journal.h"

#include <nlohmann/json.hpp>

namespace ckpt::faultfs {

namespace {

nlohmann::json losses_array(const std::vector<Loss>& losses) {
  nlohmann::json out = nlohmann::json::array();
  for (const Loss& loss : losses)
    out.push_back({{"path", loss.path}, {"message", loss.message}, {"missing_call", loss.missing_call}});
  return out;
}

}  // namespace

std::string journal_json(const std::vector<JournalEntry>& entries, const std::vector<Loss>& losses) {
  nlohmann::json list = nlohmann::json::array();
  for (const JournalEntry& e : entries) {
    nlohmann::json j = {{"seq", e.seq},   {"time_ns", e.time_ns},      {"op", e.op},
                        {"path", e.path}, {"offset", e.offset},        {"bytes", e.bytes},
                        {"lost", e.lost}, {"waiting_on", e.waiting_on}};
    if (!e.to.empty()) j["to"] = e.to;
    j["durable_seq"] = e.durable_seq == 0 ? nlohmann::json(nullptr) : nlohmann::json(e.durable_seq);
    list.push_back(std::move(j));
  }
  nlohmann::json out = {{"entries", std::move(list)}, {"losses", losses_array(losses)}};
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string losses_json(const std::vector<Loss>& losses) {
  nlohmann::json out = {{"losses", losses_array(losses)}};
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace ckpt::faultfs
