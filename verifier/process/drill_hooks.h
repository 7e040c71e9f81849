// How a training process cooperates with the drill that will SIGKILL it. The process announces
// each milestone on stdout as one line ("ckptcheck-event: <kind> <detail>") and, when told to
// hold at that milestone, stops there and waits to be killed: the kill is a real SIGKILL of a
// live process at a known point, with no race against the process finishing on its own.
#pragma once

#include <string>

namespace ckpt {

constexpr const char* kEventPrefix = "ckptcheck-event: ";

// kDuringPrune: after a prune (`train --keep-last`) renamed its first old checkpoint to
// `.deleting-*` and before it removes the tree, so a test can kill a prune half-way.
enum class HoldPoint { kNone, kAfterSave, kDuringSave, kDuringPrune };

// "after-save" | "during-save" | "during-prune" | "" -> HoldPoint; false on an unknown name.
bool parse_hold_point(const std::string& name, HoldPoint* out);

void announce_event(const std::string& kind, const std::string& detail);
// Announces, then blocks forever (the drill's SIGKILL ends the process).
[[noreturn]] void hold_for_kill(const std::string& kind, const std::string& detail);

}  // namespace ckpt
