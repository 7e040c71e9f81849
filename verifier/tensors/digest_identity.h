// Two tensors known bit-identical by their chunks' digests alone, neither read again: what `diff`
// and the drill's comparison decide most tensors by (a drill of two 20,000-tensor states held and
// compared both whole; issue 44).
#pragma once

#include "verifier/tensors/tensor_source.h"

namespace ckpt {

// A source and its chunks' digests: TensorSource::scan_chunk_digests (each file nullopt where it was
// not scanned; nothing checked against the records yet) or TensorSource::check_tensors (every
// tensor's chunks hashed and found as recorded: `checked`).
struct DigestedSource {
  const TensorSource& source;
  const ScannedChunkDigests& digests;
  bool checked = false;
};

// True when `ta` of `a` and `tb` of `b` are bit-identical: one dtype and shape, every chunk digested
// on both sides, each lying where its counterpart lies with its counterpart's SHA-256 and matching
// every hash recorded for it (read_tensor's check, made here unless `checked`), and the chunks hold
// the whole tensor (read_tensor's other check). False says only that they must be read to know.
bool identical_by_digests(const DigestedSource& a, const SourceTensor& ta, const DigestedSource& b,
                          const SourceTensor& tb);

}  // namespace ckpt
