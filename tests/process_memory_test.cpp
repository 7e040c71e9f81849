#include "fixtures/process_memory.h"

#include <gtest/gtest.h>

#include <vector>

namespace ckpt {
namespace {

TEST(ProcessMemory, ParsesStatusText) {
  Result<ProcessMemory> m =
      parse_proc_status("Name:\ttest\nVmHWM:\t    2048 kB\nVmRSS:\t    1000 kB\nThreads:\t1\n");
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  EXPECT_EQ(m->peak_rss_bytes, 2048 * 1024);
  EXPECT_EQ(m->rss_bytes, 1000 * 1024);
  EXPECT_FALSE(parse_proc_status("VmRSS:\t1 kB\n").is_ok());
}

TEST(ProcessMemory, PeakFollowsAnAllocationAfterReset) {
  if (!reset_peak_rss().is_ok()) GTEST_SKIP() << "/proc/self/clear_refs not writable here";
  Result<ProcessMemory> before = read_process_memory();
  ASSERT_TRUE(before.is_ok()) << before.status().to_string();
  {
    std::vector<char> block(64 << 20, 1);  // touched, so resident
    volatile char sink = block[block.size() / 2];
    (void)sink;
  }
  Result<ProcessMemory> after = read_process_memory();
  ASSERT_TRUE(after.is_ok());
  EXPECT_GE(after->peak_rss_bytes, before->rss_bytes + (60 << 20));
}

}  // namespace
}  // namespace ckpt
