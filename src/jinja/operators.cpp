// Python operators on template values: arithmetic, comparisons, membership, iteration.
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

[[noreturn]] void undefined_error(const Value& v) {
  throw TemplateError(v.s.empty() ? std::string("UndefinedError: undefined value used")
                                  : "UndefinedError: '" + v.s + "' is undefined");
}

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string l = to_str(a), r = to_str(b);
    check_size(l.size() + r.size(), "string");
    return Value::string(std::move(l) + r);
  }
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  auto unsupported = [&]() -> Value {
    type_error("TypeError: unsupported operand type(s) for " + op + ": '" + type_name(a) +
               "' and '" + type_name(b) + "'");
  };
  if (a.is_number() && b.is_number()) {
    const bool ints = is_integral(a) && is_integral(b);
    // Python integers are unbounded; rlt's are 64-bit and refuse to overflow silently.
    auto checked = [](bool overflow, int64_t r) {
      if (overflow) type_error("OverflowError: integer result does not fit in 64 bits");
      return Value::integer(r);
    };
    if (ints && (op == "+" || op == "-" || op == "*")) {
      int64_t r = 0;
      const bool overflow = op == "+"   ? __builtin_add_overflow(as_int(a), as_int(b), &r)
                            : op == "-" ? __builtin_sub_overflow(as_int(a), as_int(b), &r)
                                        : __builtin_mul_overflow(as_int(a), as_int(b), &r);
      return checked(overflow, r);
    }
    if (op == "+") return Value::number(as_double(a) + as_double(b));
    if (op == "-") return Value::number(as_double(a) - as_double(b));
    if (op == "*") return Value::number(as_double(a) * as_double(b));
    if (op == "/") {
      if (as_double(b) == 0.0) type_error("ZeroDivisionError: division by zero");
      return Value::number(as_double(a) / as_double(b));
    }
    if (op == "//") {
      if (ints) return Value::integer(floor_div(as_int(a), as_int(b)));
      if (as_double(b) == 0.0) type_error("ZeroDivisionError: float floor division by zero");
      return Value::number(std::floor(as_double(a) / as_double(b)));
    }
    if (op == "%") {
      if (ints) {
        if (as_int(b) == 0) type_error("ZeroDivisionError: integer modulo by zero");
        return Value::integer(py_mod(as_int(a), as_int(b)));
      }
      const double y = as_double(b);
      if (y == 0.0) type_error("ZeroDivisionError: float modulo");
      double r = std::fmod(as_double(a), y);
      if (r != 0 && ((r < 0) != (y < 0))) r += y;
      return Value::number(r);
    }
    if (op == "**") {
      if (ints && as_int(b) >= 0) {
        const int64_t base = as_int(a);
        const int64_t e = as_int(b);
        if (base == 0 || base == 1) return Value::integer(e == 0 ? 1 : base);
        if (base == -1) return Value::integer(e % 2 == 0 ? 1 : -1);
        int64_t p = 1;  // |base| >= 2 overflows within 63 steps
        for (int64_t k = 0; k < e; ++k) {
          if (__builtin_mul_overflow(p, base, &p)) return checked(true, 0);
        }
        return Value::integer(p);
      }
      return Value::number(std::pow(as_double(a), as_double(b)));
    }
    return unsupported();
  }
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      check_size(a.s.size() + b.s.size(), "string");
      return Value::string(a.s + b.s);
    }
    if (a.is_list() && b.is_list() && a.is_tuple == b.is_tuple) {
      check_size(shallow_bytes(*a.list) + shallow_bytes(*b.list), "list");
      List out = *a.list;
      out.insert(out.end(), b.list->begin(), b.list->end());
      return Value::from_list(std::move(out), a.is_tuple);
    }
    if (a.is_string() || b.is_string()) {
      type_error("TypeError: can only concatenate str (not \"" + type_name(a.is_string() ? b : a) +
                 "\") to str");
    }
    return unsupported();
  }
  if (op == "*") {
    const Value* seq = a.is_string() || a.is_list()   ? &a
                       : b.is_string() || b.is_list() ? &b
                                                      : nullptr;
    const Value* times = seq == &a ? &b : &a;
    if (seq && is_integral(*times)) {
      // An empty sequence repeated stays empty: without this, '' * 10**18 loops for ever.
      const bool empty = seq->is_string() ? seq->s.empty() : seq->list->empty();
      const int64_t n = empty ? 0 : std::max<int64_t>(0, as_int(*times));
      if (seq->is_string()) {
        std::string out;
        out.reserve(checked_repeat(seq->s.size(), n, "string"));
        for (int64_t k = 0; k < n; ++k) out += seq->s;
        return Value::string(out);
      }
      checked_repeat(shallow_bytes(*seq->list), n, "list");
      List out;
      for (int64_t k = 0; k < n; ++k) out.insert(out.end(), seq->list->begin(), seq->list->end());
      return Value::from_list(std::move(out), seq->is_tuple);
    }
    return unsupported();
  }
  if (op == "%" && a.is_string()) return Value::string(percent_format(a.s, b));
  return unsupported();
}

