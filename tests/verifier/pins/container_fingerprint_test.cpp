#include "verifier/pins/container_fingerprint.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "base/sha256.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

TEST(ContainerFingerprint, ReadsOsRelease) {
  const auto fields = os_release_fields(
      "NAME=\"Debian\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nVERSION_ID=\"12\"\n");
  EXPECT_EQ(fields["PRETTY_NAME"], "Debian GNU/Linux 12 (bookworm)");
  EXPECT_EQ(fields["VERSION_ID"], "12");
  EXPECT_EQ(os_release_fields("ID=alpine\n")["VERSION_ID"], "unknown");
}

TEST(ContainerFingerprint, KeepsOnlyVectorIsaFlagsOfTheFirstProcessor) {
  const std::string cpuinfo =
      "processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu sse4_2 avx2 constant_tsc fma avx2\n\n"
      "processor\t: 1\nmodel name\t: Other\nflags\t\t: avx512f\n";
  const auto cpu = cpu_identity(cpuinfo);
  EXPECT_EQ(cpu["model"], "AMD EPYC 7B13");
  EXPECT_EQ(cpu["isa_flags"], nlohmann::json({"avx2", "fma", "sse4_2"}));
}

TEST(ContainerFingerprint, FindsNumericsLibrariesInMaps) {
  const std::string maps =
      "7f00-7f01 r--p 00000000 08:01 1 /usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13\n"
      "7f01-7f02 r-xp 00001000 08:01 1 /usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13\n"
      "7f02-7f03 r--p 00000000 08:01 2 /usr/lib/x86_64-linux-gnu/libc10.so.1.13\n"
      "7f03-7f04 r--p 00000000 08:01 3 /usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0 "
      "(deleted)\n"
      "7f04-7f05 r--p 00000000 08:01 4 /usr/lib/x86_64-linux-gnu/libssl.so.3\n"
      "7f05-7f06 rw-p 00000000 00:00 0 [heap]\n";
  EXPECT_EQ(numerics_library_paths(maps),
            (std::vector<std::string>{"/usr/lib/x86_64-linux-gnu/libc10.so.1.13",
                                      "/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13",
                                      "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0"}));
}

TEST(ContainerFingerprint, HashesLibrariesAndChangesWithEveryInput) {
  testing::TempDir dir;
  const std::string lib = dir.write("libopenblas.so.0", "blas bytes");
  FingerprintSources sources{dir.write("os-release", "PRETTY_NAME=\"Test OS\"\nVERSION_ID=\"1\"\n"),
                             dir.write("cpuinfo", "model name\t: Test CPU\nflags\t\t: avx2\n"),
                             dir.write("maps", "7f00-7f01 r--p 00000000 08:01 1 " + lib + "\n"), ""};
  ::unsetenv("OPENBLAS_CORETYPE");
  const auto first = container_fingerprint(1, sources);
  EXPECT_EQ(first["inputs"]["libraries"][lib], sha256_hex(std::string("blas bytes")));
  EXPECT_EQ(first["inputs"]["os"]["PRETTY_NAME"], "Test OS");
  EXPECT_EQ(first["inputs"]["cpu"]["model"], "Test CPU");
  EXPECT_EQ(first["inputs"]["env"]["OPENBLAS_CORETYPE"], "unset");
  EXPECT_EQ(first["sha256"], sha256_hex(first["inputs"].dump()));
  EXPECT_EQ(container_fingerprint(1, sources), first);  // deterministic

  EXPECT_NE(container_fingerprint(2, sources)["sha256"], first["sha256"]);
  ::setenv("OPENBLAS_CORETYPE", "Haswell", 1);
  const auto with_env = container_fingerprint(1, sources);
  ::unsetenv("OPENBLAS_CORETYPE");
  EXPECT_EQ(with_env["inputs"]["env"]["OPENBLAS_CORETYPE"], "Haswell");
  EXPECT_NE(with_env["sha256"], first["sha256"]);
  dir.write("libopenblas.so.0", "other blas bytes");
  EXPECT_NE(container_fingerprint(1, sources)["sha256"], first["sha256"]);
}

}  // namespace
}  // namespace ckpt

namespace ckpt {
namespace {

TEST(ContainerFingerprint, LibrariesFromLddOutputAreTheNumericsOnes) {
  const std::string ldd =
      "\tlinux-vdso.so.1 (0x00007ffd)\n"
      "\tlibtorch_cpu.so.1.13 => /usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13 (0x00007f1)\n"
      "\tlibc10.so.1.13 => /usr/lib/x86_64-linux-gnu/libc10.so.1.13 (0x00007f2)\n"
      "\tlibblas.so.3 => /usr/lib/x86_64-linux-gnu/libblas.so.3 (0x00007f3)\n"
      "\tlibz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x00007f4)\n";
  EXPECT_EQ(numerics_library_paths_from_ldd(ldd),
            (std::vector<std::string>{"/usr/lib/x86_64-linux-gnu/libblas.so.3",
                                      "/usr/lib/x86_64-linux-gnu/libc10.so.1.13",
                                      "/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13"}));
}

TEST(ContainerFingerprint, ReadsProcFilesThatReportZeroSize) {
  // /proc/cpuinfo has st_size 0; the CPU model must still be found.
  const auto fp = container_fingerprint(1, FingerprintSources{});
  EXPECT_NE(fp["inputs"]["cpu"]["model"], "unknown") << fp.dump();
}

}  // namespace
}  // namespace ckpt
