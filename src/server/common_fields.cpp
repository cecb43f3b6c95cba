// The request fields /v1/completions and /v1/chat/completions share.
#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "server/request_parser.h"

namespace rlt::server {
namespace {

constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int kIntMax = std::numeric_limits<int>::max();
constexpr int kIntMin = std::numeric_limits<int>::min();

void read_stop(FieldReader& r, const ParseLimits& limits, GenerationRequest* out) {
  const json* v = r.find("stop");
  if (v == nullptr || !r.ok()) return;
  auto add = [&](const json& s) {
    if (!s.is_string())
      return r.fail(invalid_request(
          fmt::format("'stop' must be a string or a list of strings, got {}", describe_value(s)),
          "stop"));
    std::string text = s.get<std::string>();
    if (text.empty()) return r.fail(invalid_request("'stop' strings must not be empty", "stop"));
    out->stop.push_back(std::move(text));
    return true;
  };
  if (v->is_string()) {
    add(*v);
    return;
  }
  if (!v->is_array())
    return void(r.fail(invalid_request(
        fmt::format("'stop' must be a string or a list of strings, got {}", describe_value(*v)),
        "stop")));
  if (static_cast<int>(v->size()) > limits.max_stop)
    return void(r.fail(invalid_request(
        fmt::format("'stop' has {} strings; at most {} are allowed", v->size(), limits.max_stop),
        "stop")));
  for (const json& s : *v)
    if (!add(s)) return;
}

void read_stop_token_ids(FieldReader& r, GenerationRequest* out) {
  const json* v = r.find("stop_token_ids");
  if (v == nullptr || !r.ok()) return;
  if (!v->is_array())
    return void(
        r.fail(invalid_request("'stop_token_ids' must be a list of token ids", "stop_token_ids")));
  for (const json& t : *v) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
        t.get<int64_t>() > std::numeric_limits<int32_t>::max())
      return void(r.fail(invalid_request(
          fmt::format("'stop_token_ids' entries must be token ids, got {}", describe_value(t)),
          "stop_token_ids")));
    out->params.stop_token_ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
}

void read_stream(FieldReader& r, GenerationRequest* out) {
  r.read_bool("stream", &out->stream);
  const json* so = r.find("stream_options");
  if (so == nullptr || !r.ok()) return;
  if (!out->stream)
    return void(r.fail(invalid_request("'stream_options' is only allowed with \"stream\": true",
                                       "stream_options")));
  if (!so->is_object())
    return void(r.fail(invalid_request(
        fmt::format("'stream_options' must be an object, got {}", describe_value(*so)),
        "stream_options")));
  FieldReader options(*so);
  if (!options.only_known({"include_usage"}) ||
      !options.read_bool("include_usage", &out->include_usage)) {
    ApiError e = *options.error();
    e.message = "stream_options: " + e.message;
    e.param = "stream_options";
    r.fail(std::move(e));
  }
}

}  // namespace

// OpenAI's {"token id": bias}: keys are decimal token ids, values numbers. The vocabulary and
// the [-100, 100] range are SamplingParams' checks (with the model, in the prompt builder).
static void read_logit_bias(FieldReader& r, SamplingParams* p) {
  const json* v = r.find("logit_bias");
  if (!r.ok() || v == nullptr) return;
  if (!v->is_object())
    return void(
        r.fail(invalid_request(fmt::format("'logit_bias' must be an object mapping token ids to "
                                           "biases, got {}",
                                           describe_value(*v)),
                               "logit_bias")));
  if (v->size() > SamplingParams::kMaxLogitBias)
    return void(
        r.fail(invalid_request(fmt::format("'logit_bias' holds {} tokens; at most {} are accepted",
                                           v->size(), SamplingParams::kMaxLogitBias),
                               "logit_bias")));
  for (const auto& [key, bias] : v->items()) {
    int64_t id = -1;
    const bool digits =
        !key.empty() && key.size() <= 10 &&
        std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (digits) id = std::stoll(key);
    if (!digits || id > std::numeric_limits<int32_t>::max())
      return void(r.fail(
          invalid_request(fmt::format("'logit_bias' keys are token ids (decimal integers), got "
                                      "\"{}\"",
                                      key.substr(0, 40)),
                          "logit_bias")));
    if (!bias.is_number())
      return void(r.fail(
          invalid_request(fmt::format("'logit_bias' values are numbers in [-100, 100], got {} for "
                                      "token {}",
                                      describe_value(bias), id),
                          "logit_bias")));
    p->logit_bias.emplace_back(static_cast<int32_t>(id), bias.get<float>());
  }
}

