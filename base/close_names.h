// "Did you mean": the names a mistyped one was probably meant to be. One ranking for every such
// hint: a command (`verfy` -> `verify`), an option (`--save-a` -> `--save-at`), a tensor name.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ckpt {

// Levenshtein distance: insertions, deletions and substitutions of one byte each.
size_t edit_distance(const std::string& a, const std::string& b);

// Up to `max` of `candidates`, closest first: one that contains `wanted` (or is contained in it)
// ranks first, then those within max(3, |wanted| / 3) edits, by distance. Ties keep the
// candidates' order.
std::vector<std::string> close_names(const std::string& wanted, const std::vector<std::string>& candidates,
                                     size_t max = 3);

// "; did you mean 'a'?" / "; did you mean 'a' or 'b'?" / "" when `names` is empty.
std::string did_you_mean(const std::vector<std::string>& names);

}  // namespace ckpt
