// Keras 3's `.keras` archive (keras/src/saving/saving_lib.py), read without Keras:
//   config.json        the model's architecture: keras.saving.load_model rebuilds every object from
//                      it; a Lambda / __lambda__ layer or a `module` outside Keras names code
//                      (formats/keras_config.h finds it, nothing is imported or run)
//   metadata.json      {"keras_version", "date_saved"}
//   model.weights.h5   the variables, an HDF5 file: layers/<name>/vars/<i>, optimizer/vars/<i>
// A zip is taken for a Keras archive when it holds config.json and model.weights.h5 at its top and no
// torch.save data.pkl. The weights file is read by the HDF5 reader from a private copy of the member
// (our HDF5 reader opens paths; the copy is streamed and removed with the file object). Members must be
// stored, as Keras writes them; two members of one name are refused by the zip reader
// (formats/zip_archive.h), so the config checked is the one Keras reads. `model.weights.npz` (a numpy
// archive of weights) is not read here.
#pragma once

#include <memory>

#include "base/byte_source.h"
#include "formats/tensor_file.h"
#include "formats/zip_archive.h"

namespace ckpt {

bool is_keras_archive(const ZipArchive& zip);
// The same for a file on disk: false for anything that is no readable zip.
bool is_keras_file(const std::string& path);

Result<std::unique_ptr<TensorFile>> open_keras_archive(std::unique_ptr<ByteSource> source, ZipArchive zip);

}  // namespace ckpt
