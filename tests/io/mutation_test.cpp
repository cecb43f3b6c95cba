// Randomized mutation tests of the parsers of untrusted model files: thousands of corrupted GGUF
// files, config.json texts and safetensors files must each end in a clean error (or, when the damage is harmless, a
// model that loads) — never a crash, a hang or an out-of-bounds read (the sanitizer build runs
// this suite too). RLT_MUTATION_CASES scales the case count.
#include <gtest/gtest.h>

#include "../mutation_util.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <unistd.h>

#include "gguf_test_util.h"
#include "io/gguf_model.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "model/ouro_weights.h"
#include "source/model_source.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/tokenizer.h"

namespace rlt::io {
namespace {

using mutation::cases;

// Where the data section starts: mutations favour the header, where the parsing logic is.
size_t header_size(const std::vector<uint8_t>& bytes) {
  auto f = GgufFile::parse(bytes.data(), bytes.size(), "base");
  size_t first = bytes.size();
  for (const auto& t : (*f)->tensors())
    first = std::min(first, static_cast<size_t>(t.data - bytes.data()));
  return first;
}

std::vector<uint8_t> mutate(std::vector<uint8_t> b, size_t header, std::mt19937_64& rng) {
  auto pos = [&](bool anywhere) {
    const size_t limit = anywhere || rng() % 5 == 0 ? b.size() : header;
    return limit == 0 ? 0 : static_cast<size_t>(rng() % limit);
  };
  const int kind = static_cast<int>(rng() % 8);
  const int repeat = 1 + static_cast<int>(rng() % 3);
  for (int k = 0; k < repeat && !b.empty(); ++k) {
    switch (kind) {
      case 0:
        b[pos(false)] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;  // a flipped bit
      case 1:
        b[pos(false)] = static_cast<uint8_t>(rng());
        break;  // a random byte
      case 2:
        b.resize(pos(true));
        break;   // truncation
      case 3: {  // a huge count, length or dimension
        const uint64_t values[] = {~0ull, 1ull << 62, 1ull << 40, 0x7fffffffull,
                                   0,     1ull << 32, rng()};
        const uint64_t v = values[rng() % 7];
        const size_t at = pos(false) & ~size_t{3};
        if (at + 8 <= b.size()) std::memcpy(b.data() + at, &v, 8);
        break;
      }
      case 4: {  // a wrong value or tensor type id
        const uint32_t v = static_cast<uint32_t>(rng() % 48);
        const size_t at = pos(false) & ~size_t{3};
        if (at + 4 <= b.size()) std::memcpy(b.data() + at, &v, 4);
        break;
      }
      case 5: {  // a range removed (shifts every later offset)
        const size_t at = pos(false),
                     n = std::min(b.size() - at, static_cast<size_t>(1 + rng() % 64));
        b.erase(b.begin() + static_cast<int64_t>(at), b.begin() + static_cast<int64_t>(at + n));
        break;
      }
      case 6: {  // a range repeated
        const size_t at = pos(false),
                     n = std::min(b.size() - at, static_cast<size_t>(1 + rng() % 64));
        std::vector<uint8_t> copy(b.begin() + static_cast<int64_t>(at),
                                  b.begin() + static_cast<int64_t>(at + n));
        b.insert(b.begin() + static_cast<int64_t>(at), copy.begin(), copy.end());
        break;
      }
      case 7:
        b[pos(false)] = static_cast<uint8_t>(0x80 | (rng() % 0x80));
        break;  // non-UTF-8 bytes
    }
  }
  return b;
}

struct Outcome {
  int parse_errors = 0, model_errors = 0, weight_errors = 0, tokenizer_errors = 0, loaded = 0;
};

// Everything rlt does with a GGUF file before running it.
void load_everything(const std::vector<uint8_t>& bytes, Outcome& out, bool materialize) {
  auto expect_message = [](const Status& s) { EXPECT_FALSE(s.message().empty()) << s.to_string(); };
  auto file = GgufFile::parse(bytes.data(), bytes.size(), "mutant.gguf");
  if (!file.ok()) {
    expect_message(file.status());
    ++out.parse_errors;
    return;
  }
  auto info = read_gguf_model_info(**file);
  if (!info.ok()) {
    expect_message(info.status());
    ++out.model_errors;
    return;
  }
  auto plan = gguf_tensor_plan(**file, info->config, DType::kBF16);
  Status weights =
      plan.ok() ? validate_tensor_set(*Checkpoint::from_views(std::move(plan).value(), {}, {}),
                                      model::ouro_expected_tensors(info->config))
                : plan.status();
  if (weights.ok() && materialize) {
    auto ckpt = gguf_checkpoint(*file, info->config, DType::kBF16);
    weights = ckpt.ok() ? model::bind_ouro_weights(*ckpt, info->config).status() : ckpt.status();
    // The blocks kept as stored and packed into quantized panels (--dtype auto).
    auto kept = gguf_checkpoint(*file, info->config, model::quantized_tensors(WeightDType::kAuto));
    Status packed = kept.ok() ? model::bind_ouro_weights(*kept, info->config).status() : kept.status();
    EXPECT_EQ(weights.ok(), packed.ok()) << weights.to_string() << " / " << packed.to_string();
  }
  if (!weights.ok()) {
    expect_message(weights);
    ++out.weight_errors;
    return;
  }
  auto vocab = source::read_gguf_vocab(**file);
  auto tokenizer = vocab.ok() ? tok::tokenizer_from_gguf(*vocab)
                              : Result<std::shared_ptr<const tok::Tokenizer>>(vocab.status());
  if (!tokenizer.ok()) {
    expect_message(tokenizer.status());
    ++out.tokenizer_errors;
    return;
  }
  auto ids = (*tokenizer)->encode("ab a<s>b", false);
  EXPECT_TRUE(ids.ok());
  ++out.loaded;
}

TEST(GgufMutation, CorruptedFilesGiveCleanErrors) {
  const std::vector<std::vector<uint8_t>> bases = {
      testing::tiny_gguf(), testing::tiny_gguf({.ouro = true, .exit_gate = true, .tied = false}),
      testing::tiny_gguf({.nanbeige = true, .tied = false})};
  for (const auto& base : bases) {
    Outcome unmutated;
    load_everything(base, unmutated, true);
    ASSERT_EQ(unmutated.loaded, 1) << "the base file must load";
  }
  std::mt19937_64 rng(20261201);
  Outcome out;
  const int n = cases(20000);
  for (int i = 0; i < n; ++i) {
    const auto& base = bases[static_cast<size_t>(i) % bases.size()];
    load_everything(mutate(base, header_size(base), rng), out, i % 8 == 0);
  }
  std::cout << "[ mutation ] " << n << " GGUF mutants: " << out.parse_errors << " parse errors, "
            << out.model_errors << " model errors, " << out.weight_errors << " weight errors, "
            << out.tokenizer_errors << " tokenizer errors, " << out.loaded << " loaded\n";
  EXPECT_EQ(
      out.parse_errors + out.model_errors + out.weight_errors + out.tokenizer_errors + out.loaded,
      n);
  EXPECT_GT(out.parse_errors, n / 4) << "the mutations must reach the parser's checks";
}

TEST(ConfigMutation, CorruptedConfigsGiveCleanErrors) {
  const std::string bases[] = {
      R"({"architectures": ["LlamaForCausalLM"], "attention_bias": false, "bos_token_id": 1, "eos_token_id": [2, 3],
          "head_dim": 64, "hidden_act": "silu", "hidden_size": 576, "intermediate_size": 1536,
          "max_position_embeddings": 8192, "model_type": "llama", "num_attention_heads": 9, "num_hidden_layers": 30,
          "num_key_value_heads": 3, "rms_norm_eps": 1e-05, "id2label": {"0": "LABEL_0"}, "return_dict": true,
          "rope_parameters": {"rope_theta": 100000.0, "rope_type": "default"}, "tie_word_embeddings": true,
          "dtype": "bfloat16", "vocab_size": 49152})",
      R"({"architectures": ["OuroForCausalLM"], "model_type": "ouro", "vocab_size": 49152, "hidden_size": 2048,
          "intermediate_size": 5632, "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 16,
          "max_position_embeddings": 65536, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "total_ut_steps": 4,
          "early_exit_threshold": 1.0, "layer_types": ["full_attention"], "rope_scaling": null})",
      R"({"architectures": ["NanbeigeForCausalLM"], "model_type": "nanbeige", "vocab_size": 166144,
          "hidden_size": 3072, "intermediate_size": 10752, "num_hidden_layers": 22, "num_attention_heads": 48,
          "num_key_value_heads": 8, "head_dim": 128, "kv_channels": 128, "hidden_act": "silu",
          "max_position_embeddings": 262144, "rope_theta": 70000000, "rope_scaling": null, "rms_norm_eps": 1e-05,
          "num_loops": 2, "loop_loss_weights": [], "skip_loop_final_norm": false, "tie_word_embeddings": false,
          "bos_token_id": 166100, "eos_token_id": 166101})",
  };
  for (const auto& b : bases)
    ASSERT_TRUE(parse_model_config(b, "config.json").ok() ||
                parse_model_config(b, "config.json").status().message().find("layer_types") !=
                    std::string::npos);
  std::mt19937_64 rng(7);
  const char* tokens[] = {
      "null", "true", "-1", "1e309", "\"x\"", "[]", "{}", "0", "99999999999999999999", "\xff"};
  int errors = 0, parsed = 0;
  const int n = cases(10000);
  for (int i = 0; i < n; ++i) {
    std::string s = bases[static_cast<size_t>(i) % std::size(bases)];
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits && !s.empty(); ++e) {
      const size_t at = static_cast<size_t>(rng() % s.size());
      switch (rng() % 4) {
        case 0:
          s[at] = static_cast<char>(rng());
          break;
        case 1:
          s.resize(at);
          break;
        case 2:
          s.insert(at, tokens[rng() % 10]);
          break;
        case 3:
          s.erase(at, static_cast<size_t>(1 + rng() % 12));
          break;
      }
    }
    auto r = parse_model_config(s, "config.json");
    if (r.ok()) {
      ++parsed;
      EXPECT_GT(r->vocab_size, 0);
      EXPECT_GT(r->head_dim, 0);
    } else {
      ++errors;
      EXPECT_FALSE(r.status().message().empty());
    }
  }
  std::cout << "[ mutation ] " << n << " config.json mutants: " << errors << " errors, " << parsed
            << " parsed\n";
  EXPECT_GT(errors, n / 2);
}

