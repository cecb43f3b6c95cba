#include "sched/request.h"

namespace rlt::sched {

std::string_view stage_name(Stage stage) {
  switch (stage) {
    case Stage::kWaiting: return "WAITING";
    case Stage::kPrefill: return "PREFILL";
    case Stage::kPrelude: return "PRELUDE";
    case Stage::kRecurrent: return "RECURRENT";
    case Stage::kCoda: return "CODA";
    case Stage::kFinished: return "FINISHED";
    case Stage::kVerify: return "VERIFY";
  }
  return "?";
}

std::string_view finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone: return "";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
  }
  return "";
}

}  // namespace rlt::sched
