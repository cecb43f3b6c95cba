// A read-only memory mapping of a whole file. Checkpoint weights are used in place from the
// mapping, so a model's resident memory is the page cache, shared between processes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "rlt/status.h"

namespace rlt {

class MappedFile {
 public:
  static Result<std::shared_ptr<MappedFile>> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Drops the whole pages of [p, p + n) from this process's resident memory once their bytes have
  // been copied elsewhere (packed weights). They stay readable: a later access reads them again
  // from the page cache or the file. Ranges outside the mapping are ignored.
  void release(const void* p, size_t n) const;

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace rlt