// Safetensors files as the writer makes them: an 8-byte header length, the JSON header, the data.
std::vector<uint8_t> written_safetensors(std::vector<TensorToWrite> tensors, const std::string& name) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("rlt_mutation_" + std::to_string(::getpid()) + "_" + name + ".safetensors");
  EXPECT_TRUE(write_safetensors(path.string(), std::move(tensors)).ok());
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(path);
  return bytes;
}

TensorToWrite tensor(std::string name, DType dtype, std::vector<int64_t> shape, std::mt19937_64& rng) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  std::vector<uint8_t> bytes(static_cast<size_t>(numel) * dtype_size(dtype));
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  return {std::move(name), dtype, std::move(shape), std::move(bytes)};
}

// The file with `header` (padded to 8 bytes like the writer) in place of the original one.
std::vector<uint8_t> with_header(std::string header, const std::vector<uint8_t>& data, bool pad) {
  if (pad) header.append((8 - header.size() % 8) % 8, ' ');
  std::vector<uint8_t> out(8 + header.size() + data.size());
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, header.data(), header.size());
  if (!data.empty()) std::memcpy(out.data() + 8 + header.size(), data.data(), data.size());
  return out;
}

nlohmann::json odd_header_value(std::mt19937_64& rng) {
  const char* dtypes[] = {"F64", "I8", "BOOL", "U8", "I64", "F8_E4M3", "bf16", "", "F32 "};
  switch (rng() % 12) {
    case 0: return dtypes[rng() % std::size(dtypes)];
    case 1: return nlohmann::json::array({-1});
    case 2: return nlohmann::json::array({int64_t{1} << 62, int64_t{1} << 62});
    case 3: return nlohmann::json::array({0});
    case 4: return nlohmann::json::array();
    case 5: return nlohmann::json::array({rng() % 64, rng() % 64});
    case 6: return nlohmann::json::array({std::numeric_limits<uint64_t>::max(), 8});
    case 7: return nlohmann::json::array({1.5, 2});
    case 8: return nullptr;
    case 9: return std::numeric_limits<int64_t>::min();
    case 10: return nlohmann::json::object({{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {0, 4}}});
    default: return "x";
  }
}

