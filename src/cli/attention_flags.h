// Attention flags shared by every command that builds an engine (and by `attention explain`,
// which must accept the same ones).
#pragma once

#include <string>

#include "attention/capabilities.h"

namespace CLI {
class App;
}

namespace rlt::cli {

struct AttentionFlags {
  std::string backend = "auto";
  int32_t block_size = 16;
  bool cuda_graphs = false;
  bool async_scheduling = false;
  bool packed_prefill = false;
  bool deterministic = false;

  attention::Requirements requirements() const {
    return {packed_prefill, cuda_graphs, async_scheduling, deterministic};
  }
};

void add_attention_flags(CLI::App& cmd, AttentionFlags& flags);

}  // namespace rlt::cli
