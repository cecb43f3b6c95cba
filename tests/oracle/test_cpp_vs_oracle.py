"""The C++ engine against the independent float64 numpy oracle (tools/reference_ouro.py).

Each case writes a random checkpoint with tools/make_model.py, runs `rlt generate --trace-out`
and the oracle on the same prompt, and compares:
  * prompt hidden states after every loop, gate logits, and the logits of every generated step:
    max |cpp - oracle| / max |oracle| <= 1e-4 (f32 compute; bf16/f16 checkpoints are compared
    with the oracle reading the same rounded weights, so the same bound holds);
  * greedy tokens and exit depths: identical. A divergence is accepted only where the oracle
    itself is on a knife edge (top-2 logit gap or exit-probability margin below what f32
    rounding can move), and comparison stops at that step.

Plain Llama checkpoints (make_model --arch llama) are the one-loop case without an exit gate;
Nanbeige checkpoints (--arch nanbeige) loop the whole stack without one. The trace contract for a
model without a gate: steps[0]["hidden"] has one entry per loop (the prompt's hidden states after
model.norm, [P*H]); "gate_logits" is an empty list in every step; every exit depth is T. The
oracle's gate arrays are NaN for such a model and are not compared.

Needs RLT_BIN (the rlt binary); ctest sets it.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import make_model  # noqa: E402
import reference_huginn  # noqa: E402
import reference_ouro  # noqa: E402

REL_TOL = 1e-4
# How far f32 rounding can move an exit probability or a logit gap, relative to the values:
# differences this small between engine and oracle are rounding, not bugs.
EXIT_MARGIN = 1e-5
GAP_MARGIN = 1e-5


WORST = {}  # quantity -> largest relative error seen, printed at the end for the record


def rel_err(a, b, what="other"):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    err = float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))
    WORST[what] = max(WORST.get(what, 0.0), err)
    return err


def run_rlt(model_dir, prompt, max_tokens, threshold, min_loops, max_loops, trace_path, exit_flags=True):
    cmd = [os.environ["RLT_BIN"], "--log-level", "warn", "generate", "--model", model_dir,
           "--prompt-ids", ",".join(str(t) for t in prompt), "--max-tokens", str(max_tokens)]
    if exit_flags:
        cmd += ["--exit-threshold", repr(threshold), "--min-loops", str(min_loops),
                "--max-loops", str(max_loops)]
    cmd += ["--ignore-eos", "--trace-out", trace_path]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise AssertionError(f"rlt generate failed (exit {out.returncode}): {' '.join(cmd)}\n"
                             f"{out.stderr.strip()[-2000:]}")
    result = json.loads(out.stdout)
    with open(trace_path) as f:
        trace = json.load(f)
    return result, trace["steps"]


class OracleHarness(unittest.TestCase):
    """Writes checkpoints into a temporary folder and compares rlt with the oracle on them."""

    @classmethod
    def setUpClass(cls):
        if "RLT_BIN" not in os.environ:
            raise unittest.SkipTest("RLT_BIN is not set (run through ctest)")
        cls.tmp = tempfile.TemporaryDirectory(prefix="rlt_oracle_")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()
        print("\nworst relative error vs the oracle: " +
              ", ".join(f"{k} {v:.2e}" for k, v in sorted(WORST.items())), file=sys.stderr)

    def check_case(self, name, spec, prompt_len, max_tokens, threshold, min_loops=2,
                   max_loops=None, shards=1, seed=0, exit_flags=True, lazy=False):
        model_dir = os.path.join(self.tmp.name, name)
        make_model.make_model(model_dir, spec, shards=shards)
        rng = np.random.default_rng(seed)
        prompt = [int(x) for x in rng.integers(0, spec.vocab_size, size=prompt_len)]
        max_loops = max_loops or spec.loops
        min_loops = min(min_loops, max_loops)
        model = reference_ouro.load_model(model_dir, lazy=lazy)
        ref = reference_ouro.generate(model, prompt, max_tokens=max_tokens, exit_threshold=threshold,
                                      min_loops=min_loops, max_loops=max_loops)
        result, steps = run_rlt(model_dir, prompt, max_tokens, threshold, min_loops, max_loops,
                                os.path.join(self.tmp.name, name + ".trace.json"), exit_flags)
        T, H = spec.loops, spec.hidden_size
        has_gate = spec.has_gate
        if not has_gate:
            # No exit gate: the prompt runs all T loops, every decode token max_loops, no gate
            # logits anywhere.
            threshold = 1.0
            for n, step in enumerate(steps):
                self.assertEqual(step["gate_logits"], [], f"{name}: gate logits of gateless step {n}")
            self.assertEqual(list(result["exit_depths"]), ([T] + [max_loops] * (max_tokens - 1))[:max_tokens],
                             f"{name}: exit depths")
        # Prefill: every loop's hidden state and gate logit for every prompt position.
        prefill = steps[0]
        self.assertEqual(len(prefill["hidden"]), T)
        for loop in range(T):
            cpp_hidden = np.array(prefill["hidden"][loop]).reshape(prompt_len, H)
            self.assertLessEqual(rel_err(cpp_hidden, ref["prompt_hidden"][loop], "hidden"), REL_TOL,
                                 f"{name}: prompt hidden, loop {loop + 1}")
            if has_gate:
                self.assertLessEqual(rel_err(prefill["gate_logits"][loop], ref["prompt_gate_logits"][loop], "gate"),
                                     REL_TOL, f"{name}: prompt gate logits, loop {loop + 1}")
        # Generation, step by step, until the oracle sits on a knife edge.
        compared = 0
        for n in range(max_tokens):
            self.assertLessEqual(rel_err(steps[n]["logits"], ref["step_logits"][n], "logits"), REL_TOL,
                                 f"{name}: logits of step {n}")
            if n > 0:
                self.assertLessEqual(rel_err(steps[n]["hidden"][-1], ref["step_hidden"][n], "hidden"), REL_TOL,
                                     f"{name}: exit hidden state of step {n}")
                if has_gate:
                    ran = int(ref["exit_depths"][n])
                    cpp_gates = [g[0] for g in steps[n]["gate_logits"]]
                    self.assertLessEqual(rel_err(cpp_gates[:ran], ref["step_gate_logits"][n][:ran], "gate"),
                                         REL_TOL, f"{name}: gate logits of step {n}")
            logits = ref["step_logits"][n]
            top2 = np.sort(logits)[-2:]
            knife_edge_token = (top2[1] - top2[0]) <= GAP_MARGIN * np.max(np.abs(logits))
            knife_edge_exit = False
            if n > 0 and threshold < 1.0:
                # The exit probability after each loop that ran, recomputed from the oracle's gates.
                remaining = 1.0
                for g in ref["step_gate_logits"][n][: int(ref["exit_depths"][n])]:
                    remaining *= 1.0 - float(reference_ouro.ouro_hazard(g))
                    if abs((1.0 - remaining) - threshold) <= EXIT_MARGIN:
                        knife_edge_exit = True
            if knife_edge_exit:
                break
            self.assertEqual(result["exit_depths"][n], int(ref["exit_depths"][n]), f"{name}: exit depth of step {n}")
            compared += 1
            if knife_edge_token:
                break
            self.assertEqual(result["tokens"][n], int(ref["tokens"][n]), f"{name}: token of step {n}")
        self.assertGreater(compared, 0, f"{name}: nothing was compared")
        self.last_case = (model_dir, prompt, compared)
        return ref, result

    # Huginn (HuginnMatchesOracle, RealShapes): see HuginnMatchesOracle for what is compared.
    HUGINN_CRITERIA = ("none", "latent-diff", "entropy-diff", "kl", "minp-kl", "argmax-stability")
    CRITERION_MARGIN = 1e-3

    def check_huginn(self, name, spec, prompt_len, max_tokens, criterion, seed=0, state_seed=11,
                     threshold=None, min_steps=1, lazy=False):
        model_dir = os.path.join(self.tmp.name, name)
        if not os.path.exists(model_dir):
            make_model.make_model(model_dir, spec)
        rng = np.random.default_rng(seed)
        prompt = [int(x) for x in rng.integers(0, spec.vocab_size, size=prompt_len)]
        model = reference_huginn.load_model(model_dir, lazy=lazy)
        states = {}

        def init_state(position):
            if position not in states:
                states[position] = reference_huginn.seeded_state(state_seed, position, model.cfg)
            return states[position]

        ref = reference_huginn.generate(model, prompt, max_tokens, init_state, criterion, threshold,
                                        min_steps=min_steps)
        thr = reference_huginn.CRITERIA[criterion] if threshold is None else threshold
        cmd = [os.environ["RLT_BIN"], "--log-level", "warn", "generate", "--model", model_dir,
               "--prompt-ids", ",".join(str(t) for t in prompt), "--max-tokens", str(max_tokens),
               "--ignore-eos", "--exit-criterion", criterion, "--min-loops", str(min_steps),
               "--sampling-seed", str(state_seed), "--trace-out", os.path.join(self.tmp.name, name + ".json")]
        if threshold is not None:
            cmd += ["--exit-criterion-threshold", repr(threshold)]
        out = subprocess.run(cmd, capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr[-2000:])
        result = json.loads(out.stdout)
        with open(os.path.join(self.tmp.name, name + ".json")) as f:
            steps = json.load(f)["steps"]
        compared = 0
        for n in range(max_tokens):
            self.assertLessEqual(rel_err(steps[n]["logits"], ref["step_logits"][n], "huginn logits"), REL_TOL,
                                 f"{name}: logits of token {n}")
            if n > 0:
                self.assertLessEqual(rel_err(steps[n]["hidden"][-1], ref["step_hidden"][n], "huginn state"),
                                     REL_TOL, f"{name}: state of token {n}")
                ran = int(ref["exit_depths"][n])
                values = ref["criterion_values"][n][:ran]
                if criterion not in ("none",):
                    cpp = np.array(steps[n]["criterion_values"][:ran])
                    if criterion != "argmax-stability":
                        rel_err(cpp, values, f"huginn {criterion}")
                    edge = np.abs(values - thr) <= self.CRITERION_MARGIN * thr
                    if criterion == "argmax-stability":
                        edge = np.zeros(ran, dtype=bool)  # integers; their argmaxes are checked below
                    if edge.any():
                        break
            logits = ref["step_logits"][n]
            top2 = np.sort(logits)[-2:]
            if (top2[1] - top2[0]) <= GAP_MARGIN * np.max(np.abs(logits)):
                break
            self.assertEqual(result["exit_depths"][n], int(ref["exit_depths"][n]), f"{name}: exit depth of token {n}")
            self.assertEqual(result["tokens"][n], int(ref["tokens"][n]), f"{name}: token {n}")
            compared += 1
        self.assertGreater(compared, 1, f"{name}: nothing was compared")
        self.compared = compared
        return ref, result, prompt


class CppMatchesNumpyOracle(OracleHarness):
    def test_tiny_gqa_f32_full_depth(self):
        spec = make_model.ModelSpec("tiny", dtype="f32", seed=1)
        for prompt_len in (1, 7, 64):
            self.check_case(f"tiny_full_{prompt_len}", spec, prompt_len, 6, 1.0, seed=prompt_len)

    def test_tiny_gqa_f32_early_exit(self):
        spec = make_model.ModelSpec("tiny", dtype="f32", seed=2)
        ref, _ = self.check_case("tiny_exit", spec, 9, 16, 0.5, min_loops=1, seed=3)
        self.assertLess(float(np.mean(ref["exit_depths"][1:])), 4.0, "the case must exercise early exit")

    def test_mha_one_loop(self):
        spec = make_model.ModelSpec("tiny", dtype="f32", seed=3, num_kv_heads=4, loops=1)
        self.check_case("mha_one_loop", spec, 12, 6, 1.0, min_loops=1)

    def test_two_and_three_loops_with_bounds(self):
        for loops in (2, 3):
            spec = make_model.ModelSpec("tiny", dtype="f32", seed=10 + loops, loops=loops)
            self.check_case(f"loops_{loops}", spec, 5, 10, 0.6, min_loops=1, max_loops=loops)

    def test_odd_sizes_exercise_vector_tails(self):
        # hidden 40 and intermediate 72 are not multiples of any SIMD width; 5 query heads share
        # one K/V head (GQA 5:1).
        spec = make_model.ModelSpec("tiny", dtype="f32", seed=4, hidden_size=40, intermediate_size=72,
                                    num_heads=5, num_kv_heads=1, head_dim=8, vocab_size=97)
        self.check_case("odd_sizes", spec, 33, 8, 0.55, min_loops=2, max_loops=3)

    def test_bf16_sharded_small(self):
        spec = make_model.ModelSpec("small", dtype="bf16", seed=5)
        self.check_case("small_bf16_sharded", spec, 20, 8, 0.5, shards=2)

    def test_f16_tiny(self):
        spec = make_model.ModelSpec("tiny", dtype="f16", seed=6)
        self.check_case("tiny_f16", spec, 16, 8, 0.7)

    # ---- plain Llama (model_type "llama"): the one-loop case, no exit gate -------------------

    def test_llama_tiny_gqa_f32(self):
        spec = make_model.ModelSpec("tiny", arch="llama", dtype="f32", seed=21)
        for prompt_len in (1, 7, 40):
            self.check_case(f"llama_tiny_{prompt_len}", spec, prompt_len, 8, 1.0, seed=prompt_len)

    def test_llama_mha_default_flags(self):
        # nh = nkv = 4, and generate is run without any exit flag (a Llama needs none).
        spec = make_model.ModelSpec("tiny", arch="llama", dtype="f32", seed=22, num_kv_heads=4)
        self.check_case("llama_mha", spec, 12, 8, 1.0, exit_flags=False)

    def test_llama_tied_embeddings(self):
        spec = make_model.ModelSpec("tiny", arch="llama", dtype="f32", seed=23, tie_word_embeddings=True)
        self.check_case("llama_tied", spec, 10, 8, 1.0, shards=2)

    def test_llama3_rope_scaling(self):
        # head_dim 16, theta 1e4: wavelengths 2 pi 10^(i/2) = 6.3, 19.9, 62.8, ... 19,869. With an
        # original context of 32 (bands at 32 / 4 = 8 and 32 / 1 = 32) dimension 0 is kept, 1 is
        # blended and 2..7 are divided by the factor; positions run past the original context.
        spec = make_model.ModelSpec("tiny", arch="llama", dtype="f32", seed=24, head_dim=16, rope_theta=1e4,
                                    rope_scaling="llama3:8:32")
        self.check_case("llama_rope_llama3", spec, 33, 8, 1.0)

    def test_llama_bf16_small(self):
        spec = make_model.ModelSpec("small", arch="llama", dtype="bf16", seed=25)
        self.check_case("llama_small_bf16", spec, 20, 8, 1.0)

    def test_llama_odd_sizes(self):
        spec = make_model.ModelSpec("tiny", arch="llama", dtype="f32", seed=26, hidden_size=40,
                                    intermediate_size=72, num_heads=5, num_kv_heads=1, head_dim=8,
                                    vocab_size=97)
        self.check_case("llama_odd_sizes", spec, 33, 8, 1.0)

    # ---- Nanbeige (model_type "nanbeige"): a looped Llama, no exit gate -----------------------

    def test_nanbeige_tiny_f32(self):
        spec = make_model.ModelSpec("nanbeige-tiny", dtype="f32", seed=31)
        self.assertEqual((spec.arch, spec.loops), ("nanbeige", 2))
        for prompt_len in (1, 9, 40):
            self.check_case(f"nanbeige_tiny_{prompt_len}", spec, prompt_len, 8, 1.0, seed=prompt_len)

    def test_nanbeige_three_loops_bf16_default_flags(self):
        spec = make_model.ModelSpec("nanbeige-tiny", dtype="bf16", seed=32, loops=3)
        self.check_case("nanbeige_three_loops", spec, 17, 8, 1.0, exit_flags=False, shards=2)

    def test_nanbeige_decode_at_fewer_loops(self):
        # max_loops below num_loops: decode tokens run one of the three loops (a fixed shallower
        # depth), reading the prompt's loop-1 K/V.
        spec = make_model.ModelSpec("nanbeige-tiny", dtype="f32", seed=34, loops=3)
        self.check_case("nanbeige_max_loops_1", spec, 11, 6, 1.0, min_loops=1, max_loops=1)

    def test_nanbeige_tied_odd_sizes(self):
        spec = make_model.ModelSpec("nanbeige-tiny", dtype="f32", seed=33, hidden_size=40,
                                    intermediate_size=72, num_heads=5, num_kv_heads=1, head_dim=10,
                                    vocab_size=97, tie_word_embeddings=True)
        self.check_case("nanbeige_tied_odd", spec, 21, 8, 1.0)



class HuginnMatchesOracle(OracleHarness):
    """Huginn (huginn_raven) through rlt's dense reference against tools/reference_huginn.py.

    Both draw every token's initial state from the request seed (rlt's counter-based stream;
    the oracle's `seeded_state` is its independent Python form). Compared at every generated
    token: the logits (REL_TOL), the exit depth and the token, and each step's criterion value.
    An exit decision is a knife edge, where comparison stops, when the oracle's value at a step
    that ran lies within CRITERION_MARGIN (relative) of the threshold: rlt's f32 arithmetic moves
    the criterion values by at most ~3e-6 relative here (the worst is printed at the end), so
    1e-3 leaves room without hiding a wrong formula (those miss by orders of magnitude)."""


    def test_every_criterion_tiny_f32_and_the_engine_batch(self):
        """Each criterion through the dense reference, then all of them as one batch through the
        engine (f32 K/V, cpu_reference): rows of six requests at different steps share its
        recurrent batches, and each request's tokens and exit depths equal the oracle's."""
        spec = make_model.ModelSpec("huginn-tiny", dtype="f32", seed=51)
        mixed, jobs, expected = 0, [], []
        for n, criterion in enumerate(self.HUGINN_CRITERIA):
            ref, dense, prompt = self.check_huginn(f"huginn_tiny_{criterion}", spec, 9, 16, criterion, seed=52 + n,
                                                   state_seed=100 + n)
            depths = set(int(d) for d in ref["exit_depths"][1:])
            if criterion == "none":
                self.assertEqual(depths, {spec.loops})
            mixed += len(depths) > 1
            jobs.append({"prompt_ids": prompt, "max_tokens": 16, "ignore_eos": True, "exit_criterion": criterion,
                         "min_loops": 1, "seed": 100 + n})
            expected.append((ref, dense, self.compared))
        self.assertGreaterEqual(mixed, 4, "the criteria must stop tokens at different steps")
        jobs_path = os.path.join(self.tmp.name, "huginn_jobs.jsonl")
        with open(jobs_path, "w") as f:
            f.writelines(json.dumps(j) + "\n" for j in jobs)
        model_dir = os.path.join(self.tmp.name, f"huginn_tiny_{self.HUGINN_CRITERIA[0]}")
        out = subprocess.run([os.environ["RLT_BIN"], "--log-level", "warn", "generate", "--model", model_dir,
                              "--prompts-file", jobs_path, "--kv-dtype", "f32", "--attention-backend",
                              "cpu_reference", "--max-num-seqs", "8"], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr[-2000:])
        results = {r["id"]: r for r in map(json.loads, out.stdout.splitlines())}
        for n, (ref, dense, compared) in enumerate(expected):
            engine = results[n]
            self.assertEqual(engine["tokens"], dense["tokens"], f"{self.HUGINN_CRITERIA[n]}: engine vs dense reference")
            self.assertEqual(engine["exit_depths"], dense["exit_depths"], f"{self.HUGINN_CRITERIA[n]}: engine exit depths")
            self.assertEqual(engine["tokens"][:compared], [int(t) for t in ref["tokens"][:compared]])
            self.assertEqual(engine["exit_depths"][:compared], [int(d) for d in ref["exit_depths"][:compared]])

    def test_prompt_lengths_and_seeds(self):
        spec = make_model.ModelSpec("huginn-tiny", dtype="f32", seed=53)
        for prompt_len, state_seed in ((1, 0), (40, 2**40 + 3)):
            self.check_huginn(f"huginn_len_{prompt_len}", spec, prompt_len, 8, "entropy-diff", seed=prompt_len,
                              state_seed=state_seed)

    def test_thresholds_and_min_steps(self):
        spec = make_model.ModelSpec("huginn-tiny", dtype="f32", seed=54)
        ref, _, _ = self.check_huginn("huginn_latent_min3", spec, 6, 12, "latent-diff", threshold=0.2, min_steps=3)
        self.assertGreaterEqual(int(min(ref["exit_depths"][1:])), 3)
        self.check_huginn("huginn_argmax_2", spec, 6, 12, "argmax-stability", threshold=2)

    def test_bf16_odd_sizes(self):
        # 5 heads of 8 (hidden 40), intermediate 72: no SIMD width divides them.
        spec = make_model.ModelSpec("huginn-tiny", dtype="bf16", seed=55, hidden_size=40, intermediate_size=72,
                                    num_heads=5, num_kv_heads=5, head_dim=8, vocab_size=97)
        self.check_huginn("huginn_bf16_odd", spec, 13, 10, "kl", seed=56)

    def test_more_blocks(self):
        spec = make_model.ModelSpec("huginn-tiny", dtype="f32", seed=57, prelude_layers=2, num_layers=3,
                                    coda_layers=2, loops=5)
        self.check_huginn("huginn_blocks", spec, 7, 8, "minp-kl", seed=58)


@unittest.skipUnless(os.environ.get("RLT_REAL_SHAPES"),
                     "set RLT_REAL_SHAPES=nanbeige-4.2-3b,ouro-2.6b,huginn-0125 (or 1 for all) to check the "
                     "released models' shapes (bf16 checkpoints of 5-9 GB, minutes each; not run in CI)")
class RealShapes(OracleHarness):
    """The released models' shapes with random bf16 weights: the dense reference against the
    float64 oracle (widening one layer at a time), and the engine, with the request in a batch
    beside two others, against the dense reference (f32 K/V, cpu_reference: the same arithmetic,
    so the same tokens and exit depths)."""

    CASES = {"nanbeige-4.2-3b": dict(threshold=1.0, min_loops=2),
             "ouro-2.6b": dict(threshold=0.5, min_loops=1)}

    def test_real_shapes(self):
        wanted = os.environ["RLT_REAL_SHAPES"]
        presets = list(self.CASES) + ["huginn-0125"] if wanted == "1" else wanted.split(",")
        for preset in presets:
            if preset == "huginn-0125":
                self.huginn_real_shape()
                continue
            with self.subTest(preset=preset):
                case = self.CASES[preset]
                spec = make_model.ModelSpec(preset, dtype="bf16", seed=41)
                _, dense = self.check_case(preset, spec, 6, 4, case["threshold"], min_loops=case["min_loops"],
                                           seed=41, lazy=True)
                model_dir, prompt, compared = self.last_case
                cmd = [os.environ["RLT_BIN"], "--log-level", "warn", "generate", "--model", model_dir,
                       "--kv-dtype", "f32", "--attention-backend", "cpu_reference", "--max-tokens", "4",
                       "--ignore-eos", "--exit-threshold", repr(case["threshold"]),
                       "--min-loops", str(case["min_loops"])]
                for p in (prompt, prompt[:3] + [7, 8, 9, 10], [11] * 9):
                    cmd += ["--prompt-ids", ",".join(str(t) for t in p)]
                out = subprocess.run(cmd, capture_output=True, text=True)
                self.assertEqual(out.returncode, 0, out.stderr[-2000:])
                # One JSON line per request, in the order they finished.
                first = next(r for r in map(json.loads, out.stdout.splitlines()) if r["id"] == 0)
                self.assertEqual(first["tokens"], dense["tokens"], f"{preset}: engine vs dense reference")
                self.assertEqual(first["exit_depths"], dense["exit_depths"], f"{preset}: engine exit depths")
                shutil.rmtree(model_dir)
                print(f"\n{preset}: oracle = dense reference for {compared} of 4 tokens, engine = dense "
                      f"reference (tokens {first['tokens']}, exit depths {first['exit_depths']})",
                      file=sys.stderr)


    def huginn_real_shape(self):
        """Huginn-0125's tensors (hidden 5280, 55 heads of 96, intermediate 17920, vocabulary
        65536; 7.1 GB bf16) with mean_recurrence 4 instead of 32: every step streams the same
        blocks, and the float64 oracle widens each block on every step (minutes per step at 32)."""
        spec = make_model.ModelSpec("huginn-0125", dtype="bf16", seed=41, loops=4)
        _, dense, prompt = self.check_huginn("huginn-0125", spec, 5, 4, "kl", seed=41, state_seed=5, lazy=True)
        compared = self.compared
        model_dir = os.path.join(self.tmp.name, "huginn-0125")
        jobs = [{"prompt_ids": p, "max_tokens": 4, "ignore_eos": True, "exit_criterion": c, "min_loops": 1,
                 "seed": seed, **extra}
                for p, c, seed, extra in ((prompt, "kl", 5, {}),
                                          (prompt[:2] + [7, 8, 9], "latent-diff", 6, {"exit_criterion_threshold": 0.5}),
                                          ([11] * 7, "none", 7, {}))]
        jobs_path = os.path.join(self.tmp.name, "huginn_real_jobs.jsonl")
        with open(jobs_path, "w") as f:
            f.writelines(json.dumps(j) + "\n" for j in jobs)
        results = {}
        for mode in ("engine", "reference"):
            cmd = [os.environ["RLT_BIN"], "--log-level", "warn", "generate", "--model", model_dir, "--prompts-file",
                   jobs_path, "--kv-dtype", "f32", "--attention-backend", "cpu_reference"]
            out = subprocess.run(cmd + (["--reference"] if mode == "reference" else []), capture_output=True, text=True)
            self.assertEqual(out.returncode, 0, out.stderr[-2000:])
            results[mode] = {r["id"]: r for r in map(json.loads, out.stdout.splitlines())}
        self.assertEqual(results["reference"][0]["tokens"], dense["tokens"])
        for n in range(len(jobs)):
            engine, reference = results["engine"][n], results["reference"][n]
            self.assertEqual(engine["tokens"], reference["tokens"], f"huginn-0125 job {n}: engine vs dense reference")
            self.assertEqual(engine["exit_depths"], reference["exit_depths"], f"huginn-0125 job {n}: exit depths")
        shutil.rmtree(model_dir)
        print(f"\nhuginn-0125: oracle = dense reference for {compared} of 4 tokens; engine = dense reference for "
              f"three requests in one batch (exit depths {[results['engine'][n]['exit_depths'] for n in range(3)]})",
              file=sys.stderr)


class DemoCheckpoint(unittest.TestCase):
    def test_demo_tokenizer_loads_in_hf_tokenizers(self):
        if "RLT_BIN" not in os.environ:
            self.skipTest("RLT_BIN is not set (run through ctest)")
        from tokenizers import Tokenizer
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, RLT_CACHE_DIR=cache)
            subprocess.run([os.environ["RLT_BIN"], "--log-level", "warn", "info"], check=True,
                           env=env, capture_output=True)
            folder = os.path.join(cache, "rlt-demo-ouro-v1")
            tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
            with open(os.path.join(folder, "config.json")) as f:
                config = json.load(f)
            self.assertEqual(tok.get_vocab_size(), config["vocab_size"])
            text = "Hello wörld 123 <|im_start|>user\n日本語 😀<|im_end|>"
            ids = tok.encode(text).ids
            self.assertEqual(tok.decode(ids, skip_special_tokens=False), text)
            self.assertIn(2, ids)  # <|im_end|> is one special token
            # The folder is a valid oracle input too: the numpy model loads it.
            reference_ouro.load_model(folder)


if __name__ == "__main__":
    unittest.main()
