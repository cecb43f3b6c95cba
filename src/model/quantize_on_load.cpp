#include "model/quantize_on_load.h"

#include <fmt/format.h>

#include <map>
#include <memory>

#include "kernels/cpu/weight_matrix.h"
#include "model/ouro_weights.h"
#include "quant/quantize.h"

namespace rlt::model {
namespace {

quant::GgmlType ggml_type(QuantizeType t) {
  switch (t) {
    case QuantizeType::kQ4_K:
      return quant::GgmlType::kQ4_K;
    case QuantizeType::kQ6_K:
      return quant::GgmlType::kQ6_K;
    default:
      return quant::GgmlType::kQ8_0;
  }
}

// The matrices the linear layers stream: every 2-D tensor of the model but the embedding (a tied
// lm head is the embedding, so it is not listed) and the exit gate's single row.
std::vector<std::string> linear_names(const io::ModelConfig& c) {
  std::vector<std::string> names;
  for (const io::ExpectedTensor& t : ouro_expected_tensors(c))
    if (t.shape.size() == 2 && t.shape[0] > 1 && t.name != "model.embed_tokens.weight")
      names.push_back(t.name);
  return names;
}

// Rows of `t` (a float matrix) as blocks of `type`, rows in parallel.
Result<std::shared_ptr<std::vector<uint8_t>>> quantize_matrix(const io::TensorView& t,
                                                              quant::GgmlType type) {
  const int64_t rows = t.shape[0], cols = t.shape[1];
  const int64_t row_bytes = *quant::ggml_row_bytes(type, cols);
  auto out = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(rows * row_bytes));
  const kernels::WeightMatrix w{t.dtype, rows, cols, t.data};
  Status failed;
#pragma omp parallel
  {
    std::vector<float> row(static_cast<size_t>(cols));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      w.row_to_f32(r, row.data());
      Status st = quant::quantize_row(type, row.data(), cols, out->data() + r * row_bytes);
      if (!st.ok()) {
#pragma omp critical
        failed = st;
      }
    }
  }
  if (!failed.ok()) return failed.with_context(fmt::format("tensor '{}'", t.name));
  return out;
}

}  // namespace

Result<io::Checkpoint> quantize_linear_weights(io::Checkpoint checkpoint,
                                               const io::ModelConfig& config, QuantizeType type,
                                               std::vector<std::string>* notes) {
  if (type == QuantizeType::kNone) return checkpoint;
  const quant::GgmlType wanted = ggml_type(type);
  auto source = std::make_shared<io::Checkpoint>(std::move(checkpoint));
  std::map<std::string, io::TensorView> views = source->tensors();
  std::vector<std::shared_ptr<const void>> owners{source};
  std::map<std::string, int64_t> fallbacks;  // type name -> matrices
  for (const std::string& name : linear_names(config)) {
    auto it = views.find(name);
    if (it == views.end()) continue;  // the tensor-set check reports it
    io::TensorView& t = it->second;
    if (t.quant || !is_weight_float(t.dtype) || t.shape.size() != 2) continue;
    quant::GgmlType chosen = wanted;
    if (!quant::ggml_row_bytes(chosen, t.shape[1])) chosen = quant::GgmlType::kQ8_0;
    if (!quant::ggml_row_bytes(chosen, t.shape[1])) {
      ++fallbacks["kept as stored"];
      continue;
    }
    if (chosen != wanted) ++fallbacks["Q8_0"];
    const io::TensorView floats = t;
    t.file += fmt::format(" (quantized to {} at load)", quant::ggml_type_name(chosen));
    t.mapping = nullptr;
    t.nbytes = static_cast<size_t>(t.shape[0] * *quant::ggml_row_bytes(chosen, t.shape[1]));
    t.data = nullptr;
    t.convert = [source, floats, chosen]() -> Result<std::shared_ptr<const std::vector<uint8_t>>> {
      RLT_ASSIGN_OR_RETURN(auto blocks, quantize_matrix(floats, chosen));
      source->release(floats.name);  // the float bytes are not read again
      return std::shared_ptr<const std::vector<uint8_t>>(std::move(blocks));
    };
    t.dtype = DType::kU8;
    t.quant = chosen;
  }
  for (const auto& [what, count] : fallbacks) {
    notes->push_back(
        fmt::format("{} matri{} with an input width not a whole number of {}'s blocks: {}", count,
                    count == 1 ? "x" : "ces", quant::ggml_type_name(wanted), what));
  }
  std::vector<io::TensorView> list;
  for (auto& [_, v] : views) list.push_back(std::move(v));
  return io::Checkpoint::from_views(std::move(list), std::move(owners), source->files());
}

}  // namespace rlt::model
