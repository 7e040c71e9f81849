#include "verifier/drill/fault_catalogue.h"

namespace ckpt {

const std::vector<FaultSpec>& fault_catalogue() {
  static const std::vector<FaultSpec> catalogue = {
      {"truncate", FaultKind::kCopy, "the largest file of a copy of the checkpoint cut to half its size"},
      {"bitflip", FaultKind::kCopy, "one bit flipped in the middle of a tensor of a copy of the checkpoint"},
      {"drop-file", FaultKind::kCopy,
       "one file (the optimizer's, if any) deleted from a copy of the checkpoint"},
      {"stale-file", FaultKind::kCopy,
       "one file of a copy replaced by the same file of the checkpoint before"},
      {"power-loss", FaultKind::kStorage,
       "power fails at the step-N checkpoint event: everything not made durable by an fsync is lost"},
      {"power-loss-mid-save", FaultKind::kStorage,
       "power fails at the first file of the step-N save: the checkpoint before must survive whole"},
      {"disk-full", FaultKind::kStorage,
       "ENOSPC from half of the step-N save's bytes on: the save must fail visibly, the one before stay "
       "whole"},
      {"read-error", FaultKind::kStorage,
       "EIO on every file of the checkpoint the relaunch reads: it must refuse, or fall back to a whole one"},
  };
  return catalogue;
}

const FaultSpec* find_fault(const std::string& name) {
  for (const FaultSpec& f : fault_catalogue())
    if (name == f.name) return &f;
  return nullptr;
}

bool is_storage_fault(const std::string& name) {
  const FaultSpec* f = find_fault(name);
  return f && f->kind == FaultKind::kStorage;
}

namespace {
std::string names_where(bool all, FaultKind kind) {
  std::string out;
  for (const FaultSpec& f : fault_catalogue())
    if (all || f.kind == kind) out += (out.empty() ? "" : ", ") + std::string(f.name);
  return out;
}
}  // namespace

std::string fault_names() {
  return names_where(true, FaultKind::kCopy);
}
std::string fault_names(FaultKind kind) {
  return names_where(false, kind);
}

}  // namespace ckpt
