#include "base/sha256_batch.h"

#include <algorithm>

namespace ckpt {

void Sha256Batch::add(Sha256& hasher, const void* data, size_t size) {
  if (size == 0) return;
  const Piece piece{static_cast<const uint8_t*>(data), size};
  for (Lane& lane : lanes_) {
    if (lane.hasher == &hasher) {
      lane.pieces.push_back(piece);
      return;
    }
  }
  lanes_.push_back(Lane{&hasher, {piece}});
}

void Sha256Batch::Lane::consume(size_t n) {
  done += n;
  if (done == pieces[next].size) {
    ++next;
    done = 0;
  }
}

void Sha256Batch::run() {
  // Pairs the first two lanes with bytes left, for as many bytes as both have in their current
  // pieces; a lane left alone at the end is hashed by itself.
  for (;;) {
    Lane* first = nullptr;
    Lane* second = nullptr;
    for (Lane& lane : lanes_) {
      if (lane.empty()) continue;
      if (!first) {
        first = &lane;
      } else {
        second = &lane;
        break;
      }
    }
    if (!first) break;
    if (!second) {
      for (; !first->empty(); first->consume(first->rest().size))
        first->hasher->update(first->rest().data, first->rest().size);
      break;
    }
    const Piece a = first->rest();
    const Piece b = second->rest();
    const size_t n = std::min(a.size, b.size);
    sha256_update_two(*first->hasher, a.data, n, *second->hasher, b.data, n);
    first->consume(n);
    second->consume(n);
  }
  lanes_.clear();
}

}  // namespace ckpt
