#!/usr/bin/env python3
"""What torch reads back from a DCP directory, with no process group: every tensor of the metadata
loaded whole (dcp.load into tensors of the recorded size and dtype) and hashed, its chunks (offsets,
sizes, the file and byte range of each), the non-tensor items, and the StorageMeta.

  read_dcp.py DCP_DIR OUT_JSON"""
import os
import sys

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint.metadata import TensorStorageMetadata

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import describe  # noqa: E402


def main():
    path, out = sys.argv[1], sys.argv[2]
    md = FileSystemReader(path).read_metadata()
    tensors, chunks, others = {}, {}, []
    for fqn, m in md.state_dict_metadata.items():
        if isinstance(m, TensorStorageMetadata):
            tensors[fqn] = torch.empty(tuple(m.size), dtype=m.properties.dtype)
            chunks[fqn] = [{"offsets": list(c.offsets), "sizes": list(c.sizes)} for c in m.chunks]
        else:
            others.append(fqn)
    dcp.load(tensors, checkpoint_id=path)
    for fqn, cs in chunks.items():  # each chunk's bytes too, as a reader of one rank's file sees them
        t = tensors[fqn]
        for c in cs:
            part = t[tuple(slice(o, o + n) for o, n in zip(c["offsets"], c["sizes"]))] if t.dim() else t
            c["sha256"] = describe.hashlib.sha256(describe.tensor_bytes(part)).hexdigest()
    storage = {}
    for index, info in (md.storage_data or {}).items():
        storage.setdefault(index.fqn, []).append(
            {"offset": list(index.offset) if index.offset is not None else None, "file": info.relative_path,
             "byte_offset": info.offset, "length": info.length})
    objects = {}
    if others:
        try:
            loaded = {k: None for k in others}
            dcp.load(loaded, checkpoint_id=path)
            objects = {k: repr(v)[:200] for k, v in loaded.items()}
        except Exception as e:  # reported, not fatal: the tensors are what is compared
            objects = {"error": f"{type(e).__name__}: {e}"[:300]}
    sm = getattr(md, "storage_meta", None)
    record = {"file": os.path.basename(os.path.normpath(path)), "writer": "torch.distributed.checkpoint",
              "tensors": [dict(describe.entry(k, t), chunks=chunks[k], storage=storage.get(k, []))
                          for k, t in tensors.items()],
              "bytes": others, "bytes_values": objects,
              "storage_meta": None if sm is None else {k: str(v) for k, v in vars(sm).items()},
              "files": sorted(os.listdir(path))}
    describe.write(out, record)
    print(f"{path}: {len(tensors)} tensors, {len(others)} other items, files {record['files']}")


if __name__ == "__main__":
    main()
