#include "verifier/drill/control_presence.h"

#include <functional>
#include <set>

#include "formats/dtype.h"

namespace ckpt {
namespace {

using NameSet = std::set<std::string>;
using Keep = std::function<bool(const std::string&)>;

struct Names {
  NameSet tensors, values;
  explicit Names(const StateSnapshot& s) {
    for (const auto& t : s.tensors) tensors.insert(t.name);
    for (const auto& [name, v] : s.values) values.insert(name);
  }
};

Keep in_both(const NameSet& a, const NameSet& b) {
  return [&a, &b](const std::string& n) { return a.count(n) > 0 && b.count(n) > 0; };
}
Keep in_first_only(const NameSet& a, const NameSet& b) {
  return [&a, &b](const std::string& n) { return a.count(n) > 0 && b.count(n) == 0; };
}

StateSnapshot filtered(const StateSnapshot& s, const Keep& keep_tensor, const Keep& keep_value) {
  StateSnapshot out;
  out.path = s.path;
  out.unreadable = s.unreadable;
  for (const auto& t : s.tensors)
    if (keep_tensor(t.name)) out.tensors.push_back(t);
  for (const auto& [name, v] : s.values)
    if (keep_value(name)) out.values.emplace(name, v);
  return out;
}

}  // namespace

ControlPresence split_by_control(const StateSnapshot& golden, const StateSnapshot& control,
                                 const StateSnapshot& resumed) {
  const Names g(golden), c(control), r(resumed);
  ControlPresence p;
  p.golden = filtered(golden, in_both(g.tensors, c.tensors), in_both(g.values, c.values));
  p.resumed = filtered(resumed, in_both(g.tensors, c.tensors), in_both(g.values, c.values));
  p.control_only = filtered(control, in_first_only(c.tensors, g.tensors), in_first_only(c.values, g.values));
  p.resumed_control_only =
      filtered(resumed, in_first_only(c.tensors, g.tensors), in_first_only(c.values, g.values));
  p.resumed_extra = filtered(resumed, in_first_only(r.tensors, c.tensors), in_first_only(r.values, c.values));
  for (const auto& t : golden.tensors)
    if (!c.tensors.count(t.name) && !r.tensors.count(t.name)) p.absent[t.component].push_back(t.name);
  for (const auto& [name, v] : golden.values)
    if (!c.values.count(name) && !r.values.count(name)) p.absent[v.component].push_back(name);
  return p;
}

void keep_common(StateSnapshot* a, StateSnapshot* b) {
  const Names na(*a), nb(*b);
  *a = filtered(*a, in_both(na.tensors, nb.tensors), in_both(na.values, nb.values));
  *b = filtered(*b, in_both(na.tensors, nb.tensors), in_both(na.values, nb.values));
}

std::map<std::string, ComponentDiff> compare_layout(const StateSnapshot& control,
                                                    const StateSnapshot& resumed) {
  std::map<std::string, const SnapshotTensor*> got;
  for (const auto& t : resumed.tensors) got[t.name] = &t;
  std::map<std::string, ComponentDiff> out;
  for (const auto& want : control.tensors) {
    auto it = got.find(want.name);
    if (it == got.end()) {
      out[want.component].add(one_side_only(want.name, want.component, /*in_reference=*/true));
      continue;
    }
    const SnapshotTensor& have = *it->second;
    TensorDiff d;
    d.name = want.name;
    d.component = want.component;
    d.mismatch = layout_mismatch(want.layout(), have.layout());
    if (!d.mismatch.empty()) {
      d.mismatch += " (the control run's, then the resumed run's)";
      d.comparable = false;
    } else {
      const size_t size = dtype_size(want.dtype);
      d.elements = size > 0 ? static_cast<int64_t>(want.bytes_size / size) : 0;
      // Not compared value by value: equal bytes or not.
      const Result<bool> same = same_bytes(want, have);
      if (!same.is_ok()) {
        d.mismatch = cannot_be_read_again(same.status());
        d.comparable = false;
      }
      d.differing_elements = same.is_ok() && *same ? 0 : 1;
    }
    out[want.component].add(d);
  }
  for (const auto& [name, want] : control.values) {
    auto it = resumed.values.find(name);
    if (it == resumed.values.end()) {
      out[want.component].add(one_side_only(name, want.component, /*in_reference=*/true));
      continue;
    }
    TensorDiff d;
    d.name = name;
    d.component = want.component;
    d.elements = 1;
    if (it->second.value.type() != want.value.type() &&
        !(it->second.value.is_number() && want.value.is_number())) {
      d.mismatch = std::string("is a ") + it->second.value.type_name() + ", the control run's a " +
                   want.value.type_name();
      d.comparable = false;
    } else if (it->second.value != want.value) {
      d.differing_elements = 1;
    }
    out[want.component].add(d);
  }
  return out;
}

}  // namespace ckpt
