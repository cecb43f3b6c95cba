// How much of the machine's CPU other processes are using, so that the CPU engine can use fewer
// threads while they do. Why: the kernels split each matrix product statically across an OpenMP
// team that spins at its barriers; when another process keeps a core busy, every product waits
// for whichever worker the kernel descheduled, and throughput collapses (measured on 2 cores with
// one busy-loop process beside the server: 360 -> 41 tokens/s with 2 threads, while 1 thread held
// 192). Results do not depend on the thread count (one fixed reduction order), so the count may
// change between batches freely.
//
// Linux: /proc/stat (the CPUs in the process's affinity mask) minus the process's own CPU time;
// elsewhere, or when /proc is unreadable, the monitor always answers the configured count.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace rlt {

// Busy and total time (in clock ticks) of the listed CPUs ("cpuN" lines) in a /proc/stat text;
// nullopt when a listed CPU has no line.
struct CpuTicks {
  int64_t busy = 0;
  int64_t total = 0;
};
std::optional<CpuTicks> parse_proc_stat(std::string_view text, const std::vector<int>& cpus);

// The thread count for `cpus` usable CPUs of which others keep `others_busy` (in CPUs) busy:
// what is left, rounded to the nearest whole CPU, between 1 and `max_threads` (`max_threads`
// itself when nothing is taken). Host-wide /proc/stat: a cgroup CPU quota is not seen, and
// another process's load on the same CPUs counts whoever it is.
int threads_for_share(int max_threads, int cpus, double others_busy);

class CpuShareMonitor {
 public:
  explicit CpuShareMonitor(int max_threads,
                           std::chrono::milliseconds interval = std::chrono::milliseconds(250));

  // The thread count for the next batch; samples the load at most once per interval (two
  // small /proc reads). A new count takes effect after two samples agree, so that a short
  // burst elsewhere does not make the engine flap.
  int threads();
  // CPUs the other processes kept busy, smoothed over the last samples (0 before the first).
  double others_busy() const { return others_; }
  int max_threads() const { return max_threads_; }

 private:
  struct Sample {
    std::chrono::steady_clock::time_point when;
    CpuTicks ticks;
    double own_seconds = 0.0;
  };
  std::optional<Sample> sample() const;

  int max_threads_;
  std::chrono::milliseconds interval_;
  std::vector<int> cpus_;  // the affinity mask's CPUs
  double seconds_per_tick_;
  std::optional<Sample> last_;
  double others_ = 0.0;
  int current_;
  int pending_ = -1;  // a count one sample proposed, waiting for the next to agree
};

}  // namespace rlt
