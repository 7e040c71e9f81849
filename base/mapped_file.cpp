#include "base/mapped_file.h"

#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  // Linux 5.14; older kernels answer EINVAL and we touch pages instead
#endif

namespace ckpt {

namespace {
uint64_t round_up_to_page(uint64_t n) {
  return (n + MappedFile::page_size() - 1) / MappedFile::page_size() * MappedFile::page_size();
}

// ---- which file a mapped address belongs to (for guarded reads' messages) ----------------------

struct RegisteredPiece {
  uint64_t length = 0;
  std::string path;
  uint64_t file_offset = 0;
};

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::map<uintptr_t, RegisteredPiece>& registry() {                   // keyed by the piece's first address
  static auto* pieces = new std::map<uintptr_t, RegisteredPiece>();  // outlives static destructors
  return *pieces;
}

// ---- SIGBUS guard ------------------------------------------------------------------------------

// Invariant: non-null only while this thread runs a guarded access; the handler jumps to it.
struct GuardFrame {
  sigjmp_buf jump;
  const void* fault = nullptr;
};
thread_local GuardFrame* t_guard = nullptr;
struct sigaction g_previous_sigbus;

void on_sigbus(int sig, siginfo_t* info, void* ucontext) {
  GuardFrame* frame = t_guard;
  if (frame) {
    frame->fault = info ? info->si_addr : nullptr;
    t_guard = nullptr;
    siglongjmp(frame->jump, 1);
  }
  // Not ours: whatever was installed before (the default action, or a sanitizer's report) handles
  // it. Re-raised so that a SIGBUS sent by kill(), which would not recur on return, still counts.
  (void)sig;
  (void)ucontext;
  ::sigaction(SIGBUS, &g_previous_sigbus, nullptr);
  ::raise(SIGBUS);
}

void install_sigbus_handler_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action;
    std::memset(&action, 0, sizeof action);
    action.sa_sigaction = on_sigbus;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGBUS, &action, &g_previous_sigbus);
  });
}

Status shrank_while_mapped(const void* fault, const void* src, const std::string& what) {
  const auto address = reinterpret_cast<uintptr_t>(fault);
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    auto it = registry().upper_bound(address);
    if (it != registry().begin()) {
      --it;
      if (address - it->first < it->second.length) {
        return Status::io_error(it->second.path + ": shrank while mapped (SIGBUS at offset " +
                                std::to_string(it->second.file_offset + (address - it->first)) + ")");
      }
    }
  }
  const auto start = reinterpret_cast<uintptr_t>(src);
  const std::string offset = fault && address >= start ? std::to_string(address - start) : "unknown";
  return Status::io_error(what + ": shrank while mapped (SIGBUS at offset " + offset + ")");
}

}  // namespace

Status guarded_access_impl(const void* src, const std::string& what, void (*access)(void*), void* context) {
  install_sigbus_handler_once();
  GuardFrame frame;
  GuardFrame* const outer = t_guard;
  // No signal mask saved (that costs a system call per access): after a jump the handler's mask
  // still blocks SIGBUS in this thread, and the fault path below unblocks it.
  if (sigsetjmp(frame.jump, 0) == 0) {
    t_guard = &frame;
    access(context);
    t_guard = outer;
    return Status::ok();
  }
  t_guard = outer;
  sigset_t bus;
  sigemptyset(&bus);
  sigaddset(&bus, SIGBUS);
  ::pthread_sigmask(SIG_UNBLOCK, &bus, nullptr);
  return shrank_while_mapped(frame.fault, src, what);
}

Status guarded_copy(void* dst, const void* src, size_t n, const std::string& what) {
  if (n == 0) return Status::ok();
  return guarded_access(src, what, [&] { std::memcpy(dst, src, n); });
}

void MappedFile::register_piece(const uint8_t* at, uint64_t length, const std::string& path,
                                uint64_t file_offset) {
  if (length == 0) return;
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry()[reinterpret_cast<uintptr_t>(at)] = {length, path, file_offset};
  pieces_.push_back(at);
}