namespace {

// rlt's `speculative` object: {"method": "off" | "ngram" | "self", "num_tokens": K,
// "draft_loops": D}, each optional (absent: the server's --speculative-method and friends).
// Huginn's per-token exit criterion (rlt's extension beside min_loops / max_loops /
// exit_threshold): its name and optional threshold.
void read_exit_criterion(FieldReader& r, SamplingParams* p) {
  std::string name;
  if (r.read_string("exit_criterion", &name) && !name.empty()) {
    auto criterion = parse_exit_criterion(name);
    if (criterion.ok()) {
      p->exit_criterion = *criterion;
    } else {
      r.fail(invalid_request(fmt::format("'exit_criterion' \"{}\": {}", name, criterion.status().message()),
                             "exit_criterion"));
    }
  }
  double threshold = 0.0;
  if (r.find("exit_criterion_threshold") != nullptr && r.read_number("exit_criterion_threshold", &threshold))
    p->exit_criterion_threshold = threshold;
}

void read_speculative(FieldReader& r, SamplingParams* p) {
  const json* v = r.find("speculative");
  if (v == nullptr || !r.ok()) return;
  if (!v->is_object()) {
    r.fail(invalid_request(fmt::format("'speculative' must be an object such as {{\"method\": \"ngram\", "
                                       "\"num_tokens\": 4}}, got {}",
                                       describe_value(*v)),
                           "speculative"));
    return;
  }
  FieldReader sub(*v);
  SpeculativeParams s;
  sub.only_known({"method", "num_tokens", "draft_loops"});
  if (const json* m = sub.find("method"); m != nullptr && sub.ok()) {
    auto method = m->is_string() ? parse_speculative_method(m->get<std::string>())
                                 : Result<SpeculativeMethod>(invalid_argument("must be a string"));
    if (method.ok()) {
      s.method = *method;
    } else {
      sub.fail(invalid_request(fmt::format("'method' {}: {}", describe_value(*m), method.status().message()),
                               "method"));
    }
  }
  sub.read_int("num_tokens", &s.num_tokens, 0, SpeculativeConfig::kMaxTokens);
  sub.read_int("draft_loops", &s.draft_loops, 0, std::numeric_limits<int>::max());
  if (!sub.ok()) {
    ApiError e = *sub.error();
    e.message = "speculative: " + e.message;
    e.param = "speculative" + (e.param.empty() ? std::string() : "." + e.param);
    r.fail(std::move(e));
    return;
  }
  p->speculative = s;
}

}  // namespace

void read_common_fields(FieldReader& r, const ParseLimits& limits, GenerationRequest* out) {
  SamplingParams& p = out->params;
  const json* model = r.find("model");
  if (model == nullptr) {
    r.fail(invalid_request("'model' is required (GET /v1/models lists the served name)", "model"));
  } else if (!model->is_string() || model->get<std::string>().empty()) {
    r.fail(invalid_request(
        fmt::format("'model' must be a non-empty string, got {}", describe_value(*model)),
        "model"));
  } else {
    out->model = model->get<std::string>();
  }
  if (r.find("max_tokens") != nullptr) out->max_tokens_given = true;
  // 0 is OpenAI's legacy "score the prompt only" (with echo); completion_request checks that.
  r.read_int("max_tokens", &p.max_tokens, out->endpoint == Endpoint::kCompletions ? 0 : 1, kI64Max);
  r.read_number("temperature", &p.temperature);
  r.read_number("top_p", &p.top_p);
  r.read_int("top_k", &p.top_k, -1, kI64Max);
  r.read_number("min_p", &p.min_p);
  if (r.find("seed") != nullptr) {
    int64_t seed = 0;
    if (r.read_int("seed", &seed, 0, static_cast<int64_t>(SamplingParams::kMaxSeed)))
      p.seed = static_cast<uint64_t>(seed);
  }
  r.read_int("n", &out->n, 1, GenerationRequest::kMaxChoices);
  r.read_number("presence_penalty", &p.presence_penalty);
  r.read_number("frequency_penalty", &p.frequency_penalty);
  r.read_number("repetition_penalty", &p.repetition_penalty);
  read_logit_bias(r, &p);
  read_stop(r, limits, out);
  read_stop_token_ids(r, out);
  r.read_bool("ignore_eos", &p.ignore_eos);
  read_stream(r, out);
  std::string user;
  r.read_string("user", &user);  // accepted for compatibility; rlt does not use it
  r.read_int("min_loops", &p.min_loops, 1, kI64Max);
  r.read_int("max_loops", &p.max_loops, 1, kI64Max);
  r.read_number("exit_threshold", &p.exit_threshold);
  read_exit_criterion(r, &p);
  r.read_int("priority", &p.priority, kIntMin, kIntMax);
  read_speculative(r, &p);
  read_structured_outputs(r, out);
  // The remaining ranges (temperature >= 0, top_p in (0, 1], penalties, ...) are SamplingParams'
  // own rules, checked once with the model's vocabulary in the prompt builder.
}

}  // namespace rlt::server
