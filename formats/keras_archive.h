// Keras 3's `.keras` archive (keras/src/saving/saving_lib.py), read without Keras:
//   config.json        the model's architecture: keras.saving.load_model rebuilds every object from
//                      it; a Lambda / __lambda__ layer or a `module` outside Keras names code
//                      (formats/keras_config.h finds it, nothing is imported or run)
//   metadata.json      {"keras_version", "date_saved"}
//   model.weights.h5   the variables, an HDF5 file: layers/<name>/vars/<i>, optimizer/vars/<i>
//   model.weights.npz  or (save_model(..., weights_format="npz"), NpzIOStore) numpy.savez's zip of
//                      `<path>.npy` arrays, which Keras 3.9+ reads with np.load(allow_pickle=False)
// A zip is taken for a Keras archive when it holds config.json and model.weights.h5 or .npz at its top
// and no torch.save data.pkl; with both, Keras (and so this reader) takes the .h5. The .h5 is read by
// the HDF5 reader from a private copy of the member (our HDF5 reader opens paths; the copy is
// streamed and its name removed at once). Each .npy of the .npz is read by formats/numpy_file.h in
// place (inflated into a private copy when deflated): a numeric array is one tensor named `<path>`; an
// object array (a pickle, which Keras 3.0-3.8 loaded with allow_pickle=True) is listed under
// metadata "keras_code", naming the member, and its pickle is never run. Keras writes every member
// stored; a zip tool may deflate them, and Keras's zipfile reads them, so deflated members are
// inflated (bounded by the directory's sizes, and refused as Keras refuses them when they declare
// more than 4 GiB and 100x their stored bytes). Two members of one name are refused by the zip
// reader (formats/zip_archive.h), so the config checked is the one Keras reads.
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
