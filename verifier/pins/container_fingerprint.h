// What about the machine and image can change a run's numerics without changing its config: the OS
// image, the C library, the bytes of the numerics libraries actually loaded, the CPU's vector ISA,
// the thread count and the environment variables that steer BLAS, OpenMP, cuBLAS and NCCL.
// The fingerprint is the SHA-256 of those inputs plus the inputs themselves, so a drift report can
// name which one changed instead of only saying "the container differs".
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ckpt {

// Where the facts are read from. Tests point these at files they wrote.
struct FingerprintSources {
  std::string os_release = "/etc/os-release";
  std::string cpuinfo = "/proc/cpuinfo";
  std::string maps = "/proc/self/maps";
  // The program whose numerics libraries are fingerprinted: its dynamic dependencies (as the
  // loader resolves them, via `ldd`) join what is mapped here. The torch-free `ckptcheck` maps no
  // LibTorch, so without this its fingerprint would never match the training process's.
  std::string linked_program;
};

// The resolved paths in `ldd` output ("libc10.so => /usr/lib/.../libc10.so (0x...)") that are
// numerics libraries, sorted and de-duplicated.
std::vector<std::string> numerics_library_paths_from_ldd(const std::string& ldd_text);

// The environment variables recorded, each as its value or "unset".
const std::vector<std::string>& numerics_env_vars();

// {"PRETTY_NAME": ..., "VERSION_ID": ...} from os-release text; "unknown" for a missing key.
nlohmann::json os_release_fields(const std::string& os_release_text);
// {"model": ..., "isa_flags": [...]} for the first processor listed: only the vector-ISA flags that
// change which kernels BLAS / oneDNN dispatch to, so unrelated kernel flags do not read as drift.
nlohmann::json cpu_identity(const std::string& cpuinfo_text);
// Sorted, de-duplicated paths of the mapped libraries that do the arithmetic: libtorch*, libc10*,
// BLAS (libopenblas*, libblas*, libmkl*), cuBLAS, cuDNN and the CUDA runtime.
std::vector<std::string> numerics_library_paths(const std::string& maps_text);

// {"inputs": {...}, "sha256": sha256 of the canonical (sorted-key) dump of inputs}.
nlohmann::json fingerprint_of(const nlohmann::json& inputs);

// Reads everything above for this process. Unreadable sources are recorded as "unreadable: why"
// rather than failing: a fingerprint describes, it does not judge.
// The sources for this process: /proc and /etc, and the training program beside this one.
FingerprintSources default_fingerprint_sources();
nlohmann::json container_fingerprint(int threads,
                                     const FingerprintSources& sources = default_fingerprint_sources());

}  // namespace ckpt
