#include "attention/backend.h"

namespace rlt::attention {

Status run_attention(AttentionBackend& backend, const AttentionParams& p) {
  RLT_RETURN_IF_ERROR(validate_attention_params(p));
  if (p.rows > 0) backend.run(p);
  return {};
}

}  // namespace rlt::attention
