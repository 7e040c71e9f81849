#!/usr/bin/python3
"""Writes the PyTorch fixtures for tests/pytorch_file_test.cpp into tests/data/pytorch/.

Run with Debian's interpreter, which has python3-torch 1.13:  /usr/bin/python3 scripts/make_pytorch_fixtures.py
The malicious files are only *pickled* here (__reduce__ is consulted when saving, never called);
nothing in them runs unless someone unpickles them with the real pickle module.

Also written: a legacy (non-zip) torch.save file, tensors with non-contiguous strides, a
Lightning-shaped checkpoint (argparse.Namespace, numpy arrays and scalars, a torch.nn.functional
function) and a Hugging Face Trainer-shaped training_args.bin (a TrainingArguments dataclass, no
tensors), whose classes are stand-ins registered under the real module names.

And tests/data/dcp/torch113/: a Distributed Checkpoint written by 1.13's own
torch.distributed._shard.checkpoint.save_state_dict (no_dist=True), with its expected.json.

And tests/data/dcp/megatron_torch_dist/: a Megatron-Core `torch_dist` checkpoint directory
(`iter_N/` as Megatron writes it: .metadata, __<rank>_0.distcp, common.pt, metadata.json), with
megatron_torch_dist_expected.json. Debian's torch 1.13 cannot import Megatron-Core (it needs torch
2.x), and 1.13 has no torch.distributed.checkpoint, so this part is built *as the published format
describes it*, not by Megatron: the `.metadata` pickle is made of stand-in dataclasses registered
under the real module and class names (torch.distributed.checkpoint.metadata.*, 2.4+ field
layout; torch.distributed.checkpoint.filesystem._StorageInfo; and Megatron's own top-level
megatron.core.dist_checkpointing.strategies.torch.MCoreMetadata, a Metadata subclass with
`mcore_data`, as Megatron-LM defined it from late 2025); each storage item is a real torch.save
archive of the chunk (what DCP's FileSystemWriter writes per tensor item), and common.pt a real
torch.save file. `--only megatron` writes just this directory (the legacy fixture changes on every
full run).

And tests/data/dcp/safetensors_v28/ + hf_sharded_safetensors/ (safetensors_v28_expected.json): DCP's
safetensors serialization as torch 2.8.0 writes it, which torch 1.13 cannot write (it has neither
torch.distributed.checkpoint nor the safetensors package), so it is built *from the published
format* (torch/distributed/checkpoint/filesystem.py `_write_files_from_queue`/`_write_item` with
SerializationFormat.SAFETENSORS; _hf_utils.py; _hf_storage.py HuggingFaceStorageWriter):
safetensors_v28/ is FileSystemWriter(serialization_format=SAFETENSORS) for two ranks: `.metadata`
(stand-in classes, 2.4+ fields) and `__<rank>_0.distcp`, each its bytes items (torch.save archives)
followed by one safetensors blob (8-byte LE header length, JSON header padded with spaces, data)
whose __metadata__ holds DCP_SHARDING_INFO ({fqn: {"saved_offsets": [...]}} as a JSON string),
DCP_VERSION "1.0" and format "pt"; every tensor item is recorded at the blob's start with the chunk's
byte count as length, as torch records it. hf_sharded_safetensors/ is HuggingFaceStorageWriter(
save_sharded=True): the same blobs as shard-0000R-model-00001-of-00001.safetensors, no .metadata.
`--only safetensors` writes just these.

And tests/data/pytorch/resume_state/ (`--only resume_state`): training checkpoints whose resume
state sits under names of the user's choosing, for verify's recognition by structure:
renamed_keys.pt is {"model", "opt", "sched", "scaler", "rng", "step"} (AdamW, LambdaLR, a
GradScaler's state as it is on CUDA, torch and Python random states); numpy_rng.pt adds numpy's
legacy state (its array needs --allow-global for numpy); half_optimizer.pt holds an optimizer's
param_groups without its state; sched_only.pt a scheduler and a step but no optimizer.
"""
import argparse
import copy
import dataclasses
import hashlib
import io
import json
import os
import pickle
import pickletools
import random
import subprocess
import sys
import types
import zipfile

