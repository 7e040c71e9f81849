// A directory checkpoint is read with its subdirectories: per-rank state kept as rank<r>/state.pt
// is state too, named by its path below the checkpoint ("rank1/state"). A non-tensor value of one
// shape (a Python RNG state's nested lists) is compared number by number.
#include "verifier/tensors/state_snapshot.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "tests/support/test_support.h"
#include "tests/support/training_state_fixture.h"
#include "verifier/tensors/tensor_source.h"

namespace ckpt {
namespace {

TEST(StateSnapshot, AFileInASubdirectoryIsAComponentNamedByItsPath) {
  testing::TempDir dir;
  dir.write("trainer.json", "{\"step\": 8}");
  std::filesystem::create_directories(dir / "rank1/deeper");
  dir.write("rank1/state.json", "{\"cursor\": 96}");
  dir.write("rank1/deeper/more.json", "{\"x\": 1}");
  auto s = read_state_snapshot(dir.path());
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  ASSERT_EQ(s->values.count("rank1/state.cursor"), 1u);
  EXPECT_EQ(s->values.at("rank1/state.cursor").component, "rank1/state");
  EXPECT_EQ(s->values.at("rank1/state.cursor").value, 96);
  EXPECT_EQ(s->values.at("rank1/deeper/more.x").component, "rank1/deeper/more");
  EXPECT_EQ(s->values.at("trainer.step").component, "trainer");
}

TEST(StateSnapshot, ValuesOfOneShapeCompareNumberByNumber) {
  StateSnapshot reference, resumed;
  reference.values["rank_0.random"] = {"rank_0", nlohmann::json::parse("[3, [1, 2, 3], null]"), nullptr};
  resumed.values["rank_0.random"] = {"rank_0", nlohmann::json::parse("[3, [1, 2, 7], null]"), nullptr};
  const ComponentDiff d = compare_snapshots(reference, resumed, Tolerance{}).at("rank_0");
  EXPECT_FALSE(d.passed);
  EXPECT_EQ(d.incomparable, 0) << "numbers that differ are comparable: a noise envelope may excuse them";
  EXPECT_EQ(d.max_abs, 4);
  EXPECT_EQ(d.elements, 4);
  EXPECT_EQ(d.divergence_message(), "rank_0 diverged: rank_0.random number 3 of 4 is 7, reference 3");
  EXPECT_TRUE(compare_snapshots(reference, resumed, Tolerance{0, 5}).at("rank_0").passed);
  resumed.values["rank_0.random"].value = nlohmann::json::parse("[3, [1, 2], null]");
  const ComponentDiff shape = compare_snapshots(reference, resumed, Tolerance{0, 5}).at("rank_0");
  EXPECT_FALSE(shape.passed);
  EXPECT_EQ(shape.incomparable, 1);
}

PyValuePtr number(int64_t i) {
  PyValue v;
  v.type = PyType::kInt;
  v.i = i;
  return std::make_shared<const PyValue>(std::move(v));
}

PyValuePtr sequence(PyType type, std::vector<PyValuePtr> items) {
  PyValue v;
  v.type = type;
  v.items = std::move(items);
  return std::make_shared<const PyValue>(std::move(v));
}

// The drill judges values by diff's typed rules (issue 65 item 9): a Python RNG state restored as a
// list where the program saved a tuple is another state, though its JSON and its numbers are equal;
// numbers inside one typed shape still compare within the tolerance.
TEST(StateSnapshot, ValuesCompareTypedATupleIsNotAList) {
  StateSnapshot reference, resumed;
  const auto state = [](PyType type, int64_t last) {
    return sequence(type, {number(3), sequence(PyType::kTuple, {number(1), number(last)})});
  };
  reference.values["rng.python"] = {"rng", nullptr, state(PyType::kTuple, 2)};
  resumed.values["rng.python"] = {"rng", nullptr, state(PyType::kList, 2)};
  const ComponentDiff retyped = compare_snapshots(reference, resumed, Tolerance{0, 5}).at("rng");
  EXPECT_FALSE(retyped.passed);
  EXPECT_EQ(retyped.incomparable, 1);
  EXPECT_EQ(retyped.divergence_message(),
            "rng diverged: rng.python is [3, (1, 2)] (list), reference (3, (1, 2)) (tuple)");
  resumed.values["rng.python"].typed = state(PyType::kTuple, 6);
  EXPECT_TRUE(compare_snapshots(reference, resumed, Tolerance{0, 5}).at("rng").passed);
  EXPECT_FALSE(compare_snapshots(reference, resumed, Tolerance{}).at("rng").passed);
}

// A committed checkpoint's tensors are checked but not held by its snapshot, and compared by their
// chunks' digests where those decide (snapshot_tensor.h). Whatever decides, the comparison must be
// what comparing both states read whole (read_tensors) and held gives, element by element.
class CommittedSnapshotTest : public ::testing::Test {
 protected:
  std::string save(const std::vector<LoadedTensor>& state, size_t shards = 3,
                   const std::string& format = "native") {
    return testing::save_training_state(root_.path() + "/" + std::to_string(saved_++), state,
                                        testing::kFixtureStep, shards, format);
  }
  static std::vector<LoadedTensor> read_whole(const std::string& dir) {
    auto source = TensorSource::open(dir);
    EXPECT_TRUE(source.is_ok()) << source.status().to_string();
    auto tensors = source->read_tensors();
    EXPECT_TRUE(tensors.is_ok()) << tensors.status().to_string();
    return tensors.is_ok() ? *tensors : std::vector<LoadedTensor>{};
  }
  static void set_f32(std::vector<LoadedTensor>& state, const std::string& name, size_t element, float v) {
    LoadedTensor* t = testing::find_state_tensor(state, name);
    ASSERT_NE(t, nullptr) << name;
    std::memcpy(t->bytes.data() + element * 4, &v, 4);
  }
  static float f32_at(std::vector<LoadedTensor>& state, const std::string& name, size_t element) {
    float v = 0;
    std::memcpy(&v, testing::find_state_tensor(state, name)->bytes.data() + element * 4, 4);
    return v;
  }

