#include "rlt/status.h"

#include <gtest/gtest.h>

namespace rlt {
namespace {

Result<int> parse_positive(int v) {
  if (v <= 0) return invalid_argument("value must be positive, got " + std::to_string(v));
  return v;
}

Result<int> doubled(int v) {
  RLT_ASSIGN_OR_RETURN(int x, parse_positive(v));
  return 2 * x;
}

TEST(Status, OkByDefault) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.to_string(), "ok");
}

TEST(Status, CarriesCodeMessageAndContext) {
  Status s = not_found("tensor 'x' missing").with_context("loading model.safetensors");
  EXPECT_EQ(s.code(), ErrorCode::kNotFound);
  EXPECT_EQ(s.to_string(), "not_found: loading model.safetensors: tensor 'x' missing");
}

TEST(Result, PropagatesErrorsThroughAssignOrReturn) {
  auto good = doubled(4);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 8);
  auto bad = doubled(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("got -1"), std::string::npos);
}

}  // namespace
}  // namespace rlt
