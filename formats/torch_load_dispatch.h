// How torch.load decides what a file is, written down once: kind detection (verifier/check/
// checkpoint_kind.h), open_tensor_file and the pickle gate all follow it, so that what we read is
// what torch.load would run. torch/serialization.py, 1.13 and 2.x alike, on a file opened by path:
//   1. the first four bytes are "PK\3\4"       -> the zip reader (miniz, PyTorchFileReader); a zip
//      holding <archive>/constants.pkl           -> torch.jit.load (TorchScript: compiles and runs
//                                                   its code/, even with weights_only=True before 2.6)
//   2. tarfile.open(f, 'r:') succeeds          -> the pre-0.4 tar format (pickles inside members)
//   3. otherwise pickle.load, pickle after pickle: the first must be the legacy magic number, but
//      it is *run* before it is compared, so a plain pickle's code runs before torch.load raises.
// A file both a tar and a pickle stream is read by torch as a tar; we read no tar, so any file
// tarfile opens is refused (kAmbiguous). numpy.load(allow_pickle=True) runs an object array's pickle
// (formats/numpy_file.h); Keras and safetensors have loaders of their own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/byte_source.h"
#include "base/status.h"

namespace ckpt {

// Python's tarfile.open(mode='r:') on a file whose first block is `head` (n bytes, at least 512 to
// be a tar): the header checksum as TarInfo.frombuf computes it (unsigned or signed sum, the field
// parsed as nti does). A block of zeros counts too (tarfile opens it as an empty archive).
bool tarfile_would_open(const uint8_t* head, size_t n);

// Whether `op` is an opcode CPython's unpickler knows (protocols 0-5): a file starting with one is
// read by torch.load's pickle.load.
bool is_pickle_opcode(uint8_t op);

// Whether a zip member name makes torch.load dispatch to torch.jit.load: its name, after the archive
// folder, is constants.pkl (torch's _is_torchscript_zip), compared ignoring case as miniz looks
// names up; a code/ folder marks torch.jit.save's archives too.
bool is_torchscript_member(const std::string& name);

// What pickle.load reads from the start of a file that is no zip and no tar.
enum class PickleStreamRoute {
  kLegacy,  // the first pickle is the legacy magic number: a torch.save stream (pre-1.6 format)
  kPlain,   // a pickle that is no magic number: torch.load and pickle.load run it
  kNone,    // CPython rejects the first pickle before it names any global: nothing would run
};
// Reads the first pickle of `source` (up to kPickleStreamProbeBytes). A pickle that fails after it
// named a global is kPlain: what it named was imported, and maybe called, before the error.
PickleStreamRoute pickle_stream_route(const ByteSource& source);
// The same reading, with whether the first pickle names a global (before it ends or fails): what
// makes a file with a magic of its own a pickle a loader would run too.
struct PickleStreamProbe {
  PickleStreamRoute route = PickleStreamRoute::kNone;
  bool names_globals = false;
};
PickleStreamProbe probe_pickle_stream(const ByteSource& source);
constexpr uint64_t kPickleStreamProbeBytes = 256ull << 20;

}  // namespace ckpt
