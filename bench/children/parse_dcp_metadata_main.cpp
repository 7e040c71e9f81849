// `ckptcheck_bench_parse_dcp PATH`: read_dcp_metadata_file of one DCP `.metadata`, the child the metadata
// bench times against CPython's pickle.load (bench/metadata_bench.cpp). A program of its own, linked
// like `ckptcheck` (torch-free, the same heap setup), so its start-up and peak RSS are what the CLI's
// metadata pass costs, not the bench's LibTorch.
#include <cstdio>
#include <string>

#include "base/huge_pages.h"
#include "formats/dcp_metadata.h"

int main(int argc, char** argv) {
  ckpt::use_huge_page_heap();
  if (argc != 2) {
    std::fprintf(stderr, "usage: ckptcheck_bench_parse_dcp PATH/.metadata\n");
    return 2;
  }
  const std::string path = argv[1];
  auto parsed = ckpt::read_dcp_metadata_file(path);
  if (!parsed) {
    std::fprintf(stderr, "%s\n", parsed.status().message().c_str());
    return 2;
  }
  size_t chunks = 0;
  for (const auto& t : parsed->tensors) chunks += t.chunks.size();
  std::printf("%zu tensors, %zu chunks, %zu items\n", parsed->tensors.size(), chunks, parsed->items.size());
  return 0;
}
