#!/usr/bin/python3
"""DCP `.metadata` pickles as torch 2.x and Megatron-Core write them, for verify's trust profiles
(verifier/check/pickle_trust_profile.h). Run from the repository root with Debian's interpreter:
    /usr/bin/python3 scripts/make_dcp_profile_fixtures.py

Debian's torch 1.13 cannot write DCP 2.x metadata, and Megatron-Core is not installed, so the classes
are stand-ins registered under the real module names (sys.modules); CPython's own pickler then
writes exactly the opcodes it writes for the real classes: a dataclass as NEWOBJ(cls, ()) + BUILD
of its field dict, TensorProperties as BUILD of its __getstate__ tuple, an enum member as
REDUCE(cls, (value,)) (Python <= 3.10) or getattr(cls, 'NAME') (3.11+; both appear below),
torch.Size as REDUCE(torch.Size, (tuple,)), a layout as torch.serialization._get_layout('torch.strided'),
pathlib.PosixPath as REDUCE(pathlib.PosixPath, (parts...)). Protocol 4, as DCP's pickle.dump uses.

The tensors and items are the ones of tests/data/dcp/megatron_torch_dist (read back from its
`.metadata` with stand-ins, never with torch), so the data files are copied unchanged:

tests/data/dcp/megatron_2rank_planner/  a 2-rank Megatron-Core torch_dist checkpoint whose
    MCoreMetadata.planner_data holds each rank's MCoreSavePlan of WriteItem / WriteItemType /
    TensorWriteData (as Megatron's cached global plans do), plus metadata.json and common.pt.
tests/data/dcp/dcp2_storage_meta/  a DCP 2.x checkpoint (root class Metadata, version "1.0.0") whose
    StorageMeta.checkpoint_id is a pathlib.PosixPath.
tests/data/dcp/profile_hostile/  `.metadata` files that use the same globals to run code, each to be
    put in place of the one above it names:
    planner_reduce_call.metadata   (megatron_2rank_planner) WriteItem called with a list, not rebuilt from fields
    path_unlink.metadata           (dcp2_storage_meta) pathlib.PosixPath.unlink called on a path
    os_system.metadata             (megatron_2rank_planner) posix.system in planner_data
"""
import dataclasses
import enum
import os
import pathlib
import pickle
import shutil
import sys
import types

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "dcp")
SOURCE = os.path.join(ROOT, "megatron_torch_dist")
SENTINEL = "/tmp/ckptcheck_profile_fixture_was_executed"


def module(name):
    """A stand-in module and its parent packages (the pickler imports a class's module to check it)."""
    if name not in sys.modules:
        sys.modules[name] = types.ModuleType(name)
        if "." in name:
            parent, child = name.rsplit(".", 1)
            setattr(module(parent), child, sys.modules[name])
    return sys.modules[name]


def place(cls, module_name, name=None):
    name = name or cls.__name__
    cls.__module__ = module_name
    cls.__name__ = cls.__qualname__ = name
    setattr(module(module_name), name, cls)
    return cls


# torch: dtypes and layouts pickled by name, torch.Size, torch.serialization._get_layout.
class Named:
    def __init__(self, module_name, name):
        self.module_name, self.name = module_name, name
        setattr(module(module_name), name, self)

    def __reduce__(self):
        self.__module__ = self.module_name
        return self.name


class Size(tuple):
    def __reduce__(self):
        return (Size, (tuple(self),))


place(Size, "torch")


class Layout:
    def __init__(self, name):
        self.name = name

    def __reduce__(self):
        return (_get_layout, (self.name,))


def _get_layout(name):
    return Layout(name)


_get_layout.__module__ = "torch.serialization"
module("torch.serialization")._get_layout = _get_layout

MD = "torch.distributed.checkpoint.metadata"
PLANNER = "torch.distributed.checkpoint.planner"
FS = "torch.distributed.checkpoint.filesystem"
MCORE = "megatron.core.dist_checkpointing.strategies.torch"


class Record:
    """A dataclass instance: fields set in order, pickled as NEWOBJ + BUILD(dict)."""

    def __init__(self, **fields):
        self.__dict__.update(fields)


def record(module_name, name):
    return place(type(name, (Record,), {}), module_name, name)


class TensorProperties(Record):
    # torch 2.x: __getstate__ is the tuple (dtype, layout, requires_grad, memory_format, pin_memory).
    def __getstate__(self):
        return self.state

    def __setstate__(self, state):
        self.state = state


place(TensorProperties, MD)


class OldEnum(enum.Enum):
    # How Python <= 3.10 pickles an enum member (torch 2.0-2.3 era interpreters): by value.
    def __reduce_ex__(self, proto):
        return self.__class__, (self._value_,)


MemFormat = place(enum.Enum("_MEM_FORMAT_ENCODING", "TORCH_CONTIGUOUS_FORMAT TORCH_CHANNELS_LAST TORCH_PRESERVE_FORMAT"), MD)
WriteItemType = place(OldEnum("WriteItemType", "TENSOR SHARD BYTE_IO"), PLANNER)
names = {}
for cls_name in ["Metadata", "TensorStorageMetadata", "BytesStorageMetadata", "ChunkStorageMetadata",
                 "MetadataIndex", "StorageMeta"]:
    names[cls_name] = record(MD, cls_name)
