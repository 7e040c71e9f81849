#include "verifier/tensors/digest_identity.h"

namespace ckpt {

bool identical_by_digests(const DigestedSource& a, const SourceTensor& ta, const DigestedSource& b,
                          const SourceTensor& tb) {
  if (ta.dtype != tb.dtype || ta.shape != tb.shape || ta.chunks.size() != tb.chunks.size()) return false;
  uint64_t covered = 0;
  for (size_t i = 0; i < ta.chunks.size(); ++i) {
    const SourceChunk& ca = ta.chunks[i];
    const SourceChunk& cb = tb.chunks[i];
    if (!a.digests[ca.file] || !b.digests[cb.file]) return false;
    const ChunkPlace ia = a.source.place(ca);
    const ChunkPlace ib = b.source.place(cb);
    if (ia.offsets != ib.offsets || ia.shape != ib.shape) return false;
    const Sha256Digest& digest = (*a.digests[ca.file])[ca.index];
    if (digest != (*b.digests[cb.file])[cb.index]) return false;
    if (!a.checked && !a.source.chunk_matches(ta, i, digest)) return false;
    if (!b.checked && !b.source.chunk_matches(tb, i, digest)) return false;
    covered += ia.data_bytes;
  }
  return covered == ta.bytes;
}

}  // namespace ckpt
