#include "model/packed_cache.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/log.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/linear_bf16.h"
#include "kernels/cpu/linear_quant_int8.h"

namespace rlt::model {
namespace {

using json = nlohmann::json;
using kernels::PackedMatrix;

constexpr char kMagic[8] = {'R', 'L', 'T', 'P', 'A', 'C', 'K', '1'};
// Bump when a packed layout changes meaning without changing its descriptor.
constexpr int kLayoutVersion = 5;  // 3: 4-bit quants in column octets; 4, 5: Q5_K, Q6_K fields
// Each matrix starts on a page: a view of the mapping is then aligned for every kernel.
constexpr uint64_t kAlignment = 4096;
constexpr uint64_t kPrefixBytes = 24;  // magic, header length, header hash
// A header beyond this is not one rlt wrote.
constexpr uint64_t kMaxHeaderBytes = 64ull << 20;

uint64_t align_up(uint64_t n) {
  return (n + kAlignment - 1) / kAlignment * kAlignment;
}

// What may change under the same file name: a file's identity as the file system sees it.
Result<json> file_identity(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return io_error(fmt::format("cannot stat '{}': {}", path, std::strerror(errno)));
  return json{
      {"path", path},
      {"size", static_cast<int64_t>(st.st_size)},
      {"mtime_ns", static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec},
      {"inode", static_cast<uint64_t>(st.st_ino)},
      {"device", static_cast<uint64_t>(st.st_dev)}};
}

json descriptor_json(const std::string& name, const PackedMatrix::Descriptor& d, uint64_t offset,
                     uint64_t bytes, uint64_t hash) {
  json panels = json::array();
  for (const auto& qp : d.quant_panels) panels.push_back({static_cast<int>(qp.type), qp.offset});
  return {{"name", name},
          {"dtype", static_cast<int>(d.dtype)},
          {"epilogue", static_cast<int>(d.epilogue)},
          {"layout", static_cast<int>(d.layout)},
          {"outputs", d.outputs},
          {"cols", d.cols},
          {"panels", d.panels},
          {"quant_bytes", d.quant_bytes},
          {"quant_panels", panels},
          {"offset", offset},
          {"bytes", bytes},
          {"xxh3", hash}};
}

PackedMatrix::Descriptor descriptor_from(const json& m) {
  PackedMatrix::Descriptor d;
  d.dtype = static_cast<DType>(m.at("dtype").get<int>());
  d.epilogue = static_cast<PackedMatrix::Epilogue>(m.at("epilogue").get<int>());
  d.layout = static_cast<PackedMatrix::Layout>(m.at("layout").get<int>());
  d.outputs = m.at("outputs").get<int64_t>();
  d.cols = m.at("cols").get<int64_t>();
  d.panels = m.at("panels").get<int64_t>();
  d.quant_bytes = m.at("quant_bytes").get<int64_t>();
  for (const json& qp : m.at("quant_panels"))
    d.quant_panels.push_back(
        {static_cast<quant::GgmlType>(qp.at(0).get<int>()), qp.at(1).get<int64_t>()});
  return d;
}

Status write_all(int fd, const void* data, size_t n, uint64_t offset, const std::string& path) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return io_error(fmt::format("cannot write '{}': {}", path, std::strerror(errno)));
    p += w, n -= static_cast<size_t>(w), offset += static_cast<uint64_t>(w);
  }
  return Status::ok_status();
}