uint64_t MappedFile::page_size() {
  static const uint64_t size = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

Result<std::shared_ptr<const MappedFile>> MappedFile::map(const FileByteSource& source) {
  const uint64_t size = source.size();
  const uint8_t* data = nullptr;
  if (size > 0) {  // mmap of zero bytes is EINVAL; an empty file maps to no bytes
    void* p = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_PRIVATE, source.fd(), 0);
    if (p == MAP_FAILED) {
      return Status::io_error(source.name() + ": cannot map " + std::to_string(size) +
                              " bytes: " + std::strerror(errno));
    }
    data = static_cast<const uint8_t*>(p);
  }
  // The mapping holds its own reference to the file; the source may close its descriptor.
  std::shared_ptr<MappedFile> mapped(new MappedFile(data, size, round_up_to_page(size)));
  mapped->register_piece(data, size, source.name(), 0);
  return std::shared_ptr<const MappedFile>(std::move(mapped));
}

Result<std::shared_ptr<const MappedFile>> MappedFile::open(const std::string& path) {
  CKPT_ASSIGN_OR_RETURN(auto source, FileByteSource::open(path));
  return map(*source);
}

bool MappedFile::can_stitch(const std::vector<FileRange>& ranges) {
  if (ranges.empty()) return false;
  for (size_t i = 0; i < ranges.size(); ++i) {
    const FileRange& r = ranges[i];
    if (!r.source || r.length == 0 || r.offset % page_size() != 0) return false;
    if (i + 1 < ranges.size() && r.length % page_size() != 0) return false;
    if (r.offset > r.source->size() || r.length > r.source->size() - r.offset) return false;
  }
  return true;
}

Result<std::shared_ptr<const MappedFile>> MappedFile::stitch(const std::vector<FileRange>& ranges) {
  if (!can_stitch(ranges))
    return Status::invalid_argument("stitch: ranges are not page-aligned pieces of their files");
  uint64_t total = 0;
  for (const FileRange& r : ranges) total += r.length;
  const uint64_t reserved = round_up_to_page(total);
  // Reserve the whole range first so the pieces land side by side and nothing else can.
  void* base = ::mmap(nullptr, static_cast<size_t>(reserved), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) {
    return Status::io_error(ranges[0].source->name() + ": cannot reserve " + std::to_string(reserved) +
                            " bytes of address space: " + std::strerror(errno));
  }
  // Owns the reservation from here on: any failure below unmaps all of it.
  std::shared_ptr<MappedFile> stitched(new MappedFile(static_cast<const uint8_t*>(base), total, reserved));
  uint64_t at = 0;
  for (const FileRange& r : ranges) {
    void* want = static_cast<uint8_t*>(base) + at;
    void* p = ::mmap(want, static_cast<size_t>(r.length), PROT_READ, MAP_PRIVATE | MAP_FIXED, r.source->fd(),
                     static_cast<off_t>(r.offset));
    if (p == MAP_FAILED || p != want) {
      return Status::io_error(r.source->name() + " @" + std::to_string(r.offset) + ": cannot map " +
                              std::to_string(r.length) + " bytes: " + std::strerror(errno));
    }
    stitched->register_piece(static_cast<const uint8_t*>(want), r.length, r.source->name(), r.offset);
    at += r.length;
  }
  return std::shared_ptr<const MappedFile>(std::move(stitched));
}

void MappedFile::populate(const uint8_t* data, uint64_t size) {
  if (size == 0) return;
  const uint64_t page = page_size();
  const auto begin = reinterpret_cast<uintptr_t>(data) / page * page;
  const auto end = reinterpret_cast<uintptr_t>(data) + size;
  if (::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_READ) == 0) return;
  volatile uint8_t sink = 0;
  for (uintptr_t p = begin; p < end; p += page) sink = sink + *reinterpret_cast<const uint8_t*>(p);
}

MappedFile::~MappedFile() {
  if (!pieces_.empty()) {
    std::lock_guard<std::mutex> lock(registry_mutex());
    for (const uint8_t* at : pieces_) registry().erase(reinterpret_cast<uintptr_t>(at));
  }
  if (data_) ::munmap(const_cast<uint8_t*>(data_), static_cast<size_t>(mapped_bytes_));
}

}  // namespace ckpt
