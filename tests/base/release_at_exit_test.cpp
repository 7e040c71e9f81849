#include "base/release_at_exit.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace ckpt {
namespace {

// What is handed over outlives its scope (nothing destroys it before the exit), and stays
// reachable: `make sanitize` runs this under LeakSanitizer, which would report it lost otherwise.
TEST(ReleaseAtExit, KeepsWhatItIsGivenUntilTheProcessEnds) {
  std::weak_ptr<std::string> watched;
  {
    auto held = std::make_shared<std::string>(std::string(1 << 20, 'x'));
    watched = held;
    struct Holder {
      std::shared_ptr<std::string> held;
    };
    release_at_exit(Holder{std::move(held)});
  }
  ASSERT_FALSE(watched.expired());
  EXPECT_EQ(watched.lock()->size(), 1u << 20);
}

}  // namespace
}  // namespace ckpt