import numpy as np
import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "pytorch")
DCP_OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "dcp", "torch113")
DTYPE = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
         torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
         torch.bool: "BOOL"}


def flatten(obj, prefix=""):
    if isinstance(obj, torch.Tensor):
        yield prefix, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from flatten(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from flatten(v, f"{prefix}.{i}" if prefix else str(i))


def raw_bytes(t):
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16; its bits are an int16
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def describe(obj):
    return [{"name": n, "dtype": DTYPE[t.dtype], "shape": list(t.shape),
             "sha256": hashlib.sha256(raw_bytes(t)).hexdigest()} for n, t in flatten(obj)]


def first_refused_global(path):
    with zipfile.ZipFile(path) as z:
        pkl = z.read(next(n for n in z.namelist() if n.endswith("/data.pkl")))
    allowed = {"collections OrderedDict", "torch._utils _rebuild_tensor_v2", "torch._utils _rebuild_parameter"}
    for op, arg, _ in pickletools.genops(pkl):
        if op.name == "GLOBAL" and arg not in allowed and not arg.startswith("torch ") :
            return arg.replace(" ", ".")
    raise RuntimeError(f"{path}: no foreign global")


class RunsShell:
    def __reduce__(self):
        return (os.system, ("touch /tmp/ckptcheck_fixture_was_executed",))


class RunsEval:
    def __reduce__(self):
        return (eval, ("__import__('os').system('touch /tmp/ckptcheck_fixture_was_executed')",))


class RunsExec:
    def __reduce__(self):
        return (exec, ("import os; os.system('touch /tmp/ckptcheck_fixture_was_executed')",))


class RunsSubprocess:
    def __reduce__(self):
        return (subprocess.check_call, (["touch", "/tmp/ckptcheck_fixture_was_executed"],))


def stand_in_module(name):
    """A module registered under a real package's name, so pickle records that name."""
    parts = name.split(".")
    for i in range(1, len(parts) + 1):
        sys.modules.setdefault(".".join(parts[:i]), types.ModuleType(".".join(parts[:i])))
    return sys.modules[name]


def training_arguments_class():
    module = stand_in_module("transformers.training_args")

    @dataclasses.dataclass
    class TrainingArguments:
        output_dir: str
        learning_rate: float = 5e-5
        num_train_epochs: float = 3.0
        per_device_train_batch_size: int = 8
        seed: int = 42
        report_to: list = dataclasses.field(default_factory=list)

    TrainingArguments.__module__ = module.__name__
    TrainingArguments.__qualname__ = "TrainingArguments"
    module.TrainingArguments = TrainingArguments
    return TrainingArguments


def strided_state():
    base = torch.arange(40, dtype=torch.float32)
    return {
        "transposed": torch.arange(12, dtype=torch.float32).reshape(3, 4).t(),  # stride (1, 4)
        "fortran": torch.arange(24, dtype=torch.int32).reshape(4, 6).t().contiguous().t(),  # stride (1, 4)
        "offset_strided": base.view(4, 10)[:, 1:8:2],  # storage offset 1, stride (10, 2)
        "expanded": torch.tensor([1.5, -2.0, 3.25], dtype=torch.float64).expand(4, 3),  # stride (0, 1)
        "base": base,
    }


def lightning_state(model, opt):
    return {
        "epoch": 3,
        "global_step": 120,
        "pytorch-lightning_version": "1.9.0",
        "state_dict": {f"model.{k}": v for k, v in model.state_dict().items()},
        "optimizer_states": [opt.state_dict()],
        "lr_schedulers": [{"last_epoch": 3, "base_lrs": [1e-3]}],
        "hyper_parameters": argparse.Namespace(lr=0.001, hidden=6, name="tiny"),
        "loss_fn": torch.nn.functional.cross_entropy,
        "callbacks": {"ModelCheckpoint": {"best_model_score": np.float64(0.25), "best_k": np.int64(7),
                                          "history": np.arange(6, dtype=np.float32).reshape(2, 3),
                                          "fortran": np.asfortranarray(
                                              np.arange(6, dtype=np.int16).reshape(2, 3))}},
    }


def import_dcp_113():
    """torch.distributed._shard.checkpoint of torch 1.13, importable on Python 3.11.

    1.13's sharded_tensor/metadata.py declares `tensor_properties: TensorProperties =
    field(default=TensorProperties())`, which Python 3.11's dataclasses refuse ("mutable default ...
    use default_factory"; 3.11 treats any unhashable default as mutable). Only while importing, a
    field refused for that reason gets a default_factory returning a copy of the same default, the
    fix PyTorch itself made later. Nothing saved depends on that default: the writer pickles the
    values it is given.
    """
    original = dataclasses._get_field

    def get_field(cls, name, type_, *rest):
        try:
            return original(cls, name, type_, *rest)
        except ValueError as e:
            if "mutable default" not in str(e):
                raise
            default = cls.__dict__[name].default
            setattr(cls, name, dataclasses.field(default_factory=lambda: copy.deepcopy(default)))
            return original(cls, name, type_, *rest)

    dataclasses._get_field = get_field
    try:
        from torch.distributed._shard.checkpoint import FileSystemWriter, save_state_dict
    finally:
        dataclasses._get_field = original
    return FileSystemWriter, save_state_dict


def write_dcp_113():
    """A 1.13 DCP directory: tensors become tensor items (one torch.save archive each), anything else
    a bytes item (torch.save of the object; the optimizer dict's tensor travels inside it)."""
    FileSystemWriter, save_state_dict = import_dcp_113()
    os.makedirs(DCP_OUT, exist_ok=True)
    for name in os.listdir(DCP_OUT):  # a rerun leaves no stale item files behind
        os.remove(os.path.join(DCP_OUT, name))
    torch.manual_seed(113)
    linear = torch.nn.Linear(4, 3)
    tensors = {
        "model.weight": linear.weight.detach().clone(),  # 2-D float32
        "model.bias": linear.bias.detach().clone(),
        "model.step_counts": torch.arange(6, dtype=torch.int64).reshape(2, 3),
        "model.half_scale": torch.randn(5).half(),
    }
    bytes_items = {
        "optimizer": {"state": {0: {"exp_avg": torch.randn(3, 4), "step": 7}},
                      "param_groups": [{"lr": 0.01, "params": [0]}]},
        "epoch": 3,
        "milestones": [10, 20],
    }
    state = dict(tensors)
    state.update(bytes_items)
    save_state_dict(state, FileSystemWriter(DCP_OUT), no_dist=True)
    expected = {"layout": "torch-1.13", "tensors": describe(tensors), "bytes": sorted(bytes_items),
                "bytes_tensors": [dict(d, name=f"{fqn}.{d['name']}") for fqn, obj in bytes_items.items()
                                  for d in describe(obj)]}
    with open(os.path.join(DCP_OUT, "..", "torch113_expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)


MEGATRON_OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "dcp",
                            "megatron_torch_dist")


def dcp_24_classes():
    """Stand-ins for torch>=2.4's DCP metadata classes and Megatron-Core's MCoreMetadata, with the real
    module and class names and field order (torch/distributed/checkpoint/metadata.py, filesystem.py;
    megatron/core/dist_checkpointing/strategies/torch.py). Pickle records only those names and each
    dataclass's __dict__ (TensorProperties: its __getstate__ tuple), so the bytes are what the real
    classes pickle to. Python 3.11 rejects unhashable dataclass defaults, hence default_factory."""
    md = stand_in_module("torch.distributed.checkpoint.metadata")
    fs = stand_in_module("torch.distributed.checkpoint.filesystem")
    mc = stand_in_module("megatron.core.dist_checkpointing.strategies.torch")
    import enum
    from typing import Any, Dict, Optional

    class _MEM_FORMAT_ENCODING(enum.Enum):
        TORCH_CONTIGUOUS_FORMAT = 0
        TORCH_CHANNELS_LAST = 1
        TORCH_PRESERVE_FORMAT = 2

    @dataclasses.dataclass
    class ChunkStorageMetadata:
        offsets: Any
        sizes: Any

    @dataclasses.dataclass
    class TensorProperties:
        dtype: Any = dataclasses.field(default_factory=torch.get_default_dtype)
        layout: Any = torch.strided
        requires_grad: bool = False
        memory_format: Any = torch.contiguous_format
        pin_memory: bool = False

        def __getstate__(self):  # torch.memory_format cannot be pickled; DCP encodes it
            return (self.dtype, self.layout, self.requires_grad,
                    _MEM_FORMAT_ENCODING.TORCH_CONTIGUOUS_FORMAT, self.pin_memory)

    @dataclasses.dataclass
    class TensorStorageMetadata:
        properties: Any
        size: Any
        chunks: list

    @dataclasses.dataclass
    class BytesStorageMetadata:
        pass

    @dataclasses.dataclass
    class StorageMeta:
        checkpoint_id: Any = None
        save_id: Optional[str] = None
        load_id: Optional[str] = None
        modules: list = dataclasses.field(default_factory=list)

    @dataclasses.dataclass
    class Metadata:
        state_dict_metadata: dict
        planner_data: Any = None
        storage_data: Any = None
        storage_meta: Optional[StorageMeta] = None
        version: Optional[str] = None

    @dataclasses.dataclass(frozen=True)
    class MetadataIndex:
        fqn: str
        offset: Optional[Any] = None
        index: Optional[int] = dataclasses.field(hash=False, compare=False, default=None)

    @dataclasses.dataclass
    class _StorageInfo:
        relative_path: str
        offset: int
        length: int
        transform_descriptors: Optional[Any] = None

    @dataclasses.dataclass
    class MCoreMetadata(Metadata):
        mcore_data: Optional[Dict[str, Dict[str, Any]]] = None

    classes = {}
    for module, group in ((md, (_MEM_FORMAT_ENCODING, ChunkStorageMetadata, TensorProperties,
                                TensorStorageMetadata, BytesStorageMetadata, StorageMeta, Metadata,
                                MetadataIndex)),
                          (fs, (_StorageInfo,)), (mc, (MCoreMetadata,))):
        for cls in group:
            cls.__module__ = module.__name__
            cls.__qualname__ = cls.__name__
            setattr(module, cls.__name__, cls)
            classes[cls.__name__] = cls
    return types.SimpleNamespace(**classes)


def write_megatron_torch_dist():
    """A two-rank Megatron-Core torch_dist directory (see the module docstring: built from the published
    format with stand-in classes). Tensors are split across the ranks by global offset (dim 0 for one,
    dim 1 for another) the way tensor parallelism shards them; rng_state is a ShardedObject (a bytes item
    holding torch.save([data]) under its unique key); the non-sharded state goes to common.pt."""
    c = dcp_24_classes()
    os.makedirs(MEGATRON_OUT, exist_ok=True)
    for name in os.listdir(MEGATRON_OUT):
        os.remove(os.path.join(MEGATRON_OUT, name))
    torch.manual_seed(2025)
    qkv = torch.randn(4, 6)
    proj = torch.randn(3, 4).bfloat16()
    emb = torch.randn(5, 3)
    exp_avg = torch.randn(4, 6)
    # (fqn, global tensor, [(rank, offsets, sizes)])
    sharded = [
        ("decoder.layers.0.self_attention.linear_qkv.weight", qkv, [(0, (0, 0), (2, 6)), (1, (2, 0), (2, 6))]),
        ("decoder.layers.0.self_attention.linear_proj.weight", proj, [(0, (0, 0), (3, 2)), (1, (0, 2), (3, 2))]),
        ("embedding.word_embeddings.weight", emb, [(0, (0, 0), (5, 3))]),
        ("optimizer.state.exp_avg.decoder.layers.0.self_attention.linear_qkv.weight", exp_avg,
         [(0, (0, 0), (2, 6)), (1, (2, 0), (2, 6))]),
    ]
    rng = {"random_rng_state": (3, tuple(range(5)), None), "torch_rng_state": torch.arange(16, dtype=torch.uint8)}
    bytes_items = [(0, "rng_state/shard_0.0_1.2", [rng]), (1, "rng_state/shard_0.1_1.2", [rng])]
    blobs = {0: bytearray(), 1: bytearray()}
    state_dict_metadata, storage_data, mcore_data = {}, {}, {}

    def append(rank, obj):
        buf = io.BytesIO()
        torch.save(obj, buf)
        offset = len(blobs[rank])
        blobs[rank] += buf.getvalue()
        return c._StorageInfo(f"__{rank}_0.distcp", offset, len(buf.getvalue()))

    for fqn, tensor, chunks in sharded:
        metas = []
        for rank, offsets, sizes in chunks:
            piece = tensor[tuple(slice(o, o + s) for o, s in zip(offsets, sizes))].clone()
            storage_data[c.MetadataIndex(fqn, torch.Size(offsets), len(metas))] = append(rank, piece)
            metas.append(c.ChunkStorageMetadata(torch.Size(offsets), torch.Size(sizes)))
        state_dict_metadata[fqn] = c.TensorStorageMetadata(c.TensorProperties(dtype=tensor.dtype),
                                                           torch.Size(tensor.shape), metas)
        mcore_data[fqn] = {}
    for rank, fqn, obj in bytes_items:
        state_dict_metadata[fqn] = c.BytesStorageMetadata()
        storage_data[c.MetadataIndex(fqn)] = append(rank, obj)
    for rank, blob in blobs.items():
        with open(os.path.join(MEGATRON_OUT, f"__{rank}_0.distcp"), "wb") as f:
            f.write(blob)
    metadata = c.MCoreMetadata(state_dict_metadata=state_dict_metadata,
                               planner_data={fqn: (fqn,) for fqn in state_dict_metadata},
                               storage_data=storage_data,
                               storage_meta=c.StorageMeta(checkpoint_id="iter_0000100", save_id="megatron-fixture"),
                               version="1.0.0", mcore_data=mcore_data)
    with open(os.path.join(MEGATRON_OUT, ".metadata"), "wb") as f:
        pickle.dump(metadata, f)  # DCP's FileSystemWriter.finish: pickle.dump(metadata, file)
    common = {
        "args": argparse.Namespace(tensor_model_parallel_size=2, lr=3e-4, train_iters=1000),
        "checkpoint_version": 3.0,
        "iteration": 100,
        "num_floating_point_operations_so_far": 123456789,
        "opt_param_scheduler": {"max_lr": 3e-4, "min_lr": 3e-5, "num_steps": 800, "decay_style": "cosine"},
        "optimizer": {"optimizer": {"param_groups": [{"lr": 2.9e-4, "weight_decay": 0.1, "params": [0, 1]}]},
                      "grad_scaler": {"scale": torch.tensor([65536.0]), "growth_tracker": 7}},
    }
    torch.save(common, os.path.join(MEGATRON_OUT, "common.pt"))
    with open(os.path.join(MEGATRON_OUT, "metadata.json"), "w") as f:  # dataclasses.asdict(CheckpointingConfig)
        json.dump({"sharded_backend": "torch_dist", "sharded_backend_version": 1, "common_backend": "torch",
                   "common_backend_version": 1}, f)
    expected = {
        "layout": "torch-2.4", "metadata_class": "megatron.core.dist_checkpointing.strategies.torch.MCoreMetadata",
        "tensors": [dict(describe({fqn: t})[0], chunks=[
            {"offsets": list(o), "sizes": list(s), "rank": r,
             "sha256": hashlib.sha256(raw_bytes(t[tuple(slice(a, a + b) for a, b in zip(o, s))])).hexdigest()}
            for r, o, s in chunks]) for fqn, t, chunks in sharded],
        "bytes": sorted(fqn for _, fqn, _ in bytes_items),
        "bytes_tensors": [dict(d, name=f"{fqn}.{d['name']}") for _, fqn, obj in bytes_items for d in describe(obj)],
        "common_tensors": describe(common),
        "iteration": 100,
    }
    with open(os.path.join(MEGATRON_OUT, "..", "megatron_torch_dist_expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)


SAFETENSORS_OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "dcp",
                               "safetensors_v28")
HF_SHARDED_OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "dcp",
                              "hf_sharded_safetensors")


def safetensors_blob(tensors, metadata):
    """What safetensors.torch.save(tensors, metadata=...) returns (safetensors 0.4): the header puts
    __metadata__ first, tensors ordered by alignment (largest element first) then name, data in that
    order, the JSON padded with spaces to a multiple of 8 bytes."""
    order = sorted(tensors, key=lambda k: (-tensors[k].element_size(), k))
    header, data = {"__metadata__": metadata}, bytearray()
    for k in order:
        raw = raw_bytes(tensors[k])
        header[k] = {"dtype": DTYPE[tensors[k].dtype], "shape": list(tensors[k].shape),
                     "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + bytes(data)


def write_dcp_safetensors():
    """Torch 2.8.0's DCP safetensors serialization (see the module docstring); torch 1.13 cannot write it."""
    c = dcp_24_classes()
    torch.manual_seed(2808)
    w = torch.randn(4, 6)
    emb = torch.randn(3, 8).bfloat16()
    steps = torch.arange(10, dtype=torch.int64).reshape(2, 5)
    bias = torch.randn(6).half()
    # (fqn, global tensor, [(rank, offsets, sizes)])
    sharded = [
        ("model.layers.0.weight", w, [(0, (0, 0), (2, 6)), (1, (2, 0), (2, 6))]),
        ("model.embed.weight", emb, [(0, (0, 0), (3, 4)), (1, (0, 4), (3, 4))]),
        ("model.layers.0.bias", bias, [(1, (0,), (6,))]),
        ("optim.state.steps", steps, [(0, (0, 0), (2, 5))]),
    ]
    bytes_items = [(0, "optim.param_groups", [{"lr": 1e-3, "betas": (0.9, 0.999), "params": [0, 1, 2]}])]
    for out in (SAFETENSORS_OUT, HF_SHARDED_OUT):
        os.makedirs(out, exist_ok=True)
        for name in os.listdir(out):
            os.remove(os.path.join(out, name))
    state_dict_metadata, storage_data = {}, {}
    prefix = {0: bytearray(), 1: bytearray()}
    for rank, fqn, obj in bytes_items:  # bytes items come first in each file, raw torch.save bytes
        buf = io.BytesIO()
        torch.save(obj, buf)
        storage_data[c.MetadataIndex(fqn)] = c._StorageInfo(f"__{rank}_0.distcp", len(prefix[rank]),
                                                            len(buf.getvalue()))
        prefix[rank] += buf.getvalue()
        state_dict_metadata[fqn] = c.BytesStorageMetadata()
    per_rank = {0: {}, 1: {}}
    sharding = {0: {}, 1: {}}
    for fqn, tensor, chunks in sharded:
        metas = []
        for rank, offsets, sizes in chunks:
            piece = tensor[tuple(slice(o, o + s) for o, s in zip(offsets, sizes))].clone()
            per_rank[rank][fqn] = piece
            sharding[rank][fqn] = {"saved_offsets": list(offsets)}
            # _write_item: offset = stream.tell() (nothing written yet for tensors), length = numel * size
            storage_data[c.MetadataIndex(fqn, torch.Size(offsets), len(metas))] = c._StorageInfo(
                f"__{rank}_0.distcp", len(prefix[rank]), piece.numel() * piece.element_size())
            metas.append(c.ChunkStorageMetadata(torch.Size(offsets), torch.Size(sizes)))
        state_dict_metadata[fqn] = c.TensorStorageMetadata(c.TensorProperties(dtype=tensor.dtype),
                                                           torch.Size(tensor.shape), metas)
    for rank in (0, 1):
        blob = safetensors_blob(per_rank[rank], {"DCP_SHARDING_INFO": json.dumps(sharding[rank]),
                                                 "DCP_VERSION": "1.0", "format": "pt"})
        with open(os.path.join(SAFETENSORS_OUT, f"__{rank}_0.distcp"), "wb") as f:
            f.write(bytes(prefix[rank]) + blob)
        with open(os.path.join(HF_SHARDED_OUT, f"shard-{rank + 1:05d}-model-00001-of-00001.safetensors"), "wb") as f:
            f.write(blob)  # HuggingFaceStorageWriter writes tensor items only
    metadata = c.Metadata(state_dict_metadata=state_dict_metadata,
                          planner_data={fqn: tuple(fqn.split(".")) for fqn in state_dict_metadata},
                          storage_data=storage_data,
                          storage_meta=c.StorageMeta(checkpoint_id="safetensors_v28", save_id="fixture"),
                          version="1.0.0")
    with open(os.path.join(SAFETENSORS_OUT, ".metadata"), "wb") as f:
        pickle.dump(metadata, f)
    expected = {
        "layout": "torch-2.4", "serialization": "safetensors", "dcp_version": "1.0",
        "tensors": [dict(describe({fqn: t})[0], chunks=[
            {"offsets": list(o), "sizes": list(s), "rank": r,
             "sha256": hashlib.sha256(raw_bytes(t[tuple(slice(a, a + b) for a, b in zip(o, s))])).hexdigest()}
            for r, o, s in chunks]) for fqn, t, chunks in sharded],
        "bytes": sorted(fqn for _, fqn, _ in bytes_items),
    }
    with open(os.path.join(SAFETENSORS_OUT, "..", "safetensors_v28_expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(1234)
    model = torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.ReLU(), torch.nn.Linear(6, 3))
    state = model.state_dict()
    base = torch.arange(40, dtype=torch.float32)
    state["half_weight"] = torch.randn(4, 5).half()
    state["bf16_weight"] = torch.randn(3, 7).bfloat16()
    state["step_counts"] = torch.arange(6, dtype=torch.int64).reshape(2, 3)
    state["mask"] = torch.tensor([True, False, True, True])
    state["slice_view"] = base[10:22].view(3, 4)  # contiguous view with storage offset 10
    state["slice_base"] = base
    fixtures = {"model_state.pt": state}

    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(2, 8)).sum().backward()
    opt.step()
    fixtures["adamw_state.pt"] = opt.state_dict()

    fixtures["strided.pt"] = strided_state()
    legacy = {"legacy_model_state.pt": state}

    expected = {"files": {}, "malicious": {}, "legacy": {}, "numpy": {}}
    for name, obj in fixtures.items():
        path = os.path.join(OUT, name)
        torch.save(obj, path)
        expected["files"][name] = describe(obj)
    for name, obj in legacy.items():
        path = os.path.join(OUT, name)
        torch.save(obj, path, _use_new_zipfile_serialization=False)
        expected["legacy"][name] = describe(obj)
    lightning = lightning_state(model, opt)
    torch.save(lightning, os.path.join(OUT, "lightning_like.ckpt"))
    expected["files"]["lightning_like.ckpt"] = describe(lightning)
    cb = lightning["callbacks"]["ModelCheckpoint"]
    expected["numpy"]["lightning_like.ckpt"] = [
        {"name": f"callbacks.ModelCheckpoint.{k}", "dtype": {np.float32: "F32", np.int16: "I16"}[cb[k].dtype.type],
         "shape": list(cb[k].shape), "sha256": hashlib.sha256(np.ascontiguousarray(cb[k]).tobytes()).hexdigest()}
        for k in ("history", "fortran")]
    torch.save(training_arguments_class()(output_dir="out", report_to=["none"]),
               os.path.join(OUT, "training_args.bin"))
    for name, obj in {"malicious_os_system.pt": {"weight": torch.zeros(2), "x": RunsShell()},
                      "malicious_eval.pt": {"weight": torch.zeros(2), "x": RunsEval()},
                      "malicious_exec.pt": {"weight": torch.zeros(2), "x": RunsExec()},
                      "malicious_subprocess.pt": {"weight": torch.zeros(2), "x": RunsSubprocess()}}.items():
        path = os.path.join(OUT, name)
        torch.save(obj, path)
        expected["malicious"][name] = first_refused_global(path)
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
    write_dcp_113()


class TinyScripted(torch.nn.Module):
    """What tests/data/pytorch/torchscript_tiny.pt scripts: a Linear layer and a buffer."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 2)
        self.register_buffer("scale", torch.full((2,), 0.5))

    def forward(self, x):
        return self.fc(x) * self.scale


def write_torchscript():
    """tests/data/pytorch/torchscript_tiny.pt: torch.jit.save of torch.jit.script(TinyScripted()), as
    users ship models: stored data/ and data.pkl, deflated code/ members (TorchScript source and its
    debug pickles), constants.pkl. torchscript_expected.json: its tensors as torch.jit.load reads them."""
    torch.manual_seed(3)
    path = os.path.join(OUT, "torchscript_tiny.pt")
    torch.jit.save(torch.jit.script(TinyScripted()), path)
    loaded = torch.jit.load(path)
    tensors = {name: t for name, t in list(loaded.named_parameters()) + list(loaded.named_buffers())}
    with zipfile.ZipFile(path) as z:
        code = sorted(n.split("/", 1)[1] for n in z.namelist() if "/code/" in n and not n.endswith(".debug_pkl"))
    with open(os.path.join(OUT, "torchscript_expected.json"), "w") as f:
        json.dump({"tensors": describe(tensors), "code_files": code}, f, indent=1, sort_keys=True)
    # torchscript_hostile.pt: the same archive whose data.pkl calls posix.system (only pickled here;
    # torch.jit.load's unpickler would refuse the import, Python's would run it).
    class Calls:
        def __reduce__(self):
            return (os.system, ("touch /tmp/ckptcheck_fixture_was_executed",))
    hostile = os.path.join(OUT, "torchscript_hostile.pt")
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(hostile, "w") as dst:
        for info in src.infolist():
            data = src.read(info.filename)
            if info.filename.endswith("/data.pkl"):
                data = pickle.dumps({"weights": Calls()}, protocol=2)
            dst.writestr(info, data, compress_type=info.compress_type)


def write_resume_state():
    out = os.path.join(OUT, "resume_state")
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(7)
    random.seed(7)
    np.random.seed(7)
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0 / (1 + step))
    for _ in range(3):
        model(torch.randn(2, 4)).sum().backward()
        opt.step()
        sched.step()
    # torch.cuda.amp.GradScaler disables itself without CUDA and then saves {}: its state_dict()'s
    # keys and types as it returns them on a GPU.
    scaler = {"scale": 65536.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2000,
              "_growth_tracker": 3}
    rng = {"torch": torch.get_rng_state(), "python": random.getstate()}
    state = {"model": model.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(),
             "scaler": scaler, "rng": rng, "step": 3}
    torch.save(state, os.path.join(out, "renamed_keys.pt"))
    torch.save(dict(state, rng=dict(rng, numpy=np.random.get_state())), os.path.join(out, "numpy_rng.pt"))
    torch.save({"model": model.state_dict(), "opt": {"param_groups": opt.state_dict()["param_groups"]},
                "step": 3}, os.path.join(out, "half_optimizer.pt"))
    torch.save({"model": model.state_dict(), "sched": sched.state_dict(), "step": 3},
               os.path.join(out, "sched_only.pt"))


if __name__ == "__main__":
    if sys.argv[1:] == ["--only", "torchscript"]:
        write_torchscript()
    elif sys.argv[1:] == ["--only", "megatron"]:
        write_megatron_torch_dist()
    elif sys.argv[1:] == ["--only", "safetensors"]:
        write_dcp_safetensors()
    elif sys.argv[1:] == ["--only", "resume_state"]:
        write_resume_state()
    else:
        main()
        write_megatron_torch_dist()
        write_dcp_safetensors()
        write_torchscript()
        write_resume_state()
