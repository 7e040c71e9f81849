// Hands an object to the process's exit instead of its destructor. The kernel takes back all of a
// process's pages at once, while destroying a 320,000-chunk checkpoint's records is about a million
// calls to free: 40-70 ms of `inspect` and ~0.1 s of `diff` on this project's bench machine (issue
// 44). For the last large object of a command line, once its output is written; never in a long-lived
// process. Like git's UNLEAK: the object stays reachable from a global, so leak checkers (LSan in
// `make sanitize`) count it as still reachable, not lost.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

namespace ckpt {

namespace release_at_exit_detail {
// Allocated once and never freed: what it holds is released by the exit.
inline std::vector<std::shared_ptr<void>>& kept() {
  static auto* objects = new std::vector<std::shared_ptr<void>>();
  return *objects;
}
}  // namespace release_at_exit_detail

template <class T>
void release_at_exit(T&& object) {
  release_at_exit_detail::kept().push_back(std::make_shared<std::decay_t<T>>(std::forward<T>(object)));
}

}  // namespace ckpt
