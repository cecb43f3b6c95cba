#include "common/cpu_share.h"

#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

namespace rlt {
namespace {

// Reads "cpuN f1 f2 ..." fields: user nice system idle iowait irq softirq steal (guest time is
// already inside user).
bool parse_cpu_line(std::string_view line, int* cpu, CpuTicks* ticks) {
  if (line.size() < 4 || line.substr(0, 3) != "cpu" || line[3] < '0' || line[3] > '9') return false;
  const char* p = line.data() + 3;
  const char* end = line.data() + line.size();
  auto r = std::from_chars(p, end, *cpu);
  if (r.ec != std::errc()) return false;
  p = r.ptr;
  int64_t f[8] = {};
  for (int64_t& v : f) {
    while (p < end && *p == ' ') ++p;
    r = std::from_chars(p, end, v);
    if (r.ec != std::errc()) return false;
    p = r.ptr;
  }
  const int64_t idle = f[3] + f[4];
  ticks->busy = f[0] + f[1] + f[2] + f[5] + f[6] + f[7];
  ticks->total = ticks->busy + idle;
  return true;
}

std::vector<int> affinity_cpus() {
  std::vector<int> cpus;
#ifdef __linux__
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
#endif
  return cpus;
}

}  // namespace

std::optional<CpuTicks> parse_proc_stat(std::string_view text, const std::vector<int>& cpus) {
  CpuTicks sum;
  size_t found = 0;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    const std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    int cpu = -1;
    CpuTicks t;
    if (!parse_cpu_line(line, &cpu, &t)) continue;
    if (std::find(cpus.begin(), cpus.end(), cpu) == cpus.end()) continue;
    sum.busy += t.busy;
    sum.total += t.total;
    ++found;
  }
  if (found != cpus.size() || cpus.empty()) return std::nullopt;
  return sum;
}

int threads_for_share(int max_threads, int cpus, double others_busy) {
  const double left = static_cast<double>(cpus) - std::max(0.0, others_busy);
  const int n = static_cast<int>(std::floor(left + 0.5));
  // Nothing taken: the configured count, even when it oversubscribes the CPUs on purpose.
  if (n >= cpus) return std::max(1, max_threads);
  return std::clamp(n, 1, std::max(1, max_threads));
}

CpuShareMonitor::CpuShareMonitor(int max_threads, std::chrono::milliseconds interval)
    : max_threads_(std::max(1, max_threads)),
      interval_(interval),
      cpus_(affinity_cpus()),
      seconds_per_tick_(1.0 / static_cast<double>(std::max<long>(1, sysconf(_SC_CLK_TCK)))),
      current_(max_threads_) {}

std::optional<CpuShareMonitor::Sample> CpuShareMonitor::sample() const {
  std::ifstream in("/proc/stat");
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  auto ticks = parse_proc_stat(text.str(), cpus_);
  if (!ticks) return std::nullopt;
  timespec own{};
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &own) != 0) return std::nullopt;
  return Sample{std::chrono::steady_clock::now(), *ticks,
                static_cast<double>(own.tv_sec) + static_cast<double>(own.tv_nsec) * 1e-9};
}

int CpuShareMonitor::threads() {
  if (max_threads_ == 1 || cpus_.empty()) return current_;
  const auto now = std::chrono::steady_clock::now();
  if (last_ && now - last_->when < interval_) return current_;
  const std::optional<Sample> s = sample();
  if (!s) return current_;
  if (last_) {
    const double wall = std::chrono::duration<double>(s->when - last_->when).count();
    const double busy = static_cast<double>(s->ticks.busy - last_->ticks.busy) * seconds_per_tick_;
    const double own = s->own_seconds - last_->own_seconds;
    const double others = wall > 0 ? std::max(0.0, (busy - own) / wall) : 0.0;
    others_ = 0.5 * others_ + 0.5 * others;
    const int proposed = threads_for_share(max_threads_, static_cast<int>(cpus_.size()), others_);
    if (proposed == current_) {
      pending_ = -1;
    } else if (proposed == pending_) {
      current_ = proposed;
      pending_ = -1;
    } else {
      pending_ = proposed;
    }
  }
  last_ = s;
  return current_;
}

}  // namespace rlt