TEST(SafetensorsMutation, CorruptedFilesGiveCleanErrors) {
  std::mt19937_64 seed_rng(11);
  const std::vector<std::vector<uint8_t>> bases = {
      written_safetensors({tensor("model.embed_tokens.weight", DType::kF32, {4, 3}, seed_rng),
                           tensor("model.norm.weight", DType::kBF16, {3}, seed_rng),
                           tensor("lm_head.weight", DType::kF16, {2, 2, 2}, seed_rng)},
                          "a"),
      written_safetensors({tensor("x", DType::kI64, {2}, seed_rng), tensor("y", DType::kU8, {5}, seed_rng),
                           tensor("z", DType::kBool, {0}, seed_rng), tensor("w", DType::kF64, {1, 1}, seed_rng)},
                          "b"),
  };
  for (const auto& b : bases) ASSERT_TRUE(SafetensorsFile::parse(b.data(), b.size(), "base", nullptr).ok());
  std::mt19937_64 rng(20261205);
  int errors = 0, parsed = 0;
  uint64_t checksum = 0;
  const int n = cases(20000);
  for (int i = 0; i < n; ++i) {
    const std::vector<uint8_t>& base = bases[static_cast<size_t>(i) % bases.size()];
    uint64_t header_len = 0;
    std::memcpy(&header_len, base.data(), 8);
    const std::string header(reinterpret_cast<const char*>(base.data()) + 8, header_len);
    const std::vector<uint8_t> data(base.begin() + 8 + static_cast<int64_t>(header_len), base.end());
    std::vector<uint8_t> mutant;
    switch (rng() % 4) {
      case 0: {  // the length field
        mutant = base;
        const uint64_t values[] = {0,          1,           7,     header_len - 1, header_len + 1, header_len + 8,
                                   base.size(), ~0ull,      1ull << 62, kMaxSafetensorsHeaderBytes + 1, rng()};
        const uint64_t v = values[rng() % std::size(values)];
        std::memcpy(mutant.data(), &v, 8);
        break;
      }
      case 1: {  // the header's text, its length kept consistent or not
        std::string h = header;
        const char* tokens[] = {"null", "-1", "1e309", "18446744073709551616", "\xff", "[[[[[[[[", "\"F64\"",
                                "\"__metadata__\"", "{}", ",", "\"", "0"};
        for (int e = 0, edits = 1 + static_cast<int>(rng() % 3); e < edits && !h.empty(); ++e) {
          const size_t at = static_cast<size_t>(rng() % h.size());
          switch (rng() % 4) {
            case 0: h[at] = static_cast<char>(rng()); break;
            case 1: h.insert(at, tokens[rng() % std::size(tokens)]); break;
            case 2: h.erase(at, static_cast<size_t>(1 + rng() % 8)); break;
            case 3: h.resize(at); break;
          }
        }
        mutant = with_header(h, data, rng() % 4 != 0);
        break;
      }
      case 2: {  // one field of the JSON replaced or deleted (dtype, shape, offsets, metadata)
        nlohmann::json j = nlohmann::json::parse(header);
        auto it = j.begin();
        std::advance(it, static_cast<int64_t>(rng() % j.size()));
        const char* fields[] = {"dtype", "shape", "data_offsets"};
        if (it.key() == "__metadata__" || rng() % 6 == 0) {
          j[it.key()] = odd_header_value(rng);
        } else if (rng() % 5 == 0) {
          it->erase(fields[rng() % 3]);
        } else {
          (*it)[fields[rng() % 3]] = odd_header_value(rng);
        }
        mutant = with_header(j.dump(), data, true);
        break;
      }
      default: {  // the data region cut or grown, or a tensor duplicated under another name
        nlohmann::json j = nlohmann::json::parse(header);
        std::vector<uint8_t> d = data;
        if (rng() % 2 == 0) {
          d.resize(static_cast<size_t>(rng() % (d.size() + 16)));
        } else {
          auto it = j.begin();
          std::advance(it, static_cast<int64_t>(rng() % j.size()));
          j["copy"] = *it;
        }
        mutant = with_header(j.dump(), d, true);
        break;
      }
    }
    // An exactly sized copy: AddressSanitizer sees any read past the end.
    const std::vector<uint8_t> exact(mutant);
    auto f = SafetensorsFile::parse(exact.data(), exact.size(), "mutant.safetensors", nullptr);
    if (!f.ok()) {
      EXPECT_FALSE(f.status().message().empty());
      ++errors;
      continue;
    }
    ++parsed;
    for (const TensorView& t : f->tensors()) {
      EXPECT_EQ(t.nbytes, static_cast<size_t>(t.numel()) * dtype_size(t.dtype)) << t.name;
      ASSERT_TRUE(t.nbytes == 0 || (t.data >= exact.data() && t.data + t.nbytes <= exact.data() + exact.size()))
          << t.name;
      for (size_t k = 0; k < t.nbytes; ++k) checksum += t.data[k];  // every byte of the view is readable
    }
  }
  std::cout << "[ mutation ] " << n << " safetensors mutants: " << errors << " errors, " << parsed
            << " parsed (checksum " << checksum << ")\n";
  EXPECT_EQ(errors + parsed, n);
  EXPECT_GT(errors, n / 2) << "the mutations must reach the parser's checks";
  EXPECT_GT(parsed, n / 50);
}

}  // namespace
}  // namespace rlt::io