for cls_name in ["TensorWriteData", "WriteItem"]:
    names[cls_name] = record(PLANNER, cls_name)
names["_StorageInfo"] = record(FS, "_StorageInfo")
names["MCoreMetadata"] = record(MCORE, "MCoreMetadata")
names["MCoreSavePlan"] = record(MCORE, "MCoreSavePlan")
names["TensorProperties"] = TensorProperties


class StandInUnpickler(pickle.Unpickler):
    def find_class(self, module_name, name):
        if module_name == "builtins" and name == "getattr":
            return getattr
        if module_name == "torch" and name == "Size":
            return Size
        if module_name == "torch.serialization" and name == "_get_layout":
            return _get_layout
        if module_name == "torch":
            return getattr(module("torch"), name, None) or Named("torch", name)
        if name in names:
            return names[name]
        if name == "_MEM_FORMAT_ENCODING":
            return MemFormat
        raise pickle.UnpicklingError(f"unexpected global {module_name}.{name}")


def read_source():
    with open(os.path.join(SOURCE, ".metadata"), "rb") as f:
        return StandInUnpickler(f).load()


def save_plans(md):
    """Each rank's MCoreSavePlan, from the chunks and bytes entries `.metadata` places in its file."""
    rank_of = {}
    for index, info in md.storage_data.items():
        rank_of[(index.fqn, tuple(index.offset) if index.offset is not None else None)] = \
            int(info.relative_path.split("_")[2])
    plans = {0: [], 1: []}
    for fqn, entry in md.state_dict_metadata.items():
        if isinstance(entry, names["BytesStorageMetadata"]):
            rank = rank_of.get((fqn, None), 0)
            plans[rank].append(names["WriteItem"](
                index=names["MetadataIndex"](fqn=fqn, offset=None, index=None),
                type=WriteItemType.BYTE_IO, tensor_data=None))
            continue
        for chunk in entry.chunks:
            rank = rank_of[(fqn, tuple(chunk.offsets))]
            plans[rank].append(names["WriteItem"](
                index=names["MetadataIndex"](fqn=fqn, offset=chunk.offsets, index=None),
                type=WriteItemType.SHARD,
                tensor_data=names["TensorWriteData"](chunk=chunk, properties=entry.properties, size=entry.size)))
    return [names["MCoreSavePlan"](items=plans[r], storage_data=None, planner_data=None,
                                   mcore_data={"rank": r}) for r in (0, 1)]


def copy_data(to, with_megatron):
    if os.path.exists(to):
        shutil.rmtree(to)
    os.makedirs(to)
    keep = ["__0_0.distcp", "__1_0.distcp"] + (["common.pt", "metadata.json"] if with_megatron else [])
    for name in keep:
        shutil.copyfile(os.path.join(SOURCE, name), os.path.join(to, name))


def dump(obj, path):
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=4)


def calls(fn, *args):
    class Calls:
        def __reduce__(self):
            return (fn, args)
    return Calls()


def main():
    # Megatron-Core, 2 ranks, planner data naming DCP's planner classes and MCoreSavePlan.
    md = read_source()
    planner = os.path.join(ROOT, "megatron_2rank_planner")
    copy_data(planner, with_megatron=True)
    md.planner_data = {"cached_global_plan": save_plans(md)}
    dump(md, os.path.join(planner, ".metadata"))

    # DCP 2.x: root class Metadata, StorageMeta carrying a pathlib.PosixPath, version.
    dcp2 = os.path.join(ROOT, "dcp2_storage_meta")
    copy_data(dcp2, with_megatron=False)
    plain = names["Metadata"](state_dict_metadata=md.state_dict_metadata, planner_data=None,
                              storage_data=md.storage_data,
                              storage_meta=names["StorageMeta"](
                                  checkpoint_id=pathlib.PosixPath("/checkpoints/run-7/step_100"),
                                  save_id="c0ffee", load_id=None),
                              version="1.0.0")
    dump(plain, os.path.join(dcp2, ".metadata"))

    hostile = os.path.join(ROOT, "profile_hostile")
    os.makedirs(hostile, exist_ok=True)
    md.planner_data = {"cached_global_plan": [calls(names["WriteItem"], [1, 2, 3])]}
    dump(md, os.path.join(hostile, "planner_reduce_call.metadata"))
    md.planner_data = {"cached_global_plan": calls(os.system, "touch " + SENTINEL)}
    dump(md, os.path.join(hostile, "os_system.metadata"))
    plain.storage_meta.checkpoint_id = calls(pathlib.PosixPath.unlink, pathlib.PosixPath(SENTINEL))
    dump(plain, os.path.join(hostile, "path_unlink.metadata"))
    assert not os.path.exists(SENTINEL), "a fixture ran its payload"


if __name__ == "__main__":
    main()
