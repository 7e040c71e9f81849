// The hashing limit: cores x SHA-256 on an in-cache buffer, measured in the same run as verify.
// The goal's limit is OpenSSL's rate (EVP, one stream per core), a named baseline that ckptcheck's
// own kernels do not define; beside it, the rate of ckptcheck's two-streams-per-core hashing.
#include <openssl/evp.h>

#include <atomic>
#include <random>
#include <thread>

#include "base/byte_source.h"
#include "base/sha256.h"
#include "base/sha256_blocks.h"
#include "bench/bench.h"

namespace ckpt::bench {

namespace {

constexpr size_t kBufferBytes = 256 << 10;  // stays in L2, as verify's read blocks do

// OpenSSL's SHA-256 through EVP, which picks its SHA-NI / AVX2 code: the baseline hasher.
class OpenSslSha256 {
 public:
  OpenSslSha256() : ctx_(EVP_MD_CTX_new()) { EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr); }
  ~OpenSslSha256() { EVP_MD_CTX_free(ctx_); }
  OpenSslSha256(const OpenSslSha256&) = delete;
  OpenSslSha256& operator=(const OpenSslSha256&) = delete;
  void update(const uint8_t* data, size_t size) { EVP_DigestUpdate(ctx_, data, size); }
  void finish() {
    uint8_t digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx_, digest, &len);
  }

 private:
  EVP_MD_CTX* ctx_;
};

enum class Hashing { kOpenSslOneStream, kOursTwoStreams };

// Seconds for `threads` threads, released together, to hash `bytes_per_thread` each.
double hash_concurrently(size_t threads, uint64_t bytes_per_thread, Hashing hashing) {
  std::atomic<size_t> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::vector<uint8_t> buffer(kBufferBytes);
      std::mt19937_64 rng(t + 1);
      for (auto& b : buffer) b = static_cast<uint8_t>(rng());
      const size_t half = buffer.size() / 2;
      auto hash = [&](uint64_t bytes) {
        if (hashing == Hashing::kOpenSslOneStream) {
          OpenSslSha256 sha;
          for (uint64_t done = 0; done < bytes; done += buffer.size())
            sha.update(buffer.data(), buffer.size());
          sha.finish();
        } else {  // the buffer's halves as two streams, as verify's two units per core
          Sha256 a;
          Sha256 b;
          for (uint64_t done = 0; done < bytes; done += buffer.size())
            sha256_update_two(a, buffer.data(), half, b, buffer.data() + half, half);
          (void)a.finish();
          (void)b.finish();
        }
      };
      hash(buffer.size());  // faults the pages in, loads the code path
      ready.fetch_add(1);
      while (!go.load()) {
      }
      hash(bytes_per_thread);
    });
  }
  while (ready.load() < threads) std::this_thread::yield();
  const double start = now_seconds();
  go.store(true);
  for (auto& t : pool) t.join();
  return seconds_since(start);
}

}  // namespace

HashingLimit measure_hashing_limit(const BenchSettings& settings) {
  HashingLimit limit;
  limit.threads = std::max(1u, std::thread::hardware_concurrency());
  const uint64_t per_thread = (settings.quick ? 64 : 512) * kMiB;
  double best_single = 0, best_all = 0;
  const double all_bytes = static_cast<double>(per_thread * limit.threads);
  double best_two = 0;
  double best_two_single = 0;
  for (int r = 0; r < settings.repetitions; ++r) {
    best_single = std::max(best_single, static_cast<double>(per_thread) /
                                            hash_concurrently(1, per_thread, Hashing::kOpenSslOneStream));
    const double all = all_bytes / hash_concurrently(limit.threads, per_thread, Hashing::kOpenSslOneStream);
    limit.all_bytes_per_second.push_back(all);
    best_all = std::max(best_all, all);
    best_two = std::max(best_two,
                        all_bytes / hash_concurrently(limit.threads, per_thread, Hashing::kOursTwoStreams));
    best_two_single =
        std::max(best_two_single, static_cast<double>(per_thread) /
                                      hash_concurrently(1, per_thread, Hashing::kOursTwoStreams));
  }
  limit.single_thread_bytes_per_second = best_single;
  limit.bytes_per_second = best_all;
  limit.two_stream_bytes_per_second = best_two;
  limit.two_stream_single_thread_bytes_per_second = best_two_single;
  limit.kernel = sha256_kernel_name(active_sha256_kernel());
  return limit;
}

Result<double> page_cache_hashing_rate(const BenchSettings& settings, const std::vector<std::string>& files,
                                       size_t threads) {
  uint64_t total = 0;
  for (const auto& path : files) {
    CKPT_ASSIGN_OR_RETURN(auto source, FileByteSource::open(path));
    total += source->size();
  }
  double best = 0;
  for (int r = 0; r < settings.repetitions; ++r) {
    std::atomic<size_t> next{0};
    std::vector<Status> failed(threads, Status::ok());
    const double start = now_seconds();
    std::vector<std::thread> pool;
    for (size_t t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        std::vector<uint8_t> buffer(kBufferBytes);
        for (size_t i; (i = next.fetch_add(1)) < files.size();) {
          failed[t] = [&]() -> Status {
            CKPT_ASSIGN_OR_RETURN(auto source, FileByteSource::open(files[i]));
            OpenSslSha256 sha;
            for (uint64_t pos = 0; pos < source->size();) {
              const size_t n = static_cast<size_t>(std::min<uint64_t>(buffer.size(), source->size() - pos));
              CKPT_RETURN_IF_ERROR(source->read_at(pos, buffer.data(), n));
              sha.update(buffer.data(), n);
              pos += n;
            }
            sha.finish();
            return Status::ok();
          }();
          if (!failed[t]) return;
        }
      });
    }
    for (auto& t : pool) t.join();
    for (const auto& f : failed) CKPT_RETURN_IF_ERROR(f);
    best = std::max(best, static_cast<double>(total) / seconds_since(start));
  }
  return best;
}

}  // namespace ckpt::bench
