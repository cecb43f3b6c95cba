// Attribute and item access: the str / dict / list methods templates call, jinja2's
// getattr / getitem fallbacks, and Python slicing.
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
namespace {

Value string_method(const Value& obj, const std::string& name) {
  const std::string s = obj.s;
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool left = name != "rstrip";
    const bool right = name != "lstrip";
    return bound(name, [s, left, right](CallArgs& a) {
      return Value::string(py_strip(s, arg(a, 0, "chars"), left, right));
    });
  }
  if (name == "startswith" || name == "endswith") {
    const bool starts = name == "startswith";
    return bound(name, [s, starts](CallArgs& a) {
      const Value* p = arg(a, 0, "prefix");
      if (p == nullptr)
        type_error(std::string(starts ? "startswith" : "endswith") +
                   "() takes at least 1 argument");
      List options = p->is_list() ? *p->list : List{*p};
      for (const Value& o : options) {
        if (!o.is_string())
          type_error("TypeError: startswith/endswith first arg must be str or a tuple of str");
        const std::string& x = o.s;
        if (starts ? s.compare(0, x.size(), x) == 0
                   : (s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0)) {
          return Value::boolean(true);
        }
      }
      return Value::boolean(false);
    });
  }
  if (name == "split" || name == "rsplit") {
    const bool r = name == "rsplit";
    return bound(name, [s, r](CallArgs& a) {
      const Value* max = arg(a, 1, "maxsplit");
      const int64_t m = max != nullptr ? as_int(*max) : -1;
      if (r && m >= 0) type_error("rsplit with maxsplit is not supported");
      return Value::from_list(py_split(s, arg(a, 0, "sep"), m));
    });
  }
  if (name == "splitlines") {
    return bound(name, [s](CallArgs&) {
      List out;
      size_t start = 0;
      for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\n' || s[i] == '\r') {
          out.push_back(Value::string(s.substr(start, i - start)));
          if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
          start = i + 1;
        }
      }
      if (start < s.size()) out.push_back(Value::string(s.substr(start)));
      return Value::from_list(std::move(out));
    });
  }
  if (name == "replace") {
    return bound(name, [s](CallArgs& a) {
      const Value* o = arg(a, 0, "old");
      const Value* n = arg(a, 1, "new");
      const Value* c = arg(a, 2, "count");
      if (o == nullptr || n == nullptr) type_error("replace() takes at least 2 arguments");
      return Value::string(py_replace(s, to_str(*o), to_str(*n), c ? as_int(*c) : -1));
    });
  }
  if (name == "upper" || name == "lower") {
    const bool up = name == "upper";
    return bound(name, [s, up](CallArgs&) { return Value::string(map_case(s, up)); });
  }
  if (name == "title") return bound(name, [s](CallArgs&) { return Value::string(title(s)); });
  if (name == "capitalize") {
    return bound(name, [s](CallArgs&) { return Value::string(capitalize(s)); });
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "count") {
    return bound(name, [s, name](CallArgs& a) {
      const Value* sub = arg(a, 0, "sub");
      if (sub == nullptr) type_error(name + "() takes at least 1 argument");
      const std::string x = to_str(*sub);
      if (name == "count") {
        if (x.empty()) return Value::integer(static_cast<int64_t>(utf8::count_code_points(s)) + 1);
        int64_t n = 0;
        for (size_t p = s.find(x); p != std::string::npos; p = s.find(x, p + x.size())) ++n;
        return Value::integer(n);
      }
      const size_t p = name == "rfind" ? s.rfind(x) : s.find(x);
      if (p == std::string::npos) {
        if (name == "index") type_error("ValueError: substring not found");
        return Value::integer(-1);
      }
      return Value::integer(static_cast<int64_t>(utf8::count_code_points(s.substr(0, p))));
    });
  }
  if (name == "join") {
    return bound(name, [s](CallArgs& a) {
      const Value* items = arg(a, 0, "iterable");
      if (items == nullptr) type_error("join() takes exactly one argument");
      std::string out;
      bool first = true;
      for (const Value& v : iterate(*items)) {
        if (!v.is_string())
          type_error("TypeError: sequence item: expected str instance, " + type_name(v) + " found");
        if (!first) out += s;
        out += v.s;
        first = false;
      }
      return Value::string(out);
    });
  }
  if (name == "format") {
    return bound(name, [s](CallArgs& a) { return Value::string(brace_format(s, a)); });
  }
  if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" ||
      name == "isupper" || name == "islower") {
    return bound(name, [s, name](CallArgs&) {
      const std::u32string u = to_u32(s);
      if (u.empty()) return Value::boolean(false);
      bool cased = false;
      for (char32_t c : u) {
        const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
        const bool alpha = cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO;
        const bool digit = cat == UTF8PROC_CATEGORY_ND;
        bool ok = true;
        if (name == "isdigit") ok = digit;
        if (name == "isalpha") ok = alpha;
        if (name == "isalnum")
          ok = alpha || digit || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
        if (name == "isspace") ok = py_isspace(c);
        if (name == "isupper" || name == "islower") {
          const bool up = cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LT;
          const bool low = cat == UTF8PROC_CATEGORY_LL;
          if (up || low) cased = true;
          ok = name == "isupper" ? !low : !up;
        }
        if (!ok) return Value::boolean(false);
      }
      if (name == "isupper" || name == "islower") return Value::boolean(cased);
      return Value::boolean(true);
    });
  }
  if (name == "removeprefix" || name == "removesuffix") {
    const bool prefix = name == "removeprefix";
    return bound(name, [s, prefix](CallArgs& a) {
      const Value* x = arg(a, 0, "prefix");
      if (x == nullptr) type_error("remove*() takes exactly one argument");
      const std::string p = to_str(*x);
      if (prefix && s.compare(0, p.size(), p) == 0) return Value::string(s.substr(p.size()));
      if (!prefix && s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0) {
        return Value::string(s.substr(0, s.size() - p.size()));
      }
      return Value::string(s);
    });
  }
  return Value::undefined(name);
}

