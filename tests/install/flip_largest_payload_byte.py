"""Flips bits in the middle of the largest chunk's payload of a committed ckptcheck checkpoint.

Usage: flip_largest_payload_byte.py STEP_DIR MASK   (MASK: the bits to XOR, e.g. 0x40)
Prints the damaged shard's path. Every chunk's record is in its native shard's header, whichever
manifest version lists them too, so the chunk is found through the headers.
"""
import json
import os
import sys


def main():
    step, mask = sys.argv[1], int(sys.argv[2], 0)
    manifest = json.load(open(os.path.join(step, "manifest.json")))
    best = None
    for shard in manifest["shards"]:
        path = os.path.join(step, shard["path"])
        with open(path, "rb") as f:
            preamble = f.read(56)
            header = json.loads(f.read(int.from_bytes(preamble[16:24], "little")))
        for chunk in header["chunks"]:
            if best is None or chunk["data_bytes"] > best[1]["data_bytes"]:
                best = (path, chunk)
    path, chunk = best
    with open(path, "r+b") as f:
        at = chunk["data_offset"] + chunk["data_bytes"] // 2
        f.seek(at)
        byte = f.read(1)
        f.seek(at)
        f.write(bytes([byte[0] ^ mask]))
    print(path)


if __name__ == "__main__":
    main()
