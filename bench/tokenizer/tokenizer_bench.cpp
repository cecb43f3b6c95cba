// Encode / decode throughput of rlt's tokenizer against Hugging Face tokenizers, on the same
// generated corpus in the same run, single-threaded on both sides.
//
//   rlt_tokenizer_bench [--mb N] [--repeats R] TOKENIZER_JSON...
//
// Defaults: every *.tokenizer.json among the shared fixtures that HF can load. For each file
// the Python side (tools/tokenizer_oracle_bench.py, project venv) writes the corpus and reports
// its own timings; rlt then encodes and decodes the same documents one call each. Prints MB/s
// (input bytes per second for encode, output bytes per second for decode) and the ratio to HF.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;

std::string source_dir() {
  if (const char* env = std::getenv("RLT_SOURCE_DIR")) return env;
  return RLT_SOURCE_DIR;
}

std::string run(const std::string& cmd, int& status) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) {
    status = -1;
    return out;
  }
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  status = pclose(p);
  return out;
}

std::vector<std::string> read_docs(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string all = ss.str();
  std::vector<std::string> docs;
  size_t start = 0;
  while (start <= all.size()) {
    size_t end = all.find('\0', start);
    if (end == std::string::npos) end = all.size();
    docs.push_back(all.substr(start, end - start));
    start = end + 1;
  }
  return docs;
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

int bench_one(const std::string& path, double mb, int repeats) {
  const std::string name = std::filesystem::path(path).filename().string();
  const std::string corpus = (std::filesystem::temp_directory_path() /
                              ("rlt_tokenizer_bench_" + std::to_string(getpid()) + ".txt"))
                                 .string();
  struct RemoveOnExit {
    std::string path;
    ~RemoveOnExit() { std::filesystem::remove(path); }
  } remove_corpus{corpus};
  int status = 0;
  const std::string py = source_dir() + "/.venv/bin/python";
  const std::string out =
      run(fmt::format("'{}' '{}/tools/tokenizer_oracle_bench.py' --tokenizer '{}' "
                      "--corpus '{}' --mb {} --repeats {} 2>&1",
                      py, source_dir(), path, corpus, mb, repeats),
          status);
  nlohmann::json hf;
  try {
    hf = nlohmann::json::parse(out.substr(out.rfind('{')));
  } catch (...) {
    fmt::print("{:<38} skipped: the HF side failed: {}\n", name, out.substr(0, 300));
    return 0;
  }
  if (hf.contains("error")) {
    fmt::print("{:<38} skipped: HF cannot load it ({})\n", name, hf["error"].get<std::string>());
    return 0;
  }
  const std::vector<std::string> docs = read_docs(corpus);
  const auto t_load = Clock::now();
  auto loaded = rlt::tok::Tokenizer::from_file(path);
  const double load_s = seconds_since(t_load);
  if (!loaded.ok()) {
    fmt::print("{:<38} rlt cannot load it: {}\n", name, loaded.status().to_string());
    return 1;
  }
  const auto& tok = **loaded;
  std::vector<std::vector<int32_t>> ids(docs.size());
  double best_enc = 1e30, best_dec = 1e30;
  size_t tokens = 0, decoded_bytes = 0;
  for (int r = 0; r < repeats; ++r) {
    auto t0 = Clock::now();
    tokens = 0;
    for (size_t i = 0; i < docs.size(); ++i) {
      ids[i] = *tok.encode(docs[i], false);
      tokens += ids[i].size();
    }
    best_enc = std::min(best_enc, seconds_since(t0));
    t0 = Clock::now();
    decoded_bytes = 0;
    for (const auto& doc_ids : ids) decoded_bytes += tok.decode(doc_ids, false)->size();
    best_dec = std::min(best_dec, seconds_since(t0));
  }
  const double bytes = hf["bytes"].get<double>();
  const double enc = bytes / best_enc / 1e6;
  const double dec = static_cast<double>(decoded_bytes) / best_dec / 1e6;
  const double hf_enc = bytes / hf["encode_s"].get<double>() / 1e6;
  const double hf_dec = hf["decoded_bytes"].get<double>() / hf["decode_s"].get<double>() / 1e6;
  fmt::print(
      "{:<38} {:>7.2f} MB {:>9} tok | encode {:>6.1f} MB/s (HF {:>5.1f}, x{:.2f}) | "
      "decode {:>6.1f} MB/s (HF {:>5.1f}, x{:.2f}) | load {:.2f} s{}\n",
      name, bytes / 1e6, tokens, enc, hf_enc, enc / hf_enc, dec, hf_dec, dec / hf_dec, load_s,
      tokens == hf["tokens"].get<size_t>() ? "" : "  [token counts differ!]");
  return tokens == hf["tokens"].get<size_t>() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  double mb = 4;
  int repeats = 3;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--mb" && i + 1 < argc) {
      mb = std::atof(argv[++i]);
    } else if (a == "--repeats" && i + 1 < argc) {
      repeats = std::atoi(argv[++i]);
    } else {
      files.push_back(a);
    }
  }
  if (files.empty()) {
    const std::string dir = source_dir() + "/../shared/fixtures/tokenizers";
    if (std::filesystem::is_directory(dir)) {
      for (const auto& e : std::filesystem::directory_iterator(dir)) {
        if (e.path().string().ends_with(".tokenizer.json")) files.push_back(e.path().string());
      }
    }
    std::sort(files.begin(), files.end());
  }
  if (files.empty()) {
    fmt::print("no tokenizer.json given and no shared fixtures found\n");
    return 2;
  }
  fmt::print("single-threaded, best of {} passes over a {} MB generated corpus; HF via {}/.venv\n",
             repeats, mb, source_dir());
  int failures = 0;
  for (const auto& f : files) failures += bench_one(f, mb, repeats);
  return failures == 0 ? 0 : 1;
}
