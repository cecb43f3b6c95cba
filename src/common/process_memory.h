// The process's and the machine's memory as the kernel reports it (/proc, cgroup v2): for the
// startup log's resident figures and for refusing a model that cannot fit before loading it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace rlt {

struct ProcessMemory {
  int64_t resident = 0;       // VmRSS
  int64_t peak_resident = 0;  // VmHWM
  int64_t resident_file = 0;  // RssFile: file pages mapped in (checkpoint, packed cache)
  int64_t resident_anon = 0;  // RssAnon: the process's own memory (packed weights, KV in use)
};

// Zeros where /proc is not readable.
ProcessMemory process_memory();

// Memory a new allocation can get without swapping or the kernel's OOM killer: the smaller of
// /proc/meminfo's MemAvailable and what the process's cgroup limit leaves; nullopt when neither
// is known.
std::optional<int64_t> available_memory();

// "1.23 GiB" / "456.7 MiB".
std::string format_bytes(int64_t bytes);

}  // namespace rlt