// The header's checks, then every matrix's; views over `file` on success.
Result<std::vector<PackedMatrix>> parse_cache(const std::shared_ptr<MappedFile>& file,
                                              const PackedCacheKey& key,
                                              const std::vector<PackedSlot>& slots) {
  const uint8_t* base = file->data();
  const uint64_t size = file->size();
  if (size < kPrefixBytes || std::memcmp(base, kMagic, sizeof kMagic) != 0)
    return data_loss("not an rlt packed-weight cache (bad magic)");
  uint64_t header_bytes = 0, header_hash = 0;
  std::memcpy(&header_bytes, base + 8, 8);
  std::memcpy(&header_hash, base + 16, 8);
  if (header_bytes > kMaxHeaderBytes || header_bytes > size - kPrefixBytes)
    return data_loss(
        fmt::format("header of {} bytes does not fit the {}-byte file", header_bytes, size));
  const char* text = reinterpret_cast<const char*>(base + kPrefixBytes);
  if (XXH3_64bits(text, header_bytes) != header_hash) return data_loss("header checksum mismatch");
  const json header = json::parse(text, text + header_bytes, nullptr, /*allow_exceptions=*/false);
  if (!header.is_object() || !header.contains("identity") || !header.contains("matrices"))
    return data_loss("header is not the expected JSON object");
  if (header["identity"].dump() != json::parse(key.identity).dump())
    return failed_precondition(
        "stale: written for another version of the model files, options or rlt build");
  const json& list = header["matrices"];
  if (!list.is_array() || list.size() != slots.size())
    return data_loss(
        fmt::format("{} matrices recorded, the model has {}", list.size(), slots.size()));
  std::vector<PackedMatrix> out(slots.size());
  std::vector<uint64_t> offsets(slots.size()), lengths(slots.size()), hashes(slots.size());
  try {
    for (size_t i = 0; i < slots.size(); ++i) {
      const json& m = list[i];
      const PackedSlot& s = slots[i];
      if (m.at("name").get<std::string>() != s.name)
        return data_loss(fmt::format("matrix {} is '{}', expected '{}'", i,
                                     m.at("name").get<std::string>(), s.name));
      const PackedMatrix::Descriptor d = descriptor_from(m);
      if (d.outputs != s.outputs || d.cols != s.cols || d.epilogue != s.epilogue)
        return data_loss(fmt::format("'{}' is [{}, {}], the model's is [{}, {}]", s.name, d.outputs,
                                     d.cols, s.outputs, s.cols));
      offsets[i] = m.at("offset").get<uint64_t>();
      lengths[i] = m.at("bytes").get<uint64_t>();
      hashes[i] = m.at("xxh3").get<uint64_t>();
      if (offsets[i] % kAlignment != 0 || offsets[i] > size || lengths[i] > size - offsets[i])
        return data_loss(
            fmt::format("'{}' lies outside the {}-byte file (truncated?)", s.name, size));
      std::shared_ptr<const void> view(file, base + offsets[i]);
      auto matrix = PackedMatrix::from_bytes(d, std::move(view), static_cast<int64_t>(lengths[i]));
      if (!matrix.ok()) return matrix.status().with_context(s.name);
      out[i] = std::move(matrix).value();
    }
  } catch (const json::exception& e) {
    return data_loss(fmt::format("malformed matrix entry: {}", e.what()));
  }
  // The bytes last: the checks above are cheap, this reads the whole file.
  std::vector<char> bad(slots.size(), 0);
#pragma omp parallel for schedule(dynamic)
  for (size_t i = 0; i < slots.size(); ++i)
    bad[i] = XXH3_64bits(base + offsets[i], lengths[i]) != hashes[i];
  for (size_t i = 0; i < slots.size(); ++i)
    if (bad[i])
      return data_loss(fmt::format("the bytes of '{}' do not match their checksum", slots[i].name));
  return out;
}

// Deletes the folder's least recently used cache files (by modification time: a hit touches its
// file) while all of them take more than the budget; `keep` (just written) stays.
void evict_beyond_budget(const std::filesystem::path& keep) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<std::pair<fs::file_time_type, fs::path>> files;
  uint64_t total = 0;
  for (const auto& e : fs::directory_iterator(keep.parent_path(), ec)) {
    if (e.path().extension() != ".rltpack") continue;
    total += e.file_size(ec);
    if (e.path() != keep) files.push_back({e.last_write_time(ec), e.path()});
  }
  std::sort(files.begin(), files.end());
  for (const auto& [_, path] : files) {
    if (total <= static_cast<uint64_t>(kPackedCacheBudgetBytes)) break;
    const uint64_t size = fs::file_size(path, ec);
    if (fs::remove(path, ec)) {
      total -= size;
      log_info(
          fmt::format("packed-weight cache: removed the least recently used '{}' (the folder "
                      "keeps {:.0f} GiB)",
                      path.string(), static_cast<double>(kPackedCacheBudgetBytes) / (1 << 30)));
    }
  }
}

}  // namespace

