// Global functions of transformers' chat-template environment: range, dict, namespace,
// raise_exception, strftime_now.
#include <fmt/format.h>
#include <utf8proc.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <map>

#include "common/utf8.h"
#include "jinja/builtins.h"
#include "jinja/lexer.h"
#include "jinja/support.h"

namespace rlt::jinja {

Value global_function(const std::string& name) {
  if (name == "range") {
    return bound(name, [](CallArgs& a) {
      int64_t start = 0, stop = 0, step = 1;
      if (a.positional.size() == 1) {
        stop = as_int(a.positional[0]);
      } else if (a.positional.size() >= 2) {
        start = as_int(a.positional[0]);
        stop = as_int(a.positional[1]);
        if (a.positional.size() >= 3) step = as_int(a.positional[2]);
      } else {
        type_error("range expected at least 1 argument");
      }
      if (step == 0) type_error("ValueError: range() arg 3 must not be zero");
      List out;
      for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
        if (out.size() > 100000) type_error("range too big (sandbox limit 100000)");
        out.push_back(Value::integer(i));
        // Near the 64-bit ends the next value would wrap around (undefined behaviour).
        if (__builtin_add_overflow(i, step, &i)) break;
      }
      return Value::from_list(std::move(out));
    });
  }
  if (name == "dict" || name == "namespace") {
    const bool ns = name == "namespace";
    return bound(name, [ns](CallArgs& a) {
      Dict d;
      for (const Value& p : a.positional) {
        if (!p.is_dict())
          type_error(std::string(ns ? "namespace" : "dict") +
                     "() positional argument must be a dict");
        for (const auto& [k, v] : p.dict->items) d.set(k, v);
      }
      for (const auto& [k, v] : a.keyword) d.set(k, v);
      return ns ? Value::from_namespace(std::move(d)) : Value::from_dict(std::move(d));
    });
  }
  if (name == "raise_exception") {
    return bound(name, [](CallArgs& a) -> Value {
      throw TemplateError(a.positional.empty() ? "raise_exception called"
                                               : to_str(a.positional[0]));
    });
  }
  if (name == "strftime_now") {
    return bound(name, [](CallArgs& a) {
      const std::string f = a.positional.empty() ? "" : to_str(a.positional[0]);
      const std::time_t now = std::time(nullptr);
      std::tm tm{};
      localtime_r(&now, &tm);
      char buf[256];
      const size_t n = std::strftime(buf, sizeof(buf), f.c_str(), &tm);
      return Value::string(std::string(buf, n));
    });
  }
  return Value::undefined(name);
}

}  // namespace rlt::jinja
