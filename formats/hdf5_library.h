// What the HDF5 reader (hdf5_file.cpp) and writer (hdf5_writer.cpp) share: the one lock around
// libhdf5, handles that close themselves, and how a chunk is named and typed in the file. Only
// the hdf5_*.cpp files include this header (it pulls in <hdf5.h>).
#pragma once

#include <hdf5.h>

#include <mutex>
#include <string>

#include "base/status.h"
#include "formats/hdf5_loader.h"
#include "formats/tensor_file.h"

namespace ckpt::hdf5 {

// Held by every libhdf5 call in this process (the writer's layout phase) and across the reader's
// fork(): the library has a global lock, and a child forked while another thread holds it would
// wait forever.
std::mutex& library_mutex();

// HDF5 prints a stack trace to stderr on every failed call unless told not to; we report failures
// as Status values instead.
void silence_errors();

// Owns one hid_t and closes it with the right H5*close.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle(hid_t id, Closer close) : id_(id), close_(close) {}
  Handle(Handle&& other) noexcept : id_(other.id_), close_(other.close_) { other.id_ = -1; }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  hid_t get() const { return id_; }
  // Hands the id to the caller, who closes it (and checks that close).
  hid_t release() {
    const hid_t id = id_;
    id_ = -1;
    return id;
  }
  bool valid() const { return id_ >= 0; }

 private:
  hid_t id_;
  Closer close_;
};

// The on-disk HDF5 type for a dtype (caller closes it); -1 for a dtype HDF5 cannot hold (FP8).
hid_t file_type(DType dtype);

// A chunk's dataset name inside its tensor's group: "0:128,0:64", or "all" for a whole tensor.
std::string chunk_dataset_name(const ChunkInfo& c);

Status library_failure(const std::string& path, const std::string& what);

}  // namespace ckpt::hdf5
