// Hashing several streams on one core, two at a time.
//
// A caller that feeds more than one hasher per block (verify's scan of two units; a payload's hash
// beside the whole file's) queues the pieces with add() and calls run(): each hasher still gets its
// pieces in the order they were added, and the blocks of two different hashers are compressed
// together (sha256_update_two), so the CPU's SHA units overlap the two streams' latencies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "base/sha256.h"
#include "base/status.h"

namespace ckpt {

class Sha256Batch {
 public:
  // Queues `size` bytes at `data` for `hasher`; both must stay valid until run().
  void add(Sha256& hasher, const void* data, size_t size);
  // Hashes every queued piece, then forgets them.
  void run();

 private:
  struct Piece {
    const uint8_t* data;
    size_t size;
  };
  // One hasher's queued pieces, in order, and how far run() got through them.
  struct Lane {
    Sha256* hasher;
    std::vector<Piece> pieces;
    size_t next = 0;  // the piece being hashed
    size_t done = 0;  // bytes of it already hashed
    bool empty() const { return next == pieces.size(); }
    Piece rest() const { return {pieces[next].data + done, pieces[next].size - done}; }
    void consume(size_t n);
  };
  std::vector<Lane> lanes_;
};

// Runs hashing streams on the calling thread two at a time: each round, each live stream reads one
// block and queues its hashing in one batch, the batch runs (the two streams' blocks side by
// side), then each stream settles. `next` hands out the next stream, opened (nullptr: none left).
// A Stream has:
//   Status read(Sha256Batch&)  the next block, queued; an error ends the stream
//   bool at_end() const        every block was read
//   void settle()              after the batch ran: digests of whatever ended in the block
//   Status finish()            once at_end and settled: the stream's own final checks
//   void conclude(Status)      its outcome: a read error, or what finish() returned
template <typename Stream>
void run_two_streams_at_a_time(const std::function<std::unique_ptr<Stream>()>& next) {
  struct Slot {
    std::unique_ptr<Stream> stream;
    Status failed = Status::ok();
  };
  Slot slots[2];
  bool more = true;
  Sha256Batch batch;
  for (;;) {
    for (Slot& slot : slots) {
      if (more && !slot.stream) more = (slot.stream = next()) != nullptr;
    }
    if (!slots[0].stream && !slots[1].stream) return;
    for (Slot& slot : slots) {
      if (slot.stream && !slot.stream->at_end()) slot.failed = slot.stream->read(batch);
    }
    batch.run();  // before any stream ends: the batch points into their buffers and hashers
    for (Slot& slot : slots) {
      if (!slot.stream) continue;
      if (!slot.failed.is_ok()) {
        slot.stream->conclude(std::move(slot.failed));
      } else {
        slot.stream->settle();
        if (!slot.stream->at_end()) continue;
        slot.stream->conclude(slot.stream->finish());
      }
      slot.stream.reset();
      slot.failed = Status::ok();
    }
  }
}

}  // namespace ckpt
