#include "attention/backend.h"

#include <fmt/format.h>

namespace rlt::attention {

Status check_attention_pass(const AttentionBackend& backend, const AttentionParams& p) {
  if (!backend.reads_device_memory()) return validate_attention_metadata(p);
  if (p.rows > 0 && (!p.host_block_tables || !p.host_context_lengths ||
                     (p.cu_seqlens_q && !p.host_cu_seqlens_q))) {
    return invalid_argument(
        fmt::format("attention: backend {} reads device memory; give the host copies of "
                    "block_tables, context_lengths and cu_seqlens_q for validation",
                    backend.name()));
  }
  return validate_attention_metadata(p.host_metadata_view());
}

Status run_checked_attention(AttentionBackend& backend, const AttentionParams& p) {
  if (p.rows == 0) return {};
  if (!p.q || !p.out) return invalid_argument("attention: q or out is null");
  return backend.run(p);
}

Status run_attention(AttentionBackend& backend, const AttentionParams& p) {
  RLT_RETURN_IF_ERROR(check_attention_pass(backend, p));
  return run_checked_attention(backend, p);
}

}  // namespace rlt::attention
