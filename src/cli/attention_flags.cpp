#include "cli/attention_flags.h"

#include <CLI/CLI.hpp>

namespace rlt::cli {

void add_attention_flags(CLI::App& cmd, AttentionFlags& f) {
  cmd.add_option("--attention-backend", f.backend,
                 "auto, or a backend name: cuda_hopper, cuda_paged, cudnn, cpu_flash, cpu_reference (no fallback)")
      ->capture_default_str();
  cmd.add_option("--block-size", f.block_size, "KV page size in tokens")->capture_default_str()->check(CLI::Range(1, 4096));
  cmd.add_flag("--cuda-graphs", f.cuda_graphs,
               "Require CUDA graphs: a backend safe under graph capture (and on GPU runs, captured graphs)");
  cmd.add_flag("--async-scheduling", f.async_scheduling, "Schedule the next batch while the previous one runs (needs --exit-policy ouro_delayed or trace; on CUDA a backend that never synchronizes with the host)");
  cmd.add_flag("--packed-prefill", f.packed_prefill, "Require packed (ragged) prefill support");
  cmd.add_flag("--deterministic", f.deterministic, "Require batch-invariant output");
}

}  // namespace rlt::cli