Result<PackedCacheKey> packed_cache_key(const std::string& cache_dir,
                                        const std::string& source_path,
                                        const std::vector<std::string>& files,
                                        const std::string& options) {
  std::error_code ec;
  const std::filesystem::path source = std::filesystem::weakly_canonical(source_path, ec);
  const json stable = {
      {"source", ec ? source_path : source.string()},
      {"options", json::parse(options)},
      {"cpu",
       {{"target", kernels::cpu_dispatch_target()},
        {"int8", kernels::linear_quant_int8_supported() ? kernels::linear_quant_int8_kernel() : ""},
        {"bf16_dot", kernels::bf16_dot_supported()}}}};
  json changing = {{"layout_version", kLayoutVersion}};
  for (const std::string& f : files) {
    RLT_ASSIGN_OR_RETURN(json id, file_identity(f));
    changing["files"].push_back(std::move(id));
  }
  // Any rebuild of rlt may change a layout: the binary's own identity is part of the record.
  std::string exe = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (!ec) {
    RLT_ASSIGN_OR_RETURN(json id, file_identity(exe));
    changing["binary"] = std::move(id);
  }
  const std::string stable_text = stable.dump();
  std::string name =
      (source.has_filename() ? source.filename() : source.parent_path().filename()).string();
  if (name.empty()) name = "model";
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  PackedCacheKey key;
  key.path =
      (std::filesystem::path(cache_dir) /
       fmt::format("{}-{:016x}.rltpack", name, XXH3_64bits(stable_text.data(), stable_text.size())))
          .string();
  key.identity = json{{"stable", stable}, {"changing", changing}}.dump();
  return key;
}

Status read_packed_cache(const PackedCacheKey& key, const std::vector<PackedSlot>& slots) {
  if (!std::filesystem::exists(key.path)) return not_found("no cache file yet");
  RLT_ASSIGN_OR_RETURN(auto file, MappedFile::open(key.path));
  RLT_ASSIGN_OR_RETURN(std::vector<PackedMatrix> matrices, parse_cache(file, key, slots));
  for (size_t i = 0; i < slots.size(); ++i) *slots[i].matrix = std::move(matrices[i]);
  // Recently used (budget eviction goes by modification time).
  ::utimensat(AT_FDCWD, key.path.c_str(), nullptr, 0);
  return Status::ok_status();
}

