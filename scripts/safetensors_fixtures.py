#!/usr/bin/env python3
"""The safetensors files wick's tests read, and the check of a file wick wrote.

    python3 scripts/safetensors_fixtures.py generate tests/fixtures
        writes tests/fixtures/python_all_dtypes.safetensors with Python's safetensors and
        numpy (pip install safetensors numpy); the file is committed, so the tests need
        neither.
    python3 scripts/safetensors_fixtures.py check FILE
        reads FILE (written by wick from the same values, tests/test_io_safetensors.cpp)
        with Python's safetensors and exits 0 when every name, dtype, shape, value and the
        metadata match TENSORS and METADATA below, 1 otherwise (printing the differences).

TENSORS is the one statement of the values; tests/test_io_safetensors.cpp spells out the
same values and compares what wick reads with them bit for bit.
"""
import sys

import numpy as np
import safetensors

# name -> (safetensors dtype, numpy dtype of the raw data, shape, values). BF16 values are
# given as their 16-bit patterns (numpy has no bfloat16): 1.0, -0.5, 3.140625, 2^-130.
TENSORS = {
    "u8": ("U8", np.uint8, [2, 3], [0, 1, 127, 128, 200, 255]),
    "u32": ("U32", np.uint32, [4], [0, 1, 4000000000, 123456789]),
    "i16": ("I16", np.int16, [2, 2], [-32768, -1, 0, 32767]),
    "i32": ("I32", np.int32, [3], [-2147483648, 7, 2147483647]),
    "i64": ("I64", np.int64, [2], [-9223372036854775808, 9007199254740993]),
    "f16": ("F16", np.float16, [5], [0.0, -2.5, 65504.0, 6.103515625e-05, 0.333251953125]),
    "bf16": ("BF16", np.uint16, [4], [0x3F80, 0xBF00, 0x4049, 0x0001]),
    "f32": ("F32", np.float32, [2, 2], [1.5, -0.100000001490116119384765625, 3.4028234663852886e38, 1.401298464324817e-45]),
    "f64": ("F64", np.float64, [3], [0.1, -1e308, 5e-324]),
    "scalar": ("F32", np.float32, [], [42.0]),
    "empty": ("F32", np.float32, [0, 3], []),
    "mask": ("BOOL", np.bool_, [3], [True, False, True]),
}
METADATA = {"format": "wick-test", "source": "scripts/safetensors_fixtures.py"}
# Python's safetensors names dtypes after numpy; the file stores the short names above.
LONG_NAMES = {"U8": "uint8", "U32": "uint32", "I16": "int16", "I32": "int32", "I64": "int64", "F16": "float16",
              "BF16": "bfloat16", "F32": "float32", "F64": "float64", "BOOL": "bool"}


def arrays():
    return {name: np.array(values, dtype=np_dtype).reshape(shape) for name, (_, np_dtype, shape, values) in TENSORS.items()}


def generate(out_dir):
    data = arrays()
    specs = {}
    for name, (st_dtype, _, shape, _) in TENSORS.items():
        a = np.ascontiguousarray(data[name])
        specs[name] = safetensors.TensorSpec(dtype=LONG_NAMES[st_dtype], shape=shape, data_ptr=a.ctypes.data,
                                             data_len=a.nbytes)
    path = f"{out_dir}/python_all_dtypes.safetensors"
    safetensors.serialize_file(specs, path, metadata=METADATA)
    print(f"wrote {path}")


def check(path):
    with open(path, "rb") as f:
        raw = f.read()
    header_len = int.from_bytes(raw[:8], "little")
    import json
    header = json.loads(raw[8:8 + header_len])
    problems = []
    if header.get("__metadata__") != METADATA:
        problems.append(f"metadata {header.get('__metadata__')} != {METADATA}")
    got = dict(safetensors.deserialize(raw))
    if set(got) != set(TENSORS):
        problems.append(f"names {sorted(got)} != {sorted(TENSORS)}")
    expected = arrays()
    for name, (st_dtype, np_dtype, shape, _) in TENSORS.items():
        if name not in got:
            continue
        t = got[name]
        if t["dtype"] not in (st_dtype, LONG_NAMES[st_dtype]) and not (st_dtype == "BOOL" and t["dtype"] in ("U8", "uint8")):
            problems.append(f"{name}: dtype {t['dtype']} != {st_dtype}")
        if list(t["shape"]) != shape:
            problems.append(f"{name}: shape {t['shape']} != {shape}")
        value = np.frombuffer(bytes(t["data"]), dtype=np_dtype).reshape(shape)
        if value.tobytes() != expected[name].tobytes():
            problems.append(f"{name}: values {value.tolist()} != {expected[name].tolist()}")
    for p in problems:
        print("MISMATCH", p)
    print(f"checked {len(TENSORS)} tensors in {path}: {'ok' if not problems else 'FAILED'}")
    return 0 if not problems else 1


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "generate":
        generate(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "check":
        sys.exit(check(sys.argv[2]))
    else:
        print(__doc__)
        sys.exit(2)
