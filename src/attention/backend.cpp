#include "attention/backend.h"

#include <fmt/format.h>

namespace rlt::attention {

Status run_attention(AttentionBackend& backend, const AttentionParams& p) {
  if (backend.reads_device_memory()) {
    if (p.rows > 0 && (!p.host_block_tables || !p.host_context_lengths || (p.cu_seqlens_q && !p.host_cu_seqlens_q))) {
      return invalid_argument(fmt::format("attention: backend {} reads device memory; give the host copies of "
                                          "block_tables, context_lengths and cu_seqlens_q for validation",
                                          backend.name()));
    }
    RLT_RETURN_IF_ERROR(validate_attention_params(p.host_metadata_view()));
  } else {
    RLT_RETURN_IF_ERROR(validate_attention_params(p));
  }
  if (p.rows > 0) return backend.run(p);
  return {};
}

}  // namespace rlt::attention
