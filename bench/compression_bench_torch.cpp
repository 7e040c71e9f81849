// zstd on AdamW optimizer state: how much levels 1 and 3 save on F32 moments and at what speed,
// so whoever proposes compressed shards knows what it buys. Single-threaded ZSTD_compress, best
// of N; the round trip is checked byte for byte.
#include <ATen/CPUGeneratorImpl.h>
#include <zstd.h>

#include <cstring>
#include <vector>

#include "bench/bench.h"
#include "bench/synthetic_state_torch.h"

namespace ckpt::bench {

namespace {

constexpr int64_t kCols = 1024;

BenchRow compress_row(const BenchSettings& s, const std::string& what, const at::Tensor& tensor, int level) {
  const auto* data = static_cast<const uint8_t*>(tensor.data_ptr());
  const size_t bytes = static_cast<size_t>(tensor.nbytes());
  const std::string name = "zstd -" + std::to_string(level) + " on " + what + " (" +
                           format_mib(static_cast<double>(bytes)) + " F32)";
  std::vector<uint8_t> compressed(ZSTD_compressBound(bytes));
  std::vector<uint8_t> restored(bytes);
  size_t compressed_bytes = 0;
  auto comp = best_of(s.repetitions, nullptr, [&]() -> Status {
    compressed_bytes = ZSTD_compress(compressed.data(), compressed.size(), data, bytes, level);
    if (ZSTD_isError(compressed_bytes))
      return Status::io_error(std::string("ZSTD_compress: ") + ZSTD_getErrorName(compressed_bytes));
    return Status::ok();
  });
  if (!comp) return unavailable_row(name, "reported", "error", comp.status().message());
  auto decomp = best_of(s.repetitions, nullptr, [&]() -> Status {
    const size_t n = ZSTD_decompress(restored.data(), restored.size(), compressed.data(), compressed_bytes);
    if (ZSTD_isError(n) || n != bytes) return Status::corruption("ZSTD_decompress: round trip size differs");
    return Status::ok();
  });
  if (!decomp) return unavailable_row(name, "reported", "error", decomp.status().message());
  if (std::memcmp(restored.data(), data, bytes) != 0) {
    return unavailable_row(name, "reported", "error", "zstd round trip changed the bytes");
  }
  BenchRow row;
  row.name = name;
  const double ratio = static_cast<double>(bytes) / static_cast<double>(compressed_bytes);
  char text[128];
  std::snprintf(text, sizeof(text), "%s, compress %.0f MB/s, decompress %.0f MB/s",
                format_mib(static_cast<double>(compressed_bytes)).c_str(), bytes / comp->best_seconds / 1e6,
                bytes / decomp->best_seconds / 1e6);
  row.ours = text;
  row.baseline = "uncompressed " + format_mib(static_cast<double>(bytes));
  row.ratio = ratio;
  row.goal = "reported";
  row.met = "reported";
  row.numbers = {{"level", level},
                 {"input_bytes", bytes},
                 {"compressed_bytes", compressed_bytes},
                 {"compression_ratio", ratio},
                 {"compress_seconds", comp->all_seconds},
                 {"decompress_seconds", decomp->all_seconds},
                 {"compress_mb_per_second", bytes / comp->best_seconds / 1e6},
                 {"decompress_mb_per_second", bytes / decomp->best_seconds / 1e6},
                 {"threads", 1}};
  return row;
}

}  // namespace

std::vector<BenchRow> run_compression_bench(const BenchSettings& s) {
  const int64_t rows = static_cast<int64_t>((s.quick ? 16 : 128) * kMiB / (kCols * 4));
  at::Generator gen = at::detail::createCPUGenerator(23);
  const at::Tensor exp_avg_sq = synthetic_exp_avg_sq(rows, kCols, gen);
  const at::Tensor exp_avg = at::normal(0.0, 1e-4, {rows, kCols}, gen);
  std::vector<BenchRow> out;
  for (int level : {1, 3}) out.push_back(compress_row(s, "exp_avg_sq", exp_avg_sq, level));
  for (int level : {1, 3}) out.push_back(compress_row(s, "exp_avg", exp_avg, level));
  return out;
}

}  // namespace ckpt::bench