bool compare_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return equals(a, b);
  if (op == "!=") return !equals(a, b);
  if (op == "in" || op == "not in") {
    bool found = false;
    if (b.is_string()) {
      if (!a.is_string())
        type_error("TypeError: 'in <string>' requires string as left operand, not " + type_name(a));
      found = b.s.find(a.s) != std::string::npos;
    } else if (b.is_list()) {
      found =
          std::any_of(b.list->begin(), b.list->end(), [&](const Value& x) { return equals(x, a); });
    } else if (b.is_dict() || b.kind == Value::Kind::kNamespace) {
      found = a.is_string() && b.dict->find(a.s) != nullptr;
    } else if (b.is_undefined()) {
      found = false;
    } else {
      type_error("TypeError: argument of type '" + type_name(b) + "' is not iterable");
    }
    return op == "in" ? found : !found;
  }
  const int c = compare_values(a, b);
  if (op == "<") return c < 0;
  if (op == ">") return c > 0;
  if (op == "<=") return c <= 0;
  return c >= 0;
}

Value negate(const Value& v) {
  if (v.is_undefined()) undefined_error(v);
  if (v.kind == Value::Kind::kFloat) return Value::number(-v.f);
  if (is_integral(v)) {
    if (as_int(v) == INT64_MIN) type_error("OverflowError: integer result does not fit in 64 bits");
    return Value::integer(-as_int(v));
  }
  type_error("TypeError: bad operand type for unary -: '" + type_name(v) + "'");
}

List iterate(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined:
      return {};
    case Value::Kind::kList:
      return *v.list;
    case Value::Kind::kDict: {
      List out;
      for (const auto& kv : v.dict->items) out.push_back(Value::string(kv.first));
      return out;
    }
    case Value::Kind::kString: {
      // One Value per character: a long string would take ~100 times its size.
      check_size(utf8::count_code_points(v.s) * sizeof(Value), "list of characters");
      List out;
      for (char32_t c : to_u32(v.s)) out.push_back(Value::string(utf8::encode(c)));
      return out;
    }
    default:
      type_error("TypeError: '" + type_name(v) + "' object is not iterable");
  }
}

int64_t length(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined:
      return 0;
    case Value::Kind::kString:
      return static_cast<int64_t>(utf8::count_code_points(v.s));
    case Value::Kind::kList:
      return static_cast<int64_t>(v.list->size());
    case Value::Kind::kDict:
    case Value::Kind::kNamespace:
      return static_cast<int64_t>(v.dict->items.size());
    default:
      type_error("TypeError: object of type '" + type_name(v) + "' has no len()");
  }
}

}  // namespace rlt::jinja