Value dict_method(const Value& obj, const std::string& name) {
  const auto d = obj.dict;
  if (name == "items") {
    return bound(name, [d](CallArgs&) {
      List out;
      for (const auto& [k, v] : d->items)
        out.push_back(Value::from_list({Value::string(k), v}, true));
      return Value::from_list(std::move(out));
    });
  }
  if (name == "keys") {
    return bound(name, [d](CallArgs&) {
      List out;
      for (const auto& kv : d->items) out.push_back(Value::string(kv.first));
      return Value::from_list(std::move(out));
    });
  }
  if (name == "values") {
    return bound(name, [d](CallArgs&) {
      List out;
      for (const auto& kv : d->items) out.push_back(kv.second);
      return Value::from_list(std::move(out));
    });
  }
  if (name == "get") {
    return bound(name, [d](CallArgs& a) {
      const Value* key = arg(a, 0, "key");
      if (key == nullptr) type_error("get() takes at least 1 argument");
      if (key->is_string()) {
        if (const Value* v = d->find(key->s)) return *v;
      }
      const Value* dflt = arg(a, 1, "default");
      return dflt ? *dflt : Value::none();
    });
  }
  if (name == "copy") return bound(name, [d](CallArgs&) { return Value::from_dict(*d); });
  static const char* kMutating[] = {"pop", "popitem", "setdefault", "update", "clear"};
  for (const char* m : kMutating) {
    if (name == m) {
      return bound(name, [name](CallArgs&) -> Value {
        type_error("SecurityError: access to attribute '" + name + "' of 'dict' object is unsafe");
      });
    }
  }
  return Value::undefined(name);
}

Value list_method(const Value& obj, const std::string& name) {
  const auto l = obj.list;
  if (name == "index" || name == "count") {
    return bound(name, [l, name](CallArgs& a) {
      const Value* x = arg(a, 0, "value");
      if (x == nullptr) type_error(name + "() takes exactly one argument");
      int64_t n = 0;
      for (size_t k = 0; k < l->size(); ++k) {
        if (equals((*l)[k], *x)) {
          if (name == "index") return Value::integer(static_cast<int64_t>(k));
          ++n;
        }
      }
      if (name == "index") type_error("ValueError: value is not in list");
      return Value::integer(n);
    });
  }
  static const char* kMutating[] = {"append", "extend", "insert",  "pop",
                                    "remove", "sort",   "reverse", "clear"};
  for (const char* m : kMutating) {
    if (name == m) {
      return bound(name, [name](CallArgs&) -> Value {
        type_error("SecurityError: access to attribute '" + name + "' of 'list' object is unsafe");
      });
    }
  }
  return Value::undefined(name);
}

