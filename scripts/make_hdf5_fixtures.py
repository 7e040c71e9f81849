#!/usr/bin/python3
"""Writes tests/data/hdf5/keras_like.weights.h5 and expected.json for tests/formats/hdf5_generic_test.cpp.

Run with Debian's interpreter (python3-h5py, python3-numpy):  /usr/bin/python3 scripts/make_hdf5_fixtures.py

An HDF5 file ckptcheck did not write, shaped like a Keras 3 `.weights.h5` (groups `layers/<name>/vars/<i>`
of float datasets, `optimizer/vars/<i>`), plus datasets in every storage form a reader meets: contiguous,
chunked and unfiltered (edge chunk clipped in dim 0: readable; clipped in dim 1: not a plain byte range),
gzip-compressed, big-endian, strings, sparse (chunks never written) and never-written contiguous storage.
expected.json holds, for each readable dataset, its dtype, shape and the SHA-256 of its row-major
little-endian bytes (computed by numpy), and for each other one a word its refusal must contain.
Deterministic: no timestamps (track_times=False), fixed values.

Also Keras 2 full-model `.h5` files (what `model.save("m.h5")` writes; no Keras needed), for verify's
Keras-code gate: `model_config` and `training_config` are JSON byte-string attributes at the file
root, the weights live under `model_weights/<layer>/<layer>/<var>:0`:
  keras_lambda.h5  a Sequential model whose Lambda layer `scale_by_two` carries its function as Keras 2's
                   func_dump writes it: "function": [base64 of marshal.dumps(code), null, null],
                   "function_type": "lambda". keras.models.load_model unmarshals and runs it.
  keras_clean.h5   the same model without the Lambda layer: plain Dense layers only.
"""
import base64
import hashlib
import json
import marshal
import os

import h5py
import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "hdf5")
DTYPE = {np.float32: "F32", np.float64: "F64", np.float16: "F16", np.int64: "I64", np.int32: "I32",
         np.uint16: "U16", np.uint8: "U8"}


def main():
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "keras_like.weights.h5")
    if os.path.exists(path):
        os.remove(path)
    rng = np.random.default_rng(7)
    readable = {
        "layers/dense/vars/0": rng.standard_normal((4, 3)).astype(np.float32),
        "layers/dense/vars/1": rng.standard_normal(3).astype(np.float32),
        "layers/embedding/vars/0": rng.standard_normal((5, 2)).astype(np.float16),
        "layers/normalization/vars/2": np.array(12, dtype=np.int64),
        "optimizer/vars/0": np.array(300, dtype=np.int64),
        "optimizer/vars/1": np.array([[1, 2], [3, 65535]], dtype=np.uint16),
        "extra/with_nan": np.array([1.0, np.nan, np.inf, -2.0], dtype=np.float64),
    }
    chunked_rows = np.arange(40, dtype=np.float32).reshape(10, 4) / 8  # chunks (4, 4): 3 chunks, last clipped in dim 0
    unsupported = {
        "/extra/chunked_cols": "clipped in dimension 1",
        "/extra/gzip": "gzip",
        "/extra/big_endian": "big-endian",
        "/extra/names": "string",
        "/extra/sparse": "sparse",
        "/extra/never_written": "no storage allocated",
    }
    with h5py.File(path, "w", track_order=False) as f:
        f.attrs["keras_version"] = "3.3.3"
        f.attrs["date_saved"] = "2024-05-01@00:00:00"
        for name, value in readable.items():
            f.create_dataset(name, data=value, track_times=False)
        f.create_dataset("extra/chunked_rows", data=chunked_rows, chunks=(4, 4), track_times=False)
        f.create_dataset("extra/chunked_cols", data=np.ones((3, 6), np.float32), chunks=(3, 4), track_times=False)
        f.create_dataset("extra/gzip", data=np.arange(8, dtype=np.float32), compression="gzip", track_times=False)
        f.create_dataset("extra/big_endian", data=np.arange(3, dtype=">f4"), track_times=False)
        f.create_dataset("extra/names", data=np.array([b"dense", b"embedding"]), track_times=False)
        sparse = f.create_dataset("extra/sparse", shape=(8,), dtype=np.float32, chunks=(2,), track_times=False)
        sparse[0:2] = [1.0, 2.0]
        f.create_dataset("extra/never_written", shape=(4,), dtype=np.float32, track_times=False)
    readable["extra/chunked_rows"] = chunked_rows
    expected = {
        "tensors": {name: {"dtype": DTYPE[v.dtype.type], "shape": list(v.shape),
                           "sha256": hashlib.sha256(np.ascontiguousarray(v).astype(v.dtype.newbyteorder("<")).tobytes()).hexdigest()}
                    for name, v in sorted(readable.items())},
        "unsupported": unsupported,
        "chunked_rows_chunks": [[0, 0], [4, 0], [8, 0]],
    }
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)


def keras_layer(class_name, **config):
    return {"class_name": class_name, "config": config}


def write_keras_model(path, with_lambda):
    rng = np.random.default_rng(11)
    layers = [keras_layer("InputLayer", batch_input_shape=[None, 3], dtype="float32", sparse=False,
                          ragged=False, name="input_1"),
              keras_layer("Dense", name="dense", trainable=True, dtype="float32", units=2, activation="linear",
                          use_bias=True)]
    if with_lambda:
        # Keras 2's generic_utils.func_dump: the code object marshalled, base64 with newlines.
        code = base64.encodebytes(marshal.dumps((lambda x: x * 2).__code__)).decode("ascii")
        layers.append(keras_layer("Lambda", name="scale_by_two", trainable=True, dtype="float32",
                                  function=[code, None, None], function_type="lambda", module="__main__",
                                  output_shape=None, output_shape_type="raw", output_shape_module=None,
                                  arguments={}))
    model_config = {"class_name": "Sequential", "config": {"name": "sequential", "layers": layers}}
    training_config = {"loss": "mse", "metrics": None, "weighted_metrics": None, "loss_weights": None,
                       "optimizer_config": {"class_name": "Adam", "config": {"name": "Adam", "learning_rate": 0.001}}}
    if os.path.exists(path):
        os.remove(path)
    with h5py.File(path, "w", track_order=False) as f:
        # Keras 2 (saving/legacy/hdf5_format.py): dicts are json.dumps(...).encode("utf8"), which h5py
        # stores as fixed-length byte strings; the versions are plain str (variable-length).
        f.attrs["backend"] = "tensorflow"
        f.attrs["keras_version"] = "2.12.0"
        f.attrs["model_config"] = json.dumps(model_config).encode("utf8")
        f.attrs["training_config"] = json.dumps(training_config).encode("utf8")
        weights = f.create_group("model_weights")
        names = ["dense"] + (["scale_by_two"] if with_lambda else [])
        weights.attrs["layer_names"] = [n.encode("utf8") for n in names]
        dense = weights.create_group("dense")
        dense.attrs["weight_names"] = [b"dense/kernel:0", b"dense/bias:0"]
        dense.create_dataset("dense/kernel:0", data=rng.standard_normal((3, 2)).astype(np.float32), track_times=False)
        dense.create_dataset("dense/bias:0", data=np.zeros(2, np.float32), track_times=False)
        if with_lambda:
            weights.create_group("scale_by_two").attrs["weight_names"] = np.array([], dtype="S1")


if __name__ == "__main__":
    main()
    gate = os.path.join(OUT, "..", "gate")
    write_keras_model(os.path.join(gate, "keras_lambda.h5"), with_lambda=True)
    write_keras_model(os.path.join(gate, "keras_clean.h5"), with_lambda=False)
