#!/usr/bin/python3
"""Writes the seed corpus for cais_parse_fuzz into src/wire/corpus/cais/.

Stdlib only. Each file is one UDP datagram: the 20-byte CAIS header
(big-endian fields, see docs/protocol.md) followed by the payload
(little-endian elements), or a management datagram (mgmt_*: the 36-byte
version-3 header, then rank ports or a REPORT body). Re-run after changing
the wire format:

    /usr/bin/python3 src/wire/make_corpus.py
"""

import os
import struct

HEADER = struct.Struct(">BBHHHIIBBBB")  # 20 bytes, network byte order
assert HEADER.size == 20

OPS = {"allreduce": 0, "allgather": 1, "broadcast": 2, "reducescatter": 3}
REDUCE_OPS = {"sum": 0, "max": 1, "min": 2, "product": 3}
DTYPES = {"f32": 0, "f16": 1, "bf16": 2, "i32": 3}
RESULT, RETRANSMIT, FALLBACK = 0x01, 0x02, 0x04


def header(op=0, group=1, layer=7, chunk=0, total=4, seq=100, payload_len=None,
           version=1, flags=0, reduce_op=0, dtype=0, block=0, payload=b""):
    if payload_len is None:
        payload_len = len(payload)
    return HEADER.pack(op, group, layer, chunk, total, seq, payload_len, version,
                       flags, (reduce_op << 4) | dtype, block) + payload


# Management header, version 3: magic, version, type, status, nonce, group,
# reason, rank, world_size, port, seq_base, rank_port_count, shards, shard,
# job (a JOIN_REPLY's or PONG's window_chunks in its top two bytes), lease_ms.
MGMT = struct.Struct(">BBBBIBBHHHIHBBQI")
assert MGMT.size == 36


def mgmt(type_, status=0, nonce=1, group=0, reason=0, rank=0, world=4, port=0xFFFF,
         seq_base=0, rank_ports=(), job=0, lease_ms=0, count=None, body=b"", window=0):
    n = len(rank_ports) if count is None else count
    if window:
        job |= window << 48
    return (MGMT.pack(0xCA, 3, type_, status, nonce, group, reason, rank, world, port, seq_base,
                      n, 0, 0, job, lease_ms) +
            b"".join(struct.pack(">H", p) for p in rank_ports) + body)


def f32(*xs):
    return struct.pack("<%df" % len(xs), *xs)


def i32(*xs):
    return struct.pack("<%di" % len(xs), *xs)


def half(*bits):  # raw 16-bit patterns (f16 or bf16)
    return struct.pack("<%dH" % len(bits), *bits)


def corpus():
    c = {}
    # Valid packets: every op, every dtype, every reduce op, flag variants.
    c["ok_allreduce_sum_f32"] = header(op=OPS["allreduce"], payload=f32(1.0, -2.5, 3.25, 0.0))
    c["ok_allgather_f16_block2"] = header(op=OPS["allgather"], dtype=DTYPES["f16"],
                                          flags=RESULT, block=2,
                                          payload=half(0x3C00, 0xC000, 0x7C00))
    c["ok_broadcast_bf16"] = header(op=OPS["broadcast"], dtype=DTYPES["bf16"],
                                    payload=half(0x3F80, 0x4000))
    c["ok_reducescatter_max_i32"] = header(op=OPS["reducescatter"], reduce_op=REDUCE_OPS["max"],
                                           dtype=DTYPES["i32"], chunk=3, total=4,
                                           payload=i32(-1, 2147483647, -2147483648))
    c["ok_allreduce_min_f32_nan"] = header(reduce_op=REDUCE_OPS["min"],
                                           payload=f32(float("nan"), 1.0))
    c["ok_allreduce_product_i32_result"] = header(reduce_op=REDUCE_OPS["product"],
                                                  dtype=DTYPES["i32"], flags=RESULT,
                                                  payload=i32(3, 5))
    c["ok_retransmit_last_chunk"] = header(chunk=65534, total=65535, seq=0xFFFFFFFF,
                                           group=255, layer=65535, flags=RETRANSMIT,
                                           payload=f32(42.0))
    c["ok_fallback_notice"] = header(flags=FALLBACK | RESULT, chunk=2, payload=b"")
    c["ok_declined_notice"] = header(flags=FALLBACK | RESULT | 0x08, chunk=0, payload=b"")
    c["ok_reducescatter_ack"] = header(op=OPS["reducescatter"], flags=RESULT | 0x10, chunk=1,
                                       payload=b"")
    # One per error class.
    c["err_too_short_19"] = header(payload=f32(1.0))[:19]
    c["err_too_short_1"] = b"\x00"
    c["err_bad_version"] = header(version=2, payload=f32(1.0))
    c["err_unknown_op"] = header(op=4, payload=f32(1.0))
    c["err_unknown_reduce_op"] = header(reduce_op=4, payload=f32(1.0))
    c["err_unknown_dtype"] = header(dtype=15, payload=f32(1.0))
    c["err_unknown_flags"] = header(flags=0x40, payload=f32(1.0))
    c["err_payload_len_bigger"] = header(payload_len=100, payload=f32(1.0, 2.0))
    c["err_payload_len_smaller"] = header(payload_len=4, payload=f32(1.0, 2.0))
    c["err_chunk_eq_total"] = header(chunk=4, total=4, payload=f32(1.0))
    c["err_total_chunks_zero"] = header(chunk=0, total=0, payload=f32(1.0))
    c["err_misaligned_f16"] = header(dtype=DTYPES["f16"], payload=b"\x00\x3c\x00")
    c["err_misaligned_f32"] = header(payload=b"\x00\x00\x80\x3f\x00\x00")
    c["err_empty_payload"] = header(flags=RESULT, payload=b"")
    # Management datagrams (include/inca/wire/mgmt.h).
    c["mgmt_join"] = mgmt(1, group=1, rank=1, job=0x0123456789ABCDEF)
    c["mgmt_join_reply_ok"] = mgmt(2, group=1, rank=1, port=1, seq_base=12345,
                                   rank_ports=(0, 1, 2, 3), lease_ms=10000, window=32)
    c["mgmt_join_reply_tree"] = mgmt(2, group=1, rank=1, port=1, seq_base=12345, reason=1,
                                     rank_ports=(7, 7, 3, 7), lease_ms=10000)  # block order: ranks
    c["mgmt_pong_ok"] = mgmt(4, group=1, rank=2, port=2, seq_base=12345, lease_ms=10000,
                             window=42)
    c["mgmt_bad_advice"] = mgmt(4, group=1, rank=2, port=2, lease_ms=10000, window=42,
                                job=1)  # the six bytes after a PONG's window are not zero
    c["mgmt_join_refused_busy"] = mgmt(2, status=2, reason=7, group=1, rank=0, world=2)
    c["mgmt_report"] = mgmt(7, rank=0, world=4, body=struct.pack(">QIB3x", 0x222E0, 256, 1))
    c["mgmt_bad_count"] = mgmt(2, group=1, rank=1, port=1, seq_base=12345, rank_ports=(0, 1, 2),
                               lease_ms=10000)  # 3 ports for a world of 4
    return c


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "cais")
    os.makedirs(out, exist_ok=True)
    for name, data in sorted(corpus().items()):
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    print("wrote %d files to %s" % (len(corpus()), out))


if __name__ == "__main__":
    main()
