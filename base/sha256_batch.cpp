#include "base/sha256_batch.h"

#include <algorithm>
#include <stdexcept>

namespace ckpt {

Sha256Batch::~Sha256Batch() {
  for (const Lane& lane : lanes_) {
    lane.hasher->queued_in_ = nullptr;
    lane.hasher->lost_queued_bytes_ = true;
  }
}

void Sha256Batch::add(Sha256& hasher, const void* data, size_t size) {
  if (size == 0) return;
  if (hasher.queued_in_ != nullptr && hasher.queued_in_ != this) {
    // Whichever batch ran first would hash its pieces first, whatever the order of the adds; the
    // caller must run the other batch before queueing the hasher here.
    throw std::logic_error(
        "Sha256Batch::add: the hasher has pieces queued in another batch that has not run");
  }
  if (hasher.lost_queued_bytes_) {
    throw std::logic_error(
        "Sha256Batch::add: the hasher lost queued pieces (their batch was destroyed unrun)");
  }
  const uint32_t piece = static_cast<uint32_t>(pieces_.size());
  if (hasher.queued_in_ == this) {
    // Not run yet: the lane's last piece is still queued. The lane is this hasher's by construction
    // (run() and the destructor release every hasher they held).
    Lane& lane = lanes_[hasher.batch_lane_];
    pieces_.push_back({static_cast<const uint8_t*>(data), size, kNoPiece});
    pieces_[lane.last].next = piece;
    lane.last = piece;
    return;
  }
  pieces_.push_back({static_cast<const uint8_t*>(data), size, kNoPiece});
  lanes_.push_back({&hasher, piece, piece, 0});
  hasher.queued_in_ = this;
  hasher.batch_lane_ = static_cast<uint32_t>(lanes_.size() - 1);
}

Sha256Batch::Piece Sha256Batch::rest(const Lane& lane) const {
  const Piece& p = pieces_[lane.current];
  return {p.data + lane.done, p.size - lane.done, p.next};
}

void Sha256Batch::consume(Lane& lane, size_t n) {
  lane.done += n;
  if (lane.done == pieces_[lane.current].size) {
    lane.current = pieces_[lane.current].next;
    lane.done = 0;
  }
}

void Sha256Batch::run() {
  // Released first: the hashing below goes through their public update, which refuses a hasher
  // that a batch still owes bytes.
  for (const Lane& lane : lanes_) lane.hasher->queued_in_ = nullptr;
  // Pairs the two lowest lanes with bytes left, for as many bytes as both have in their current
  // pieces. Lanes only ever run dry, so both indices only move forward: linear in lanes and pieces
  // however many small payloads a block holds. A lane left alone at the end is hashed by itself.
  auto live_from = [&](size_t i) {
    while (i < lanes_.size() && lanes_[i].current == kNoPiece) ++i;
    return i;
  };
  size_t first = live_from(0);
  size_t second = live_from(first + 1);
  while (second < lanes_.size()) {
    Lane& a = lanes_[first];
    Lane& b = lanes_[second];
    const Piece pa = rest(a);
    const Piece pb = rest(b);
    const size_t n = std::min(pa.size, pb.size);
    sha256_update_two(*a.hasher, pa.data, n, *b.hasher, pb.data, n);
    consume(a, n);
    consume(b, n);
    if (a.current == kNoPiece) {
      first = b.current == kNoPiece ? live_from(second + 1) : second;
      second = live_from(first + 1);
    } else if (b.current == kNoPiece) {
      second = live_from(second + 1);
    }
  }
  if (first < lanes_.size()) {
    Lane& lane = lanes_[first];
    while (lane.current != kNoPiece) {
      const Piece piece = rest(lane);
      lane.hasher->update(piece.data, piece.size);
      consume(lane, piece.size);
    }
  }
  lanes_.clear();
  pieces_.clear();
}

}  // namespace ckpt