// Orders two values like Python's < (numbers, strings, sequences).

}  // namespace

Value get_attribute(const Value& obj, const std::string& name) {
  switch (obj.kind) {
    case Value::Kind::kUndefined:
      undefined_error(obj);
    case Value::Kind::kDict: {
      Value m = dict_method(obj, name);
      if (!m.is_undefined()) return m;
      if (const Value* v = obj.dict->find(name)) return *v;
      return Value::undefined(name);
    }
    case Value::Kind::kNamespace:
      if (const Value* v = obj.dict->find(name)) return *v;
      return Value::undefined(name);
    case Value::Kind::kString:
      return string_method(obj, name);
    case Value::Kind::kList:
      return list_method(obj, name);
    default:
      return Value::undefined(name);
  }
}

Value get_item(const Value& obj, const Value& key) {
  switch (obj.kind) {
    case Value::Kind::kUndefined:
      undefined_error(obj);
    case Value::Kind::kDict:
    case Value::Kind::kNamespace:
      if (key.is_string()) {
        if (const Value* v = obj.dict->find(key.s)) return *v;
        return obj.kind == Value::Kind::kDict ? get_attribute(obj, key.s) : Value::undefined(key.s);
      }
      return Value::undefined();
    case Value::Kind::kList:
    case Value::Kind::kString: {
      if (key.is_string()) return get_attribute(obj, key.s);
      if (!is_integral(key)) return Value::undefined();
      int64_t idx = as_int(key);
      if (obj.is_list()) {
        const auto n = static_cast<int64_t>(obj.list->size());
        if (idx < 0) idx += n;
        if (idx < 0 || idx >= n) return Value::undefined();
        return (*obj.list)[static_cast<size_t>(idx)];
      }
      const std::u32string u = to_u32(obj.s);
      const auto n = static_cast<int64_t>(u.size());
      if (idx < 0) idx += n;
      if (idx < 0 || idx >= n) return Value::undefined();
      return Value::string(from_u32(u.substr(static_cast<size_t>(idx), 1)));
    }
    default:
      return Value::undefined();
  }
}

Value slice(const Value& obj, const Value& start_v, const Value& stop_v, const Value& step_v) {
  if (obj.is_undefined()) undefined_error(obj);
  auto opt = [](const Value& v) { return v.is_undefined() || v.is_none(); };
  const int64_t step = opt(step_v) ? 1 : as_int(step_v);
  if (step == 0) type_error("ValueError: slice step cannot be zero");
  const bool is_str = obj.is_string();
  if (!is_str && !obj.is_list())
    type_error("TypeError: '" + type_name(obj) + "' object is not subscriptable");
  const std::u32string u = is_str ? to_u32(obj.s) : std::u32string();
  const auto n = static_cast<int64_t>(is_str ? u.size() : obj.list->size());
  // Python's slice.indices().
  auto clamp = [&](const Value& v, int64_t dflt, bool is_start) {
    if (opt(v)) return dflt;
    int64_t x = as_int(v);
    if (x < 0) x += n;
    if (step > 0) return std::clamp<int64_t>(x, 0, n);
    (void)is_start;
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  const int64_t start = clamp(start_v, step > 0 ? 0 : n - 1, true);
  const int64_t stop = clamp(stop_v, step > 0 ? n : -1, false);
  std::u32string s_out;
  List l_out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (is_str) {
      s_out.push_back(u[static_cast<size_t>(i)]);
    } else {
      l_out.push_back((*obj.list)[static_cast<size_t>(i)]);
    }
  }
  if (is_str) return Value::string(from_u32(s_out));
  return Value::from_list(std::move(l_out), obj.is_tuple);
}

}  // namespace rlt::jinja
