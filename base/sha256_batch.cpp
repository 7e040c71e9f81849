#include "base/sha256_batch.h"

#include <algorithm>

namespace ckpt {

void Sha256Batch::add(Sha256& hasher, const void* data, size_t size) {
  if (size == 0) return;
  const uint32_t piece = static_cast<uint32_t>(pieces_.size());
  pieces_.push_back({static_cast<const uint8_t*>(data), size, kNoPiece});
  // The hasher remembers its lane in this round; a stale index (an earlier round, another batch)
  // names a lane of another hasher or none.
  const uint32_t known = hasher.batch_lane_;
  if (known < lanes_.size() && lanes_[known].hasher == &hasher) {
    Lane& lane = lanes_[known];  // not run yet: its last piece is still queued
    pieces_[lane.last].next = piece;
    lane.last = piece;
    return;
  }
  hasher.batch_lane_ = static_cast<uint32_t>(lanes_.size());
  lanes_.push_back({&hasher, piece, piece, 0});
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