  testing::TempDir root_;
  int saved_ = 0;
};

TEST_F(CommittedSnapshotTest, ComparesAsBothStatesReadWholeWhateverDecides) {
  const std::vector<LoadedTensor> state = testing::full_training_state();
  const Tolerance tolerance{1e-3, 1e-6};
  struct Case {
    std::string what;
    std::function<void(std::vector<LoadedTensor>&)> change;
    size_t shards;
  };
  const std::vector<Case> cases = {
      {"the same state, sharded alike (the digests decide)", [](auto&) {}, 3},
      {"the same state in one shard (chunked otherwise: read again)", [](auto&) {}, 1},
      {"a weight nudged within the tolerance",
       [](auto& s) { set_f32(s, "model.blocks.0.w", 300, f32_at(s, "model.blocks.0.w", 300) * (1 + 1e-5f)); },
       3},
      {"a moment beyond it", [](auto& s) { set_f32(s, "optimizer.model.blocks.0.w.exp_avg", 5, 7.0f); }, 3},
      {"a byte of the RNG state",
       [](auto& s) { testing::find_state_tensor(s, "rng.cpu_state")->bytes[77] ^= 0x10; }, 3},
      {"a tensor of another dtype",
       [](auto& s) {
         *testing::find_state_tensor(s, "scheduler.last_step") =
             testing::f64_scalar("scheduler.last_step", 20);
       },
       3},
      {"a tensor dropped", [](auto& s) { testing::drop_state_tensor(s, "scaler.growth_tracker"); }, 3},
  };
  // Every shard format the writer has: the scan reads some files front to back, others chunk by chunk.
  for (const std::string format : {"native", "safetensors", "hdf5"}) {
    SCOPED_TRACE(format);
    const std::string reference = save(state, 3, format);
    auto ref = read_state_snapshot(reference);
    ASSERT_TRUE(ref.is_ok()) << ref.status().to_string();
    for (const auto& t : ref->tensors)
      EXPECT_FALSE(t.held()) << t.name << ": a committed checkpoint's bytes stay in it";
    const std::vector<LoadedTensor> ref_whole = read_whole(reference);
    for (const Case& c : cases) {
      std::vector<LoadedTensor> changed = state;
      c.change(changed);
      const std::string resumed = save(changed, c.shards, format);
      auto got = read_state_snapshot(resumed);
      ASSERT_TRUE(got.is_ok()) << c.what << ": " << got.status().to_string();
      const auto by_snapshots = compare_snapshots(*ref, *got, tolerance);
      StateSnapshot ref_held, got_held;  // the same states read whole and held: compared element by element
      ref_held.tensors.assign(ref_whole.begin(), ref_whole.end());
      const std::vector<LoadedTensor> got_whole = read_whole(resumed);
      got_held.tensors.assign(got_whole.begin(), got_whole.end());
      const auto read_whole_too = compare_snapshots(ref_held, got_held, tolerance);
      ASSERT_EQ(by_snapshots.size(), read_whole_too.size()) << c.what;
      for (const auto& [component, want] : read_whole_too) {
        ASSERT_EQ(by_snapshots.count(component), 1u) << c.what << ": " << component;
        EXPECT_EQ(to_json(by_snapshots.at(component)), to_json(want)) << c.what << ": " << component;
      }
      bool all_passed = true;
      for (const auto& [component, d] : by_snapshots) all_passed = all_passed && d.passed && d.bit_identical;
      EXPECT_EQ(all_passed, c.what.rfind("the same state", 0) == 0) << c.what;
    }
  }
}

TEST_F(CommittedSnapshotTest, ADamagedChunkFailsTheSnapshotAsReadingItWould) {
  const std::string dir = save(testing::full_training_state());
  ASSERT_FALSE(
      testing::flip_chunk_payload_byte(dir, "optimizer.model.blocks.0.w.exp_avg", 1, 3, 0x01).empty());
  auto source = TensorSource::open(dir);
  ASSERT_TRUE(source.is_ok()) << source.status().to_string();
  const auto read = source->read_tensors();
  ASSERT_FALSE(read.is_ok());
  const auto snapshot = read_state_snapshot(dir);
  ASSERT_FALSE(snapshot.is_ok()) << "a chunk that contradicts its hash must fail the snapshot";
  EXPECT_EQ(snapshot.status().to_string(), read.status().to_string());
  EXPECT_NE(snapshot.status().message().find("sha256 mismatch"), std::string::npos)
      << snapshot.status().message();
}

TEST_F(CommittedSnapshotTest, ATensorThatCannotBeReadAgainIsAMismatchNeverOtherBytes) {
  std::vector<LoadedTensor> state = testing::full_training_state();
  const std::string reference = save(state);
  set_f32(state, "model.blocks.0.w", 3, 9.0f);
  const std::string resumed = save(state);
  auto ref = read_state_snapshot(reference);
  auto got = read_state_snapshot(resumed);
  ASSERT_TRUE(ref.is_ok() && got.is_ok());
  // The differing tensor must be read again to be compared; its bytes change after the snapshot.
  const size_t chunks =
      testing::read_fixture_manifest(resumed).find_tensor("model.blocks.0.w")->chunks.size();
  for (size_t i = 0; i < chunks; ++i)
    ASSERT_FALSE(testing::flip_chunk_payload_byte(resumed, "model.blocks.0.w", i, 0, 0x40).empty());
  const auto components = compare_snapshots(*ref, *got, Tolerance{});
  const ComponentDiff& model = components.at("model");
  EXPECT_FALSE(model.passed);
  EXPECT_EQ(model.first_diverging_tensor, "model.blocks.0.w");
  EXPECT_EQ(model.first_mismatch.rfind("cannot be read again: ", 0), 0u) << model.first_mismatch;
  EXPECT_NE(model.first_mismatch.find("sha256 mismatch"), std::string::npos) << model.first_mismatch;
  EXPECT_EQ(model.incomparable, 1);
  // The tensors whose digests agreed were decided when the snapshot was taken.
  EXPECT_TRUE(components.at("optimizer").passed);
}

}  // namespace
}  // namespace ckpt
