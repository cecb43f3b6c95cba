"""Minimal, dependency-free safetensors reader/writer (json + struct + numpy).

Shared by tools/make_model.py (writer) and tools/reference_ouro.py (reader) so that the oracle
does not need the `safetensors` or `torch` packages. The format, as the Hugging Face library
writes it:

    [u64 little-endian N][N bytes of JSON header, padded with spaces to a multiple of 8][data]

The header maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} with offsets
relative to the first data byte, plus an optional "__metadata__" string->string map. Tensors are
stored row-major, little-endian, packed back to back without gaps.

Raw tensors are passed around as (dtype_str, ndarray) pairs where the ndarray already holds the
stored bit pattern: BF16 is carried as uint16 because numpy has no bfloat16 type.
"""

import json
import struct

import numpy as np

# safetensors dtype string -> numpy dtype of the raw storage (little-endian).
RAW_NUMPY_DTYPE = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),  # bit pattern; widened by bf16_bits_to_f32
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}


def f32_to_bf16_bits(x):
    """Round float32 values to bfloat16 with round-to-nearest-even; return uint16 bit patterns.

    This is what torch's `.to(torch.bfloat16)` does: add 0x7FFF plus the lowest kept bit, then
    truncate. NaNs are kept as quiet NaNs (truncation alone could turn a NaN into an infinity).
    """
    x = np.ascontiguousarray(x, dtype=np.float32)
    bits = x.view(np.uint32)
    # Largest finite magnitude 0x7F7FFFFF + 0x8000 still fits in uint32, so no overflow here;
    # NaN patterns may wrap but are replaced below.
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    out = rounded.astype(np.uint16)
    nan = np.isnan(x)
    if nan.any():
        out[nan] = ((bits[nan] >> np.uint32(16)) | np.uint32(0x0040)).astype(np.uint16)
    return out


def bf16_bits_to_f32(bits):
    """Widen bfloat16 bit patterns to float32 (exact: bf16 is the top half of an f32)."""
    bits = np.ascontiguousarray(bits, dtype=np.uint16)
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def raw_to_float64(dtype, raw):
    """Widen a stored tensor exactly to float64 (every F32/F16/BF16 value is a float64 value)."""
    if dtype == "BF16":
        return bf16_bits_to_f32(raw).astype(np.float64)
    if dtype in ("F32", "F16", "F64"):
        return np.asarray(raw).astype(np.float64)
    raise ValueError(f"not a floating tensor dtype: {dtype}")


def _build_header(entries, metadata):
    """Build the padded header bytes for entries = [(name, dtype, shape)] in storage order."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = dict(metadata)
    offset = 0
    for name, dtype, shape in entries:
        nbytes = RAW_NUMPY_DTYPE[dtype].itemsize * int(np.prod(shape, dtype=np.int64))
        header[name] = {
            "dtype": dtype,
            "shape": [int(s) for s in shape],
            "data_offsets": [offset, offset + nbytes],
        }
        offset += nbytes
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    # Pad with spaces so the data section starts 8-byte aligned (as the HF writer does).
    text += b" " * ((-len(text)) % 8)
    return text, offset


def write_safetensors_stream(path, entries, metadata=None):
    """Write a safetensors file tensor by tensor.

    entries: list of (name, dtype_str, shape, produce) where produce() returns the raw ndarray
    (storage dtype per RAW_NUMPY_DTYPE, exactly `shape`). Tensors are stored in name order
    (the order HF's writer uses when all dtypes are equal). Each tensor is produced, written and
    dropped before the next one, so peak memory is one tensor - needed for the 1.4B shape.
    Returns the number of data bytes written.
    """
    if metadata is None:
        metadata = {"format": "pt"}
    entries = sorted(entries, key=lambda e: e[0])
    names = [e[0] for e in entries]
    if len(set(names)) != len(names):
        raise ValueError("duplicate tensor names")
    header, total = _build_header([(n, d, s) for n, d, s, _ in entries], metadata)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)))
        f.write(header)
        for name, dtype, shape, produce in entries:
            raw = np.asarray(produce())
            want = RAW_NUMPY_DTYPE[dtype]
            if raw.dtype.newbyteorder("<") != want or tuple(raw.shape) != tuple(shape):
                raise ValueError(
                    f"{name}: produced {raw.dtype}{raw.shape}, expected {want}{tuple(shape)}")
            f.write(np.ascontiguousarray(raw, dtype=want).tobytes())
    return total


def write_safetensors(path, tensors, metadata=None):
    """Write {name: (dtype_str, raw ndarray)} to `path`. Returns the number of data bytes."""
    entries = [(name, dtype, tuple(np.shape(arr)), (lambda a=arr: a))
               for name, (dtype, arr) in tensors.items()]
    return write_safetensors_stream(path, entries, metadata)


def read_safetensors_header(path):
    """Return (header dict without __metadata__, metadata dict, data start offset)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n).decode("utf-8"))
    metadata = header.pop("__metadata__", {})
    return header, metadata, 8 + n


def read_safetensors(path, names=None):
    """Read tensors as {name: (dtype_str, raw ndarray)}; memory-mapped, so large files are cheap.

    Validates that offsets are in bounds and that each byte range matches dtype x shape.
    """
    header, _, start = read_safetensors_header(path)
    mm = np.memmap(path, dtype=np.uint8, mode="r")
    data_len = mm.shape[0] - start
    out = {}
    for name, info in header.items():
        if names is not None and name not in names:
            continue
        dtype = info["dtype"]
        shape = tuple(info["shape"])
        begin, end = info["data_offsets"]
        np_dtype = RAW_NUMPY_DTYPE[dtype]
        expect = np_dtype.itemsize * int(np.prod(shape, dtype=np.int64))
        if end - begin != expect or not 0 <= begin <= end <= data_len:
            raise ValueError(f"{path}: bad data_offsets for {name}: {info}")
        out[name] = (dtype, mm[start + begin:start + end].view(np_dtype).reshape(shape))
    return out
