#include "oracle_support.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/utf8.h"
#include "tokenizer/decode_stream.h"
#include "tokenizer/tokenizer.h"

namespace rlt::tok::testing {

std::string source_dir() {
  if (const char* env = std::getenv("RLT_SOURCE_DIR")) return env;
  return RLT_SOURCE_DIR;
}

std::string fixtures_dir() {
  return source_dir() + "/../shared/fixtures";
}

bool path_exists(const std::string& path) {
  return std::filesystem::exists(path);
}

std::optional<std::string> venv_python() {
  const std::string py = source_dir() + "/.venv/bin/python";
  if (!path_exists(py)) return std::nullopt;
  return py;
}

std::string make_workdir(const std::string& name) {
  // The pid keeps concurrent runs (several build trees, ctest -j) apart.
  const std::string dir =
      ::testing::TempDir() + "rlt_tokenizer_" + name + "_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

int run_python(const std::string& script, const std::string& args, std::string& output) {
  const auto py = venv_python();
  if (!py) return -1;
  const std::string cmd =
      "'" + *py + "' '" + source_dir() + "/tools/" + script + "' " + args + " 2>&1";
  output.clear();
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return -1;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) output.append(buf.data(), n);
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::vector<nlohmann::ordered_json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::ordered_json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) out.push_back(nlohmann::ordered_json::parse(line));
  }
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string from_hex(const std::string& hex) {
  std::string out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

std::string escape(const std::string& s) {
  std::string out;
  const size_t limit = 300;
  for (size_t i = 0; i < s.size() && i < limit; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\\') {
      out += "\\\\";
    } else if (c >= 0x20 && c < 0x7F) {
      out.push_back(static_cast<char>(c));
    } else {
      char b[8];
      std::snprintf(b, sizeof(b), "\\x%02x", c);
      out += b;
    }
  }
  if (s.size() > limit) out += "...(" + std::to_string(s.size()) + " bytes)";
  return out;
}

std::string ids_to_string(const std::vector<int32_t>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size() && i < 80; ++i) {
    if (i) out += ",";
    out += std::to_string(ids[i]);
  }
  if (ids.size() > 80) out += ",...";
  return out + "]";
}

namespace {

// Where two id sequences first differ, with the tokens around that point.
std::string first_difference(const Tokenizer& tok, const std::vector<int32_t>& want,
                             const std::vector<int32_t>& got) {
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  auto window = [&](const std::vector<int32_t>& ids) {
    std::string out;
    for (size_t k = i >= 3 ? i - 3 : 0; k < ids.size() && k < i + 6; ++k) {
      out += std::to_string(ids[k]) + "'" + escape(tok.id_to_token(ids[k]).value_or("?")) + "' ";
    }
    return out;
  };
  return "first difference at id " + std::to_string(i) + "\n  want " + window(want) + "\n  got  " +
         window(got);
}

struct Mismatches {
  int count = 0;
  std::string examples;
  void add(const std::string& what) {
    if (++count <= 5) examples += what + "\n";
  }
};

// Runs the oracle for `spec` in `workdir`; returns false (with the reason) when HF refused it.
}  // namespace

bool run_oracle(const std::string& spec, const std::string& workdir, std::string& hf_error, int count) {
  std::string out;
  const int rc = testing::run_python(
      "tokenizer_oracle.py",
      "--tokenizer '" + spec + "' --workdir '" + workdir + "' --count " + std::to_string(count),
      out);
  EXPECT_EQ(rc, 0) << "oracle failed for " << spec << ":\n" << out;
  if (testing::path_exists(workdir + "/error.txt")) {
    hf_error = testing::read_file(workdir + "/error.txt");
    return false;
  }
  return rc == 0;
}

void compare_with_oracle(const std::string& workdir, int count) {
  auto loaded = Tokenizer::from_file(workdir + "/tokenizer.json");
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  compare_with_oracle(workdir, count, *loaded);
}

void compare_with_oracle(const std::string& workdir, int count, std::shared_ptr<const Tokenizer> loaded) {
  const Tokenizer& tok = *loaded;
  const auto cases = testing::read_jsonl(workdir + "/cases.jsonl");
  ASSERT_GE(cases.size(), static_cast<size_t>(count));
  Mismatches enc, dec, stream;
  int encoded = 0;
  for (const auto& c : cases) {
    std::vector<int32_t> ids;
    if (c.contains("hex")) {
      ++encoded;
      const std::string input = testing::from_hex(c["hex"].get<std::string>());
      const auto want = c["ids"].get<std::vector<int32_t>>();
      const auto want_plain = c["ids_plain"].get<std::vector<int32_t>>();
      auto got = tok.encode(input, true);
      auto got_plain = tok.encode(input, false);
      if (!got.ok() || *got != want) {
        enc.add("input \"" + escape(input) + "\"\n  " +
                (got.ok() ? first_difference(tok, want, *got) : got.status().to_string()));
      } else if (!got_plain.ok() || *got_plain != want_plain) {
        enc.add("(no specials) input \"" + escape(input) + "\"\n  want " +
                ids_to_string(want_plain) + "\n  got  " +
                (got_plain.ok() ? ids_to_string(*got_plain) : got_plain.status().to_string()));
      }
      ids = want;
    } else {
      ids = c["decode_ids"].get<std::vector<int32_t>>();
    }
    for (bool skip : {false, true}) {
      const std::string want = c[skip ? "dec_skip" : "dec"].get<std::string>();
      auto got = tok.decode(ids, skip);
      if (!got.ok() || *got != want) {
        dec.add(std::string("ids ") + ids_to_string(ids) + (skip ? " (skip special)" : "") +
                "\n  want \"" + escape(want) + "\"\n  got  \"" +
                (got.ok() ? escape(*got) : got.status().to_string()) + "\"");
      }
      // Streaming: pieces are complete UTF-8 and join to HF's decode.
      IncrementalDetokenizer detok(loaded, skip);
      std::string joined;
      bool valid = true;
      for (int32_t id : ids) {
        const std::string piece = detok.push(id);
        valid = valid && utf8::is_valid(piece);
        joined += piece;
      }
      joined += detok.flush();
      if (!valid || joined != want) {
        stream.add(std::string("ids ") + ids_to_string(ids) + (skip ? " (skip special)" : "") +
                   (valid ? "" : " (invalid UTF-8 piece)") + "\n  want \"" + escape(want) +
                   "\"\n  got  \"" + escape(joined) + "\"");
      }
    }
  }
  EXPECT_GE(encoded, count);
  EXPECT_EQ(enc.count, 0) << enc.count << " of " << encoded << " inputs encode differently:\n"
                          << enc.examples;
  EXPECT_EQ(dec.count, 0) << dec.count << " decodes differ:\n" << dec.examples;
  EXPECT_EQ(stream.count, 0) << stream.count << " streamed decodes differ:\n" << stream.examples;
}


}  // namespace rlt::tok::testing
