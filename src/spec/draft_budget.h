// How many drafts pay (adaptive K). A verify pass of R rows costs about a + b·R (a: streaming the
// weights once, what a memory-bound batch pays whatever its rows; b: each row's compute), and a
// request whose drafts are accepted with probability α expects α^j more tokens from its j-th
// draft. Drafts are handed out greedily by that expected gain while the batch's tokens per
// second still rise, so speculation never costs more than it saves: at batch 1 a pass of a few
// rows costs little more than one row and drafts pay; in a large batch the rows are compute
// already and no draft does.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace rlt::spec {

// A request's recent acceptance: drafts behave as independent trials that stop at the first
// rejection, counted with exponential forgetting so that a change of the text's nature shows
// within a few steps.
class AcceptanceEstimate {
 public:
  // `drafted` drafts were verified and the first `accepted` of them kept.
  void observe(int32_t drafted, int32_t accepted);
  // A step without drafts: the estimate drifts back toward the prior, so that a request whose
  // drafts stopped paying tries one again now and then instead of never learning it changed.
  void idle();
  // The chance that a draft is accepted given the one before it was.
  double rate() const;

 private:
  // A prior worth two trials at 60 %: a new request drafts, and learns fast.
  static constexpr double kPriorAccepted = 1.2, kPriorTrials = 2.0;
  double accepted_ = kPriorAccepted, trials_ = kPriorTrials;
};

// The measured cost of a verify pass by its rows, t = a + b·R, fit by least squares with
// exponential forgetting. Until rows vary enough to tell a from b it assumes a row costs a fifth
// of the fixed part (rows nearly free: the memory-bound case), which lets drafts be tried and
// measured.
class VerifyCostModel {
 public:
  void observe(int64_t rows, double seconds);
  double fixed() const;    // a
  double per_row() const;  // b
  // Whether the recent passes all had (nearly) the same number of rows: then the next pass
  // should vary them, or b can never be learned.
  bool needs_variation() const;
  int64_t observations() const { return count_; }

 private:
  double w_ = 0, x_ = 0, y_ = 0, xx_ = 0, xy_ = 0;  // weighted sums
  int64_t count_ = 0;
};

// One request of a verify batch: the drafts on offer (ngram proposals, or a self cycle's drafts)
// and its acceptance rate.
struct DraftOffer {
  int32_t available = 0;
  double acceptance = 0.0;
};

// A draft must promise this much more than the batch's tokens per unit of cost: the cost model is
// a fit to noisy timings, and a draft of nearly no expected gain risks a loss for a gain too small
// to see (a large batch, where rows are compute already, sits on that edge).
inline constexpr double kRequiredReturn = 1.1;

// How many of each offer's drafts to verify: greedy by expected gain α^j while
// gain / b > kRequiredReturn · tokens / cost (the draft's own yield beats the batch's by the
// margin, so tokens per second rise), within `row_budget` rows in all (each request's own row
// included). `fixed`, `per_row`: the cost model's a and b.
std::vector<int32_t> allocate_drafts(std::span<const DraftOffer> offers, double fixed, double per_row,
                                     int64_t row_budget);

}  // namespace rlt::spec
