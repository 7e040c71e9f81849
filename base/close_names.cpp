#include "base/close_names.h"

#include <algorithm>
#include <utility>

namespace ckpt {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::vector<std::string> close_names(const std::string& wanted, const std::vector<std::string>& candidates,
                                     size_t max) {
  std::vector<std::pair<size_t, size_t>> scored;  // (score, index in candidates)
  for (size_t i = 0; i < candidates.size(); ++i) {
    const std::string& name = candidates[i];
    const size_t d = edit_distance(wanted, name);
    const bool contains =
        !wanted.empty() && (name.find(wanted) != std::string::npos || wanted.find(name) != std::string::npos);
    if (d <= std::max<size_t>(3, wanted.size() / 3) || contains) scored.emplace_back(contains ? 0 : d, i);
  }
  std::stable_sort(scored.begin(), scored.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::string> names;
  for (size_t i = 0; i < scored.size() && names.size() < max; ++i) {
    const std::string& name = candidates[scored[i].second];
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return names;
}

std::string did_you_mean(const std::vector<std::string>& names) {
  if (names.empty()) return "";
  std::string out = "; did you mean ";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " or " : ", ";
    out += "'" + names[i] + "'";
  }
  return out + "?";
}

}  // namespace ckpt
