// Writes the generated part of the seed corpus (fuzz/make_corpus.sh runs it): pickles and
// torch.save archives with memo chains, self-references, fan-out and nesting around the reader's
// bounds, and JSON nested around kMaxJsonDepth. Each seed is small; the custom mutators grow them
// to megabytes while fuzzing.
//   fuzz_seed_gen OUT_DIR   writes OUT_DIR/{pickle,pytorch,manifest}/gen-*
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "fuzz/pickle_shapes.h"
#include "fuzz/zip_writer.h"

namespace {

using ckpt::fuzz::op_binget;
using ckpt::fuzz::pickle_program;

bool write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_seed_gen OUT_DIR\n");
    return 2;
  }
  const std::string root = argv[1];
  using namespace ckpt::fuzz;
  const std::string tensor = tensor_value("0", 4);
  const std::vector<std::pair<std::string, std::string>> pickles = {
      // Each list holds the previous one twice: 2^depth paths. 31..33 straddle kPickleMaxNesting.
      {"memo-chain-tensor-20", pickle_program("model", memo_chain(tensor, 20, 0))},
      {"memo-chain-tensor-31", pickle_program("model", memo_chain(tensor, 31, 0))},
      {"memo-chain-list-33", pickle_program("model", memo_chain("]", 33, 0))},
      {"memo-chain-string-12", pickle_program("model", memo_chain(long_string(64), 12, 300))},
      {"memo-dict-chain-tensor-30", pickle_program("model", memo_dict_chain(tensor, 30, 0))},
      {"list-nest-33", pickle_program("model", list_nest(33))},
      {"list-nest-4096", pickle_program("model", list_nest(4096))},
      {"mark-tuple-nest-1000", pickle_program("model", mark_tuple_nest(1000))},
      {"mark-list-nest-1000", pickle_program("model", mark_list_nest(1000))},
      {"self-cycle", pickle_program("model", self_cycle(7))},
      {"fan-out-tensor-chain", pickle_program("model", fan_out(memo_chain(tensor, 16, 1), 64, 0))},
      {"memo-flood-2000", pickle_program("model", memo_flood(2000, 0))},
  };
  const std::string storage(16, '\0');  // 4 floats: storage "0" of every tensor above
  for (const char* dir : {"pickle", "pytorch", "manifest"}) ::mkdir((root + "/" + dir).c_str(), 0755);
  bool ok = true;
  for (const auto& [name, bytes] : pickles) {
    ok &= write_file(root + "/pickle/gen-" + name + ".pkl", bytes);
    ok &= write_file(root + "/pytorch/gen-" + name + ".pt", torch_save_zip(bytes, {{"0", storage}}));
  }
  // A tensor shared by a second key: the alias path, through the seed's own memo key.
  ok &= write_file(root + "/pytorch/gen-shared-tensor.pt",
                   torch_save_zip(std::string("\x80\x02}(", 4) + op_str("a") + tensor + op_binput(9) +
                                      op_str("b") + op_binget(9) + "u.",
                                  {{"0", storage}}));
  for (size_t depth : {127, 128, 129}) {
    ok &= write_file(root + "/manifest/gen-array-nest-" + std::to_string(depth) + ".json",
                     std::string(depth, '[') + std::string(depth, ']'));
    std::string object;
    for (size_t i = 0; i < depth; ++i) object += "{\"config\":";
    ok &= write_file(root + "/manifest/gen-object-nest-" + std::to_string(depth) + ".json",
                     object + "{}" + std::string(depth, '}'));
  }
  if (!ok) {
    std::fprintf(stderr, "fuzz_seed_gen: cannot write under %s\n", root.c_str());
    return 2;
  }
  return 0;
}
