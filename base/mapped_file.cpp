#include "base/mapped_file.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  // Linux 5.14; older kernels answer EINVAL and we touch pages instead
#endif

namespace ckpt {

namespace {
uint64_t round_up_to_page(uint64_t n) {
  return (n + MappedFile::page_size() - 1) / MappedFile::page_size() * MappedFile::page_size();
}
}  // namespace

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
  return std::shared_ptr<const MappedFile>(new MappedFile(data, size, round_up_to_page(size)));
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
  std::shared_ptr<const MappedFile> stitched(
      new MappedFile(static_cast<const uint8_t*>(base), total, reserved));
  uint64_t at = 0;
  for (const FileRange& r : ranges) {
    void* want = static_cast<uint8_t*>(base) + at;
    void* p = ::mmap(want, static_cast<size_t>(r.length), PROT_READ, MAP_PRIVATE | MAP_FIXED, r.source->fd(),
                     static_cast<off_t>(r.offset));
    if (p == MAP_FAILED || p != want) {
      return Status::io_error(r.source->name() + " @" + std::to_string(r.offset) + ": cannot map " +
                              std::to_string(r.length) + " bytes: " + std::strerror(errno));
    }
    at += r.length;
  }
  return stitched;
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
  if (data_) ::munmap(const_cast<uint8_t*>(data_), static_cast<size_t>(mapped_bytes_));
}

}  // namespace ckpt
