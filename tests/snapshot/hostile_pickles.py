#!/usr/bin/env python3
# tests/snapshot/hostile_pickles.py — hostile PyTorch-snapshot pickles written opcode by opcode.
"""Hostile PyTorch-snapshot pickles, written opcode by opcode (pickle.dumps cannot make them small):

- billion_laughs(n): 'device_traces' is one list referenced n times, holding one history entry
  referenced n times, so about 2n bytes stand for n*n entries;
- segment_laughs(n): the same with 'segments' and their 'blocks' (blocks without an address, so each
  copy is a distinct block);
- wide_dict(keys, refs): one history entry with `keys` extra keys, referenced `refs` times (every key
  lookup in it scanned every key before dict lookups were hashed: quadratic time), in one segment.

`python3 hostile_pickles.py --corpus DIR` writes small instances of each into DIR (the fuzzing seeds;
tests/snapshot/corpus/ holds the checked-in copies).
"""
import argparse
import os
import struct

PROTO = b"\x80\x04"
EMPTY_DICT, EMPTY_LIST, MARK, DUP = b"}", b"]", b"(", b"2"
SETITEMS, APPENDS, STOP, NONE = b"u", b"e", b".", b"N"


def s(text):
    """SHORT_BINUNICODE (or BINUNICODE past 255 bytes)."""
    data = text.encode()
    if len(data) < 256:
        return b"\x8c" + bytes([len(data)]) + data
    return b"X" + struct.pack("<I", len(data)) + data


def i(value):
    """BININT (signed 32-bit) or LONG1."""
    if -(1 << 31) <= value < (1 << 31):
        return b"J" + struct.pack("<i", value)
    raw = value.to_bytes((value.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8a" + bytes([len(raw)]) + raw


def entry(extra_keys=0):
    """One history entry: an alloc of 1 MiB, with `extra_keys` keys the converter does not read,
    before its real keys (so a linear lookup scans them all)."""
    out = EMPTY_DICT + MARK
    for k in range(extra_keys):
        out += s(f"k{k}") + NONE
    out += s("action") + s("alloc") + s("addr") + i(0x7f0000000000) + s("size") + i(1 << 20)
    out += s("stream") + i(0) + s("time_us") + i(1_000_000)
    return out + SETITEMS


def repeated(item, n):
    """A list holding `item` n times: the item once, then DUP (one byte per reference)."""
    return EMPTY_LIST + MARK + item + DUP * (n - 1) + APPENDS


def root(segments, device_traces):
    return PROTO + EMPTY_DICT + MARK + s("segments") + segments + s("device_traces") + device_traces + SETITEMS + STOP


def billion_laughs(n):
    return root(EMPTY_LIST, repeated(repeated(entry(), n), n))


def segment_laughs(n):
    block = EMPTY_DICT + MARK + s("size") + i(512) + s("state") + s("active_allocated") + SETITEMS
    seg = EMPTY_DICT + MARK + s("device") + i(0) + s("address") + i(0x7f0000000000) + s("total_size")
    seg += i(1 << 40) + s("blocks") + repeated(block, n) + SETITEMS
    return root(repeated(seg, n), EMPTY_LIST)


def wide_dict(keys, refs):
    # One segment holds the entry's block: a block outside every segment is left out of the trace.
    seg = EMPTY_DICT + MARK + s("device") + i(0) + s("address") + i(0x7f0000000000) + s("total_size")
    seg += i(1 << 30) + s("blocks") + EMPTY_LIST + SETITEMS
    return root(EMPTY_LIST + MARK + seg + APPENDS, EMPTY_LIST + MARK + repeated(entry(keys), refs) + APPENDS)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", required=True, help="directory to write the seeds into")
    args = ap.parse_args()
    os.makedirs(args.corpus, exist_ok=True)
    seeds = {"billion_laughs_6k.pickle": billion_laughs(6000), "segment_laughs_6k.pickle": segment_laughs(6000),
             "wide_dict_1k_keys.pickle": wide_dict(1000, 4000)}
    for name, data in seeds.items():
        with open(os.path.join(args.corpus, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
