// Stop strings over streamed pieces: matches spanning pieces, hold-back, earliest match.
#include "server/stop_matcher.h"

#include <gtest/gtest.h>

namespace rlt::server {
namespace {

std::string feed_all(StopMatcher& m, const std::vector<std::string>& pieces, bool* stopped) {
  std::string out;
  for (const auto& p : pieces) {
    auto r = m.feed(p);
    out += r.text;
    if (r.stopped) {
      *stopped = true;
      return out;
    }
  }
  *stopped = false;
  return out + m.finish();
}

TEST(StopMatcher, WithoutStopsReleasesEverythingAtOnce) {
  StopMatcher m({});
  EXPECT_EQ(m.feed("abc").text, "abc");
  EXPECT_EQ(m.finish(), "");
}

TEST(StopMatcher, StopInsideOnePieceCutsBeforeIt) {
  StopMatcher m({"END"});
  auto r = m.feed("helloENDworld");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "hello");
  EXPECT_TRUE(m.feed("more").text.empty());
}

TEST(StopMatcher, StopSpanningPiecesIsFoundAndNeverShown) {
  StopMatcher m({"STOP"});
  bool stopped = false;
  EXPECT_EQ(feed_all(m, {"ab", "cS", "T", "OPxyz"}, &stopped), "abc");
  EXPECT_TRUE(stopped);
}

TEST(StopMatcher, HeldPrefixIsReleasedOnceItCannotMatch) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.feed("abST").text, "ab");  // "ST" could start STOP
  EXPECT_EQ(m.feed("x").text, "STx");
  EXPECT_EQ(m.feed("S").text, "");
  EXPECT_EQ(m.finish(), "S");
}

TEST(StopMatcher, EarliestMatchWinsAmongSeveralStops) {
  StopMatcher m({"world", "lo w"});
  auto r = m.feed("hello world");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "hel");
}

TEST(StopMatcher, OverlappingPrefixKeepsTheLongestCandidate) {
  StopMatcher m({"aab"});
  EXPECT_EQ(m.feed("xa").text, "x");
  EXPECT_EQ(m.feed("a").text, "");
  EXPECT_EQ(m.feed("a").text, "a");  // "aaa": only the last "aa" may still start "aab"
  auto r = m.feed("b");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "");
}

TEST(StopMatcher, MultiByteCharactersAreNeverSplit) {
  StopMatcher m({"é!"});  // "\xc3\xa9!"
  bool stopped = false;
  EXPECT_EQ(feed_all(m, {"caf", "é", "é", "!"}, &stopped), "café");
  EXPECT_TRUE(stopped);
  StopMatcher n({"éa"});
  EXPECT_EQ(n.feed("xé").text, "x");
  EXPECT_EQ(n.feed("b").text, "éb");
}

TEST(StopMatcher, EmptyStopStringsAreIgnored) {
  StopMatcher m({""});
  EXPECT_EQ(m.feed("abc").text, "abc");
}

}  // namespace
}  // namespace rlt::server
