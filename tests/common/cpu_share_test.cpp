// The CPU share behind adaptive threads: /proc/stat parsing and the thread count it gives.
#include "common/cpu_share.h"

#include <gtest/gtest.h>

namespace rlt {
namespace {

constexpr std::string_view kStat =
    "cpu  900 10 300 5000 40 0 20 0 0 0\n"
    "cpu0 400 5 100 2600 20 0 10 0 0 0\n"
    "cpu1 500 5 200 2400 20 0 10 0 0 0\n"
    "intr 12345 0 0\n"
    "ctxt 999\n";

TEST(CpuShare, ParsesTheListedCpusOnly) {
  auto both = parse_proc_stat(kStat, {0, 1});
  ASSERT_TRUE(both.has_value());
  EXPECT_EQ(both->busy, (400 + 5 + 100 + 10) + (500 + 5 + 200 + 10));
  EXPECT_EQ(both->total, both->busy + (2600 + 20) + (2400 + 20)) << "idle and iowait are not busy";
  auto one = parse_proc_stat(kStat, {1});
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(one->busy, 715);
  EXPECT_FALSE(parse_proc_stat(kStat, {0, 2}).has_value()) << "a listed CPU without a line";
  EXPECT_FALSE(parse_proc_stat("cpu0 1 2\n", {0}).has_value()) << "a truncated line";
  EXPECT_FALSE(parse_proc_stat(kStat, {}).has_value());
}

TEST(CpuShare, LeavesOtherProcessesTheirCores) {
  EXPECT_EQ(threads_for_share(2, 2, 0.0), 2);
  EXPECT_EQ(threads_for_share(2, 2, 0.3), 2) << "a client's light load keeps both threads";
  EXPECT_EQ(threads_for_share(2, 2, 0.67), 1) << "a busy loop sharing with two spinning threads";
  EXPECT_EQ(threads_for_share(2, 2, 1.0), 1);
  EXPECT_EQ(threads_for_share(2, 2, 5.0), 1) << "never fewer than one";
  EXPECT_EQ(threads_for_share(8, 16, 4.0), 8) << "never more than configured";
  EXPECT_EQ(threads_for_share(16, 16, 4.0), 12);
  EXPECT_EQ(threads_for_share(16, 16, -1.0), 16);
  EXPECT_EQ(threads_for_share(4, 2, 0.1), 4) << "an oversubscribing --threads is kept on a quiet machine";
  EXPECT_EQ(threads_for_share(4, 2, 1.0), 1);
}

TEST(CpuShare, MonitorAnswersWithinItsBounds) {
  CpuShareMonitor monitor(2, std::chrono::milliseconds(0));
  for (int i = 0; i < 5; ++i) {
    const int n = monitor.threads();
    EXPECT_GE(n, 1);
    EXPECT_LE(n, 2);
  }
  EXPECT_GE(monitor.others_busy(), 0.0);
  CpuShareMonitor single(1);
  EXPECT_EQ(single.threads(), 1);
}

}  // namespace
}  // namespace rlt
