// One tensor file: what its first bytes say it is (formats/tensor_file_open.h), never its name.
// The kinds: torch_save, torchscript, keras, torch_save_legacy, pickle, numpy, hdf5,
// ckptcheck_shard, safetensors.
#include "base/file_io.h"
#include "formats/keras_archive.h"
#include "formats/pytorch_file.h"
#include "formats/tensor_file_open.h"
#include "layouts/layout_registry.h"

namespace ckpt {

namespace {

// The kind verify reports for a sniffed format and the loader that reads it; kind "" for a file no
// reader recognises (verify reports it unreadable, inspect says what it is instead).
struct SniffedKind {
  const char* kind = "";
  const char* loader = "";
};

SniffedKind sniffed_kind_of(const std::string& path) {
  const Result<TensorFileFormat> format = sniff_tensor_file_format(path);
  switch (format.is_ok() ? *format : TensorFileFormat::kUnknown) {
    case TensorFileFormat::kPytorchZip:
      // A zip is torch.save's unless its members say TorchScript (code/, constants.pkl) or Keras 3
      // (config.json with model.weights.*): the loader that opens it is what the members say.
      if (is_torchscript_file(path)) return {"torchscript", "torch.jit.load"};
      if (is_keras_file(path)) return {"keras", "keras.saving.load_model"};
      return {"torch_save", "torch.load"};
    case TensorFileFormat::kPytorchLegacy: return {"torch_save_legacy", "torch.load"};
    case TensorFileFormat::kPickle: return {"pickle", "pickle.load"};
    case TensorFileFormat::kNumpy: return {"numpy", "numpy.load"};
    case TensorFileFormat::kHdf5: return {"hdf5", "h5py"};
    case TensorFileFormat::kNative: return {"ckptcheck_shard", "ckptcheck native shard"};
    case TensorFileFormat::kSafetensors: return {"safetensors", "safetensors"};
    case TensorFileFormat::kTar:           // refused when opened (formats/torch_load_dispatch.h)
    case TensorFileFormat::kPickleStream:  // resolved by the path overload; never returned by it
    case TensorFileFormat::kUnknown: break;
  }
  return {};
}

class SingleFileLayout final : public Layout {
 public:
  const char* name() const override { return "single_file"; }
  const char* evidence_rule() const override {
    return "a regular file whose first bytes are a tensor file's (zip, pickle, HDF5, .npy, CKPTSHD, "
           "safetensors' header): the format, and for a zip its members (TorchScript, Keras 3, "
           "torch.save); never the name. Text (an index, `latest`) is no tensor file";
  }
  const char* resume_rule() const override {
    return "the loader reads the one file; a weights file resumes nothing else (--weights-only)";
  }
  const char* seal_ranges() const override {
    return "FILE.ckptcheck.seal.json beside it: the whole file, its pieces, and each tensor's payload "
           "where the format stores it as a plain range (a .keras archive's stored members too); a "
           "deflated member's compressed bytes as one range";
  }

  std::optional<LayoutMatch> detect(const std::string& path) const override {
    if (!is_regular_file(path)) return std::nullopt;
    const SniffedKind sniffed = sniffed_kind_of(path);
    if (*sniffed.kind == '\0') return std::nullopt;
    LayoutMatch m = claim(sniffed.kind, std::string("first bytes: ") + sniffed.kind, path);
    m.files.push_back({base_name(path), FileRole::kModel, true, -1, sniffed.loader});
    return m;
  }
};

}  // namespace

const Layout& single_file_layout() {
  static const SingleFileLayout layout;
  return layout;
}

}  // namespace ckpt
