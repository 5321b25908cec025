#!/usr/bin/env python3
"""Writes the .npy files that tests/test_npy.cpp reads: arrays saved by numpy itself.

    python3 scripts/make_npy_fixtures.py [OUT_DIR]     (default tests/data/npy; needs numpy)

Each array's values follow a formula the test computes on its own, so the test checks that
wick reads numpy's bytes as the same numbers, and that wick writes them back byte for byte
(for C-order, little-endian files). bf16 has no numpy dtype: it is stored as numpy's 2-byte
void ('|V2') holding the raw bfloat16 bits, the convention io/npy.h documents.
"""
import os
import sys

import numpy as np


def ramp(n, scale, offset):
    """offset + scale * i for i in 0..n-1: exactly representable in every float dtype used."""
    return offset + scale * np.arange(n, dtype=np.float64)


def bf16_bits(values):
    """Raw bfloat16 bits of float32 values that bfloat16 represents exactly (the top 16 bits)."""
    f = np.asarray(values, dtype=np.float32)
    bits = (f.view(np.uint32) >> 16).astype("<u2")
    assert np.array_equal((bits.astype(np.uint32) << 16).view(np.float32), f), "not exact in bf16"
    return bits.view("V2")


def fixtures():
    return {
        # name: array (the test recomputes each from the same formula)
        "u8": np.arange(6, dtype=np.uint8).reshape(2, 3) * 50,                     # 0, 50, ..., 250
        "u4": np.array([0, 1, 4000000000, 4294967295], dtype=np.uint32),
        "i2": np.array([[-32768, -1], [0, 32767]], dtype=np.int16),
        "i4": np.array([-2147483648, -7, 2147483647], dtype=np.int32),
        "i8": np.array([[-(2**63), -1], [2**40 + 3, 2**63 - 1]], dtype=np.int64),
        "f2": np.array([1.5, -0.0, 65504.0, 2.0**-24, -3.25], dtype=np.float16),
        "f4": ramp(24, 0.125, -1.5).astype(np.float32).reshape(2, 3, 4),
        "f8": np.array([[np.pi, -np.e], [1e300, -2.0**-1074], [0.1, 7.0]], dtype=np.float64),
        "bf16": bf16_bits([1.0, -2.5, 0.15625, 256.0, -0.0, 2.0**-126]).reshape(2, 3),
        "scalar_f4": np.array(2.5, dtype=np.float32),                              # shape ()
        "empty_f4": np.zeros((0, 3), dtype=np.float32),
        # Read, converted: wick writes these back in C order, little-endian.
        "fortran_f4": np.asfortranarray(ramp(6, 1.0, 0.0).astype(np.float32).reshape(2, 3)),
        "big_endian_f8": ramp(3, -0.5, 2.0).astype(">f8"),
        "big_endian_i4": np.array([1, -2, 65536], dtype=">i4"),
        # Refused: numpy dtypes wick has no DType for.
        "bool": np.array([True, False]),
        "u2": np.array([1, 2], dtype=np.uint16),
    }


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "data", "npy")
    os.makedirs(out, exist_ok=True)
    for name, array in fixtures().items():
        np.save(os.path.join(out, name + ".npy"), array, allow_pickle=False)
    print(f"wrote {len(fixtures())} files to {os.path.normpath(out)}")


if __name__ == "__main__":
    main()