Status write_packed_cache(const PackedCacheKey& key, const std::vector<PackedSlot>& slots) {
  std::error_code ec;
  const std::filesystem::path target(key.path);
  std::filesystem::create_directories(target.parent_path(), ec);
  if (ec)
    return io_error(
        fmt::format("cannot create '{}': {}", target.parent_path().string(), ec.message()));
  uint64_t total = 0;
  for (const PackedSlot& s : slots) total += align_up(static_cast<uint64_t>(s.matrix->bytes()));
  const std::filesystem::space_info space = std::filesystem::space(target.parent_path(), ec);
  constexpr uint64_t kKeepFree = uint64_t{1} << 30;
  if (!ec && space.available < total + kKeepFree) {
    return resource_exhausted(
        fmt::format("{:.1f} GiB free in '{}', the cache takes {:.1f} GiB and 1 GiB is kept free",
                    static_cast<double>(space.available) / (1 << 30), target.parent_path().string(),
                    static_cast<double>(total) / (1 << 30)));
  }
  for (const PackedSlot& slot : slots) {
    if (slot.matrix->pending_rows() != nullptr)
      return internal_error(fmt::format("'{}' is not packed yet; nothing to cache", slot.name));
  }
  std::vector<uint64_t> hashes(slots.size());
#pragma omp parallel for schedule(dynamic)
  for (size_t i = 0; i < slots.size(); ++i) {
    const PackedMatrix& m = *slots[i].matrix;
    hashes[i] = XXH3_64bits(m.data(), static_cast<size_t>(m.bytes()));
  }
  // The header's length decides where the data starts, and the offsets are in the header: the
  // data goes after a bound on the header (a quantized matrix lists each of its panels), and a
  // header that outgrows it is laid out again after a bound that holds it.
  uint64_t header_bound = 4096 + 512 * slots.size();
  for (const PackedSlot& slot : slots)
    header_bound += 32 * slot.matrix->descriptor().quant_panels.size();
  std::vector<uint64_t> offsets;
  std::string header;
  uint64_t offset = 0;
  for (;;) {
    offset = align_up(kPrefixBytes + header_bound);
    json list = json::array();
    offsets.clear();
    for (size_t i = 0; i < slots.size(); ++i) {
      const PackedMatrix& m = *slots[i].matrix;
      offsets.push_back(offset);
      list.push_back(descriptor_json(slots[i].name, m.descriptor(), offset,
                                     static_cast<uint64_t>(m.bytes()), hashes[i]));
      offset = align_up(offset + static_cast<uint64_t>(m.bytes()));
    }
    header = json{{"identity", json::parse(key.identity)}, {"matrices", list}}.dump();
    if (header.size() <= header_bound) break;
    header_bound = header.size() + header.size() / 8;  // offsets may gain digits
  }
  if (header.size() > kMaxHeaderBytes)
    return resource_exhausted(fmt::format(
        "the packed cache's header would take {} bytes, more than the {} a reader accepts",
        header.size(), kMaxHeaderBytes));
  const std::string temp = fmt::format("{}.tmp.{}", key.path, ::getpid());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return io_error(fmt::format("cannot create '{}': {}", temp, std::strerror(errno)));
  uint8_t prefix[kPrefixBytes];
  const uint64_t header_bytes = header.size(),
                 header_hash = XXH3_64bits(header.data(), header.size());
  std::memcpy(prefix, kMagic, 8);
  std::memcpy(prefix + 8, &header_bytes, 8);
  std::memcpy(prefix + 16, &header_hash, 8);
  Status st = write_all(fd, prefix, sizeof prefix, 0, temp);
  if (st.ok()) st = write_all(fd, header.data(), header.size(), kPrefixBytes, temp);
  for (size_t i = 0; i < slots.size() && st.ok(); ++i)
    st = write_all(fd, slots[i].matrix->data(), static_cast<size_t>(slots[i].matrix->bytes()),
                   offsets[i], temp);
  if (st.ok() && ::ftruncate(fd, static_cast<off_t>(offset)) != 0)
    st = io_error(fmt::format("cannot size '{}': {}", temp, std::strerror(errno)));
  if (::close(fd) != 0 && st.ok())
    st = io_error(fmt::format("cannot write '{}': {}", temp, std::strerror(errno)));
  if (st.ok() && std::rename(temp.c_str(), key.path.c_str()) != 0)
    st = io_error(
        fmt::format("cannot rename '{}' to '{}': {}", temp, key.path, std::strerror(errno)));
  if (!st.ok()) {
    std::filesystem::remove(temp, ec);
    return st;
  }
  evict_beyond_budget(target);
  return st;
}

BackgroundCacheWrite::BackgroundCacheWrite(PackedCacheKey key, std::vector<PackedSlot> slots)
    : thread_([this, key = std::move(key), slots = std::move(slots)] {
        const auto start = std::chrono::steady_clock::now();
        result_ = write_packed_cache(key, slots);
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (result_.ok()) {
          log_info(fmt::format("packed-weight cache written in {:.2f} s: {}", s, key.path));
        } else {
          log_warn(fmt::format("packed-weight cache not written ({}); the next start packs again",
                               result_.message()));
        }
      }) {}

BackgroundCacheWrite::~BackgroundCacheWrite() {
  (void)wait();
}

Status BackgroundCacheWrite::wait() {
  if (thread_.joinable()) thread_.join();
  return result_;
}

}  // namespace rlt::model
