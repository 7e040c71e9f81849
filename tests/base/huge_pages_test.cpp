#include "base/huge_pages.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/test_support.h"

namespace ckpt {
namespace {

// Whether a [heap] mapping of this process is advised as huge pages ("hg" in its VmFlags in
// /proc/self/smaps). The advice splits the heap into several mappings; the fresh span has it.
bool heap_has_huge_page_advice() {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in_heap = false;
  while (std::getline(smaps, line)) {
    // A mapping's line ("55a7cc000000-55a7d1c00000 rw-p ..."), not one of its fields ("Rss: ...").
    const bool mapping = !line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) &&
                         line.find('-') < line.find(' ');
    if (mapping) in_heap = line.find(" [heap]") != std::string::npos;
    if (in_heap && line.rfind("VmFlags:", 0) == 0 && line.find(" hg") != std::string::npos) return true;
  }
  return false;
}

// Each in a child (testing::exit_code_in_child): the advice and malloc's settings are the whole
// process's.
TEST(HugePageHeap, AdvisesTheMainHeapAndKeepsItUsable) {
  if (::access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK) != 0)
    GTEST_SKIP() << "this kernel has no transparent huge pages: nothing to advise";
  EXPECT_EQ(testing::exit_code_in_child([] {
              use_huge_page_heap();
              // Millions of small records, as a metadata pass makes them, then all freed and made again.
              std::vector<std::string*> records;
              for (int round = 0; round < 2; ++round) {
                for (int i = 0; i < 200000; ++i)
                  records.push_back(new std::string(40, static_cast<char>('a' + i % 26)));
                for (std::string* r : records) {
                  if (r->size() != 40) return 3;
                  delete r;
                }
                records.clear();
              }
              return heap_has_huge_page_advice() ? 0 : 1;
            }),
            0)
      << "1: no [heap] mapping is advised (no 'hg' in its VmFlags); 3: a record came back changed";
}

// This process's anonymous resident memory, in KiB (RssAnon in /proc/self/status).
long resident_anonymous_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("RssAnon:", 0) == 0) return std::stol(line.substr(8));
  }
  return -1;
}

// A phase's memory freed at the top of the huge-page heap stays resident (the heap is never
// trimmed); release_freed_heap_top gives its pages back and leaves the heap advised and usable.
TEST(HugePageHeap, GivesBackTheFreedTopAndKeepsItsAdvice) {
  if (::access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK) != 0)
    GTEST_SKIP() << "this kernel has no transparent huge pages: nothing to advise";
  EXPECT_EQ(testing::exit_code_in_child([] {
              use_huge_page_heap();
              constexpr size_t kBytes = size_t{64} << 20;
              char* phase = new char[kBytes];
              std::memset(phase, 1, kBytes);
              delete[] phase;
              const long before = resident_anonymous_kib();
              release_freed_heap_top();
              const long after = resident_anonymous_kib();
              if (before < 0 || before - after < 48 * 1024) return 1;
              if (!heap_has_huge_page_advice()) return 2;
              char* next = new char[kBytes];
              std::memset(next, 2, kBytes);
              const bool kept = next[0] == 2 && next[kBytes - 1] == 2;
              delete[] next;
              return kept ? 0 : 3;
            }),
            0)
      << "1: less than 48 MiB of the freed 64 MiB left the resident set; 2: the heap lost its advice; "
         "3: the heap was not usable after";
}

// Called in a process whose heap is already in use: several MB freed below a small free top (a
// hole the block would have fitted in), as in the unit tests' own fork. The block must still grow
// the heap, and freeing it must not give the step back (block and step over the trim threshold).
TEST(HugePageHeap, AdvisesAHeapWithAHoleLargerThanItsTop) {
  if (::access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK) != 0)
    GTEST_SKIP() << "this kernel has no transparent huge pages: nothing to advise";
  EXPECT_EQ(testing::exit_code_in_child([] {
              std::vector<char*> hole;
              for (int i = 0; i < 60000; ++i) hole.push_back(new char[100]);  // ~7 MB
              char* const above = new char[100];                              // keeps the hole off the top
              for (char* p : hole) delete[] p;
              use_huge_page_heap();
              const bool advised = heap_has_huge_page_advice();
              delete[] above;
              return advised ? 0 : 1;
            }),
            0)
      << "no [heap] mapping is advised (no 'hg' in its VmFlags)";
}

TEST(HugePageHeap, LeavesAProcessWithAnAddressSpaceLimitAsItWas) {
  // Under `ulimit -v` a reserved step of address space would count against the limit and make a
  // later allocation fail: the heap is left alone, and a process may still use what it is allowed.
  EXPECT_EQ(testing::exit_code_in_child([] {
              struct rlimit limit {};
              limit.rlim_cur = limit.rlim_max = size_t{1} << 30;
              if (::setrlimit(RLIMIT_AS, &limit) != 0) return 4;
              use_huge_page_heap();
              std::vector<std::string*> records;
              for (int i = 0; i < 1000000; ++i) records.push_back(new std::string(100, 'x'));  // ~150 MB
              for (std::string* r : records) delete r;
              return heap_has_huge_page_advice() ? 1 : 0;
            }),
            0)
      << "1: the heap was advised under the limit; 4: setrlimit failed; -1: the child died by a signal "
         "(std::bad_alloc aborts it)";
}

}  // namespace
}  // namespace ckpt
