#!/usr/bin/python3
"""Inputs and the Python baseline of the `metadata` rows of ckptcheck_bench (bench/metadata_bench.cpp).

Run with Debian's interpreter (python3-torch 1.13):

  torch-save PATH PARAMS ROWS COLS   a torch.save file of PARAMS parameters [ROWS, COLS] F32, each with
                                      its two AdamW moments (3 x PARAMS tensors split into chunks) and
                                      step, and the rest of a training state: an FSDP state dict's shape
                                      before it is split across ranks
  dcp-metadata PATH TENSORS CHUNKS    a DCP `.metadata` pickle of TENSORS tensors [CHUNKS * 4, 64] F32,
                                      each split by rows into CHUNKS chunks, one per rank, laid out as
                                      PyTorch 2.4+ writes it (torch.distributed.checkpoint.metadata
                                      classes, planner_data, storage_data of _StorageInfo, storage_meta,
                                      version)
  dcp-directory DIR TENSORS           a DCP checkpoint of TENSORS [8, 8] F32 tensors written by torch 1.13's
                                      own FileSystemWriter, which writes one data file per item (as 2.x does
                                      with single_file_per_rank=False): more files than `ulimit -n`
  pickle-load PATH REPETITIONS        CPython's pickle.load of PATH, REPETITIONS times in this process;
                                      prints {"seconds": [...], "max_rss_bytes": N} (ru_maxrss after)

Torch 1.13 has no torch.distributed.checkpoint, so the 2.x classes are the stand-ins of
scripts/make_pytorch_fixtures.py, registered under the real module and class names: the pickle is
byte for byte what 2.x's FileSystemWriter.finish writes (pickle.dump(metadata, file)) for that state,
and pickle.load finds them where 2.x would.
"""
import gc
import importlib.util
import json
import os
import pickle
import resource
import sys
import time

import torch


def fixture_classes():
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("make_pytorch_fixtures",
                                                  os.path.join(here, "..", "scripts", "make_pytorch_fixtures.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dcp_24_classes()


def write_torch_save(path, params, rows, cols):
    """The whole training state a native checkpoint must hold to pass verify (README, "What verify
    checks"): each parameter with its AdamW moments and step, the scheduler, progress, loss scaler,
    data position and RNG. A state verify refuses would time the printing of its errors instead."""
    torch.manual_seed(44)
    model, optimizer = {}, {}
    for i in range(params):
        name = f"layers.{i // 3}.p{i % 3}.weight"
        model[name] = torch.randn(rows, cols) * 0.02
        optimizer["model." + name] = {"exp_avg": torch.randn(rows, cols) * 1e-4,
                                      "exp_avg_sq": torch.rand(rows, cols) * 1e-6,
                                      "step": torch.tensor(0.0)}
    scalar = torch.tensor
    state = {
        "model": model,
        "optimizer": optimizer,
        "scheduler": {"last_step": scalar(0), "base_lr": scalar(3e-4), "last_lr": scalar(3e-4)},
        "progress": {"global_step": scalar(0), "skipped_steps": scalar(0)},
        "scaler": {"scale": scalar(65536.0), "growth_factor": scalar(2.0), "backoff_factor": scalar(0.5),
                   "growth_interval": scalar(2000), "growth_tracker": scalar(0)},
        "data": {"epoch": scalar(0), "cursor": scalar(0), "shuffle_seed": scalar(44)},
        "rng": {"cpu_state": torch.get_rng_state()},
    }
    torch.save(state, path)


def write_dcp_metadata(path, tensors, chunks):
    c = fixture_classes()
    rows, cols = 4, 64
    length = rows * cols * 4 + 1024  # a chunk's torch.save archive: its bytes and the zip around them
    state_dict_metadata, storage_data, planner_data = {}, {}, {}
    file_offsets = [0] * chunks
    for t in range(tensors):
        fqn = f"model.layers.{t // 4}.mlp.w{t % 4}"
        metas = []
        for k in range(chunks):
            offsets, sizes = torch.Size([k * rows, 0]), torch.Size([rows, cols])
            metas.append(c.ChunkStorageMetadata(offsets, sizes))
            storage_data[c.MetadataIndex(fqn, offsets, k)] = c._StorageInfo(f"__{k}_0.distcp", file_offsets[k],
                                                                           length)
            file_offsets[k] += length
        state_dict_metadata[fqn] = c.TensorStorageMetadata(c.TensorProperties(dtype=torch.float32),
                                                           torch.Size([chunks * rows, cols]), metas)
        planner_data[fqn] = tuple(fqn.split("."))
    metadata = c.Metadata(state_dict_metadata=state_dict_metadata, planner_data=planner_data,
                          storage_data=storage_data,
                          storage_meta=c.StorageMeta(checkpoint_id=None, save_id="bench", load_id=None),
                          version="1.0.0")
    with open(path, "wb") as f:
        pickle.dump(metadata, f)


def write_dcp_directory(path, tensors):
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("make_pytorch_fixtures",
                                                  os.path.join(here, "..", "scripts", "make_pytorch_fixtures.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    writer, save_state_dict = module.import_dcp_113()
    torch.manual_seed(44)
    state = {f"model.layer{i}.weight": torch.randn(8, 8) for i in range(tensors)}
    save_state_dict(state, writer(path), no_dist=True)


def pickle_load(path, repetitions):
    c = fixture_classes()  # where 2.x's classes live, so pickle.load finds them as torch 2.x would

    def set_properties_state(self, state):  # TensorProperties.__setstate__ as 2.x defines it
        (self.dtype, self.layout, self.requires_grad, memory_format, self.pin_memory) = state
        self.memory_format = torch.contiguous_format if memory_format.value == 0 else memory_format

    c.TensorProperties.__setstate__ = set_properties_state
    seconds = []
    for _ in range(repetitions):
        gc.collect()
        start = time.perf_counter()
        with open(path, "rb") as f:
            value = pickle.load(f)
        seconds.append(time.perf_counter() - start)
        del value
    print(json.dumps({"seconds": seconds, "max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))


def main():
    cmd = sys.argv[1]
    if cmd == "torch-save":
        write_torch_save(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    elif cmd == "dcp-metadata":
        write_dcp_metadata(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif cmd == "dcp-directory":
        write_dcp_directory(sys.argv[2], int(sys.argv[3]))
    elif cmd == "pickle-load":
        pickle_load(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
