#include "runner/model_input.h"

#include <gtest/gtest.h>

namespace rlt::runner {
namespace {

PassInput two_row_pass() {
  PassInput pass;
  pass.rows = {{7, 0, 3}, {8, 0, 5}};
  pass.tokens = {11, 12};
  pass.depths = {0, 1};
  pass.writes.block = {0, 1, 2, 3};  // [loops][rows]
  pass.writes.slot = {3, 1};
  pass.keep_state = {1};
  return pass;
}

TEST(ModelInput, PassWritesAreCheckedAgainstThePool) {
  PassInput pass = two_row_pass();
  EXPECT_TRUE(check_pass_writes(pass, 4, 4).ok());
  Status s = check_pass_writes(pass, 3, 4);
  EXPECT_NE(s.message().find("block 3 of a pool of 3"), std::string::npos) << s.message();
  s = check_pass_writes(pass, 4, 2);
  EXPECT_NE(s.message().find("slot 3 of blocks of 2"), std::string::npos) << s.message();
  pass.writes.block.pop_back();  // one loop's blocks short
  s = check_pass_writes(pass, 4, 4);
  EXPECT_NE(s.message().find("2 rows and 2 loops has 2 write slots, 3 write blocks"),
            std::string::npos)
      << s.message();
  pass = two_row_pass();
  pass.keep_state = {2};
  EXPECT_NE(check_pass_writes(pass, 4, 4).message().find("row 2 of 2"), std::string::npos);
}

TEST(ModelInput, ClearKeepsPassBuffersForTheNextBatch) {
  ModelInput input;
  input.seq = 4;
  input.stage = Stage::kRecurrent;
  input.requests = {1, 2};
  PassInput& pass = input.add_pass();
  pass = two_row_pass();
  const int32_t* rows_buffer = reinterpret_cast<const int32_t*>(pass.rows.data());
  ASSERT_EQ(input.passes().size(), 1u);
  input.clear();
  EXPECT_TRUE(input.passes().empty());
  EXPECT_TRUE(input.requests.empty());
  PassInput& again = input.add_pass();
  EXPECT_TRUE(again.rows.empty());
  again.rows.push_back({1, 0, 0});
  EXPECT_EQ(reinterpret_cast<const int32_t*>(again.rows.data()), rows_buffer);  // no reallocation
  EXPECT_EQ(stage_name(Stage::kCoda), "coda");
}

}  // namespace
}  // namespace rlt::runner
