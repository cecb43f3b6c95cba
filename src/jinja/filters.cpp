// Jinja filters and tests (the subset chat templates use), with jinja2 semantics.
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

Value select_filter(const Value& seq, CallArgs& a, bool by_attr, bool keep) {
  size_t next = 0;
  std::string attr;
  if (by_attr) {
    if (a.positional.empty()) type_error("selectattr/rejectattr need an attribute name");
    attr = to_str(a.positional[next++]);
  }
  std::string test;
  CallArgs test_args;
  if (next < a.positional.size()) {
    test = to_str(a.positional[next++]);
    for (; next < a.positional.size(); ++next) test_args.positional.push_back(a.positional[next]);
  }
  List out;
  for (const Value& item : iterate(seq)) {
    const Value probe = by_attr ? attribute_path(item, attr) : item;
    const bool ok = test.empty() ? truthy(probe) : apply_test(test, probe, test_args);
    if (ok == keep) out.push_back(item);
  }
  return Value::from_list(std::move(out));
}

using FilterFn = Value (*)(const Value&, CallArgs&);

const std::map<std::string, FilterFn>& filters() {
  static const std::map<std::string, FilterFn> table = {
      {"abs",
       [](const Value& v, CallArgs&) {
         if (v.kind == Value::Kind::kFloat) return Value::number(std::fabs(v.f));
         if (!is_integral(v))
           type_error("TypeError: bad operand type for abs(): '" + type_name(v) + "'");
         if (as_int(v) == INT64_MIN) type_error("OverflowError: integer result does not fit in 64 bits");
         return Value::integer(std::llabs(as_int(v)));
       }},
      {"capitalize",
       [](const Value& v, CallArgs&) { return Value::string(capitalize(to_str(v))); }},
      {"count", [](const Value& v, CallArgs&) { return Value::integer(length(v)); }},
      {"length", [](const Value& v, CallArgs&) { return Value::integer(length(v)); }},
      {"default",
       [](const Value& v, CallArgs& a) {
         const Value* d = arg(a, 0, "default_value");
         const Value* boolean = arg(a, 1, "boolean");
         const bool use_default = v.is_undefined() || (boolean && truthy(*boolean) && !truthy(v));
         if (use_default) return d ? *d : Value::string("");
         return v;
       }},
      {"dictsort",
       [](const Value& v, CallArgs& a) {
         if (!v.is_dict()) type_error("dictsort: expected a dict");
         const Value* by = arg(a, 1, "by");
         const bool by_value = by && to_str(*by) == "value";
         const Value* rev = arg(a, 2, "reverse");
         List items;
         for (const auto& [k, x] : v.dict->items)
           items.push_back(Value::from_list({Value::string(k), x}, true));
         std::stable_sort(items.begin(), items.end(), [&](const Value& p, const Value& q) {
           return compare_values((*p.list)[by_value ? 1 : 0], (*q.list)[by_value ? 1 : 0]) < 0;
         });
         if (rev && truthy(*rev)) std::reverse(items.begin(), items.end());
         return Value::from_list(std::move(items));
       }},
      {"escape", [](const Value& v, CallArgs&) { return Value::string(html_escape(to_str(v))); }},
      {"first",
       [](const Value& v, CallArgs&) {
         List items = iterate(v);
         return items.empty() ? Value::undefined("first") : items.front();
       }},
      {"last",
       [](const Value& v, CallArgs&) {
         List items = iterate(v);
         return items.empty() ? Value::undefined("last") : items.back();
       }},
      {"float",
       [](const Value& v, CallArgs& a) {
         const Value* d = arg(a, 0, "default");
         if (v.is_number()) return Value::number(as_double(v));
         if (v.is_string()) {
           try {
             size_t used = 0;
             const std::string t = py_strip(v.s, nullptr, true, true);
             const double x = std::stod(t, &used);
             if (used == t.size()) return Value::number(x);
           } catch (...) {
           }
         }
         return d ? *d : Value::number(0.0);
       }},
      {"int",
       [](const Value& v, CallArgs& a) {
         const Value* d = arg(a, 0, "default");
         if (is_integral(v)) return Value::integer(as_int(v));
         // Python's ints are unbounded; converting a float outside int64 would be undefined.
         auto from_float = [](double f) {
           if (!(std::fabs(f) < 9.2e18)) type_error("OverflowError: cannot convert float to a 64-bit integer");
           return Value::integer(static_cast<int64_t>(std::trunc(f)));
         };
         if (v.kind == Value::Kind::kFloat) return from_float(v.f);
         if (v.is_string()) {
           const std::string t = py_strip(v.s, nullptr, true, true);
           try {
             size_t used = 0;
             const long long x = std::stoll(t, &used, 10);
             if (used == t.size()) return Value::integer(x);
             const double f = std::stod(t, &used);
             if (used == t.size()) return from_float(f);
           } catch (const std::logic_error&) {  // stoll / stod: not a number, or out of range
           }
         }
         return d ? *d : Value::integer(0);
       }},
      {"indent",
       [](const Value& v, CallArgs& a) {
         const Value* first = arg(a, 1, "first");
         const Value* blank = arg(a, 2, "blank");
         return Value::string(indent(to_str(v), arg(a, 0, "width"), first && truthy(*first),
                                     blank && truthy(*blank)));
       }},
      {"items",
       [](const Value& v, CallArgs& a) {
         if (v.is_undefined()) return Value::from_list({});
         if (!v.is_dict()) type_error("TypeError: Can only get item pairs from a mapping.");
         return get_attribute(v, "items").fn->operator()(a);
       }},
      {"join",
       [](const Value& v, CallArgs& a) {
         const Value* sep = arg(a, 0, "d");
         const Value* attr = arg(a, 1, "attribute");
         std::string out;
         bool first = true;
         const std::string separator = sep ? to_str(*sep) : "";
         const List items = iterate(v);
         // Refuse a long separator between many items before building the text.
         checked_repeat(separator.size(), static_cast<int64_t>(items.size()) - 1, "join separator");
         for (const Value& item : items) {
           if (!first) out += separator;
           out += to_str(attr ? attribute_path(item, to_str(*attr)) : item);
           first = false;
           check_size(out.size(), "join result");  // a long separator between many items
         }
         return Value::string(out);
       }},
      {"list", [](const Value& v, CallArgs&) { return Value::from_list(iterate(v)); }},
      {"lower",
       [](const Value& v, CallArgs&) { return Value::string(map_case(to_str(v), false)); }},
      {"upper", [](const Value& v, CallArgs&) { return Value::string(map_case(to_str(v), true)); }},
      {"map",
       [](const Value& v, CallArgs& a) {
         List out;
         if (const Value* attr = a.kwarg("attribute")) {
           const Value* dflt = a.kwarg("default");
           for (const Value& item : iterate(v)) {
             Value x = attribute_path(item, to_str(*attr));
             out.push_back(x.is_undefined() && dflt ? *dflt : x);
           }
           return Value::from_list(std::move(out));
         }
         if (a.positional.empty()) type_error("map: needs a filter name or attribute=");
         const std::string f = to_str(a.positional[0]);
         CallArgs rest;
         rest.positional.assign(a.positional.begin() + 1, a.positional.end());
         rest.keyword = a.keyword;
         for (const Value& item : iterate(v)) out.push_back(apply_filter(f, item, rest));
         return Value::from_list(std::move(out));
       }},
      {"max",
       [](const Value& v, CallArgs&) {
         List items = iterate(v);
         if (items.empty()) return Value::undefined("max");
         Value best = items[0];
         for (const Value& x : items)
           if (compare_values(x, best) > 0) best = x;
         return best;
       }},
      {"min",
       [](const Value& v, CallArgs&) {
         List items = iterate(v);
         if (items.empty()) return Value::undefined("min");
         Value best = items[0];
         for (const Value& x : items)
           if (compare_values(x, best) < 0) best = x;
         return best;
       }},
      {"reject", [](const Value& v, CallArgs& a) { return select_filter(v, a, false, false); }},
      {"rejectattr", [](const Value& v, CallArgs& a) { return select_filter(v, a, true, false); }},
      {"select", [](const Value& v, CallArgs& a) { return select_filter(v, a, false, true); }},
      {"selectattr", [](const Value& v, CallArgs& a) { return select_filter(v, a, true, true); }},
      {"replace",
       [](const Value& v, CallArgs& a) {
         const Value* o = arg(a, 0, "old");
         const Value* n = arg(a, 1, "new");
         const Value* c = arg(a, 2, "count");
         if (!o || !n) type_error("replace filter needs old and new");
         return Value::string(
             py_replace(to_str(v), to_str(*o), to_str(*n), c && !c->is_none() ? as_int(*c) : -1));
       }},
      {"reverse",
       [](const Value& v, CallArgs&) {
         if (v.is_string()) {
           std::u32string u = to_u32(v.s);
           std::reverse(u.begin(), u.end());
           return Value::string(from_u32(u));
         }
         List items = iterate(v);
         std::reverse(items.begin(), items.end());
         return Value::from_list(std::move(items));
       }},
      {"round",
       [](const Value& v, CallArgs& a) {
         const Value* p = arg(a, 0, "precision");
         const Value* m = arg(a, 1, "method");
         const std::string method = m ? to_str(*m) : "common";
         const double scale = std::pow(10.0, p ? static_cast<double>(as_int(*p)) : 0.0);
         const double x = as_double(v) * scale;
         double r = 0;
         if (method == "common")
           r = std::round(x);
         else if (method == "ceil")
           r = std::ceil(x);
         else if (method == "floor")
           r = std::floor(x);
         else
           type_error("FilterArgumentError: method must be common, ceil or floor");
         return Value::number(r / scale);
       }},
      {"safe", [](const Value& v, CallArgs&) { return v; }},
      {"sort",
       [](const Value& v, CallArgs& a) {
         List items = iterate(v);
         const Value* rev = arg(a, 0, "reverse");
         const Value* cs = arg(a, 1, "case_sensitive");
         const Value* attr = arg(a, 2, "attribute");
         const bool case_sensitive = cs && truthy(*cs);
         auto key = [&](const Value& x) {
           Value k = attr ? attribute_path(x, to_str(*attr)) : x;
           if (!case_sensitive && k.is_string()) k = Value::string(map_case(k.s, false));
           return k;
         };
         std::stable_sort(items.begin(), items.end(), [&](const Value& p, const Value& q) {
           return compare_values(key(p), key(q)) < 0;
         });
         if (rev && truthy(*rev)) std::reverse(items.begin(), items.end());
         return Value::from_list(std::move(items));
       }},
      {"string", [](const Value& v, CallArgs&) { return Value::string(to_str(v)); }},
      {"sum",
       [](const Value& v, CallArgs& a) {
         const Value* attr = arg(a, 0, "attribute");
         const Value* start = arg(a, 1, "start");
         Value total = start ? *start : Value::integer(0);
         for (const Value& x : iterate(v))
           total = binary_op("+", total, attr ? attribute_path(x, to_str(*attr)) : x);
         return total;
       }},
      {"title", [](const Value& v, CallArgs&) { return Value::string(title(to_str(v))); }},
      {"tojson",
       [](const Value& v, CallArgs& a) {
         // transformers overrides jinja2's tojson: json.dumps(x, ensure_ascii=False, indent=...).
         JsonOptions o;
         if (const Value* ea = arg(a, 0, "ensure_ascii")) o.ensure_ascii = truthy(*ea);
         const Value* ind = arg(a, 1, "indent");
         if (ind && !ind->is_none()) {
           o.indent_set = true;
           o.indent =
               ind->is_string()
                   ? ind->s
                   : std::string(checked_repeat(1, as_int(*ind), "tojson indent"), ' ');
           o.item_separator = ",";
         }
         if (const Value* sep = arg(a, 2, "separators"); sep && !sep->is_none()) {
           if (!sep->is_list() || sep->list->size() != 2)
             type_error("tojson separators must be a pair");
           o.item_separator = to_str((*sep->list)[0]);
           o.key_separator = to_str((*sep->list)[1]);
         }
         if (const Value* sk = arg(a, 3, "sort_keys")) o.sort_keys = truthy(*sk);
         return Value::string(to_json(v, o));
       }},
      {"trim",
       [](const Value& v, CallArgs& a) {
         return Value::string(py_strip(to_str(v), arg(a, 0, "chars"), true, true));
       }},
      {"unique",
       [](const Value& v, CallArgs& a) {
         const Value* cs = arg(a, 0, "case_sensitive");
         const Value* attr = arg(a, 1, "attribute");
         List out;
         List seen;
         for (const Value& x : iterate(v)) {
           Value k = attr ? attribute_path(x, to_str(*attr)) : x;
           if (!(cs && truthy(*cs)) && k.is_string()) k = Value::string(map_case(k.s, false));
           if (std::none_of(seen.begin(), seen.end(),
                            [&](const Value& s) { return equals(s, k); })) {
             seen.push_back(k);
             out.push_back(x);
           }
         }
         return Value::from_list(std::move(out));
       }},
      {"wordcount",
       [](const Value& v, CallArgs&) {
         // jinja2 counts \w+ runs.
         int64_t n = 0;
         bool in_word = false;
         for (char32_t c : to_u32(to_str(v))) {
           const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
           const bool w = c == '_' ||
                          (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
                          (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
           if (w && !in_word) ++n;
           in_word = w;
         }
         return Value::integer(n);
       }},
      {"format",
       [](const Value& v, CallArgs& a) {
         return Value::string(percent_format(to_str(v), Value::from_list(a.positional, true)));
       }},
  };
  return table;
}

using TestFn = bool (*)(const Value&, CallArgs&);

const Value& test_arg(CallArgs& a, const char* test) {
  if (a.positional.empty()) type_error(std::string("test '") + test + "' needs an argument");
  return a.positional[0];
}

const std::map<std::string, TestFn>& tests() {
  static const std::map<std::string, TestFn> table = {
      {"defined", [](const Value& v, CallArgs&) { return !v.is_undefined(); }},
      {"undefined", [](const Value& v, CallArgs&) { return v.is_undefined(); }},
      {"none", [](const Value& v, CallArgs&) { return v.is_none(); }},
      {"boolean", [](const Value& v, CallArgs&) { return v.kind == Value::Kind::kBool; }},
      {"true", [](const Value& v, CallArgs&) { return v.kind == Value::Kind::kBool && v.b; }},
      {"false", [](const Value& v, CallArgs&) { return v.kind == Value::Kind::kBool && !v.b; }},
      {"integer", [](const Value& v, CallArgs&) { return v.kind == Value::Kind::kInt; }},
      {"float", [](const Value& v, CallArgs&) { return v.kind == Value::Kind::kFloat; }},
      {"number", [](const Value& v, CallArgs&) { return v.is_number(); }},
      {"string", [](const Value& v, CallArgs&) { return v.is_string(); }},
      {"mapping", [](const Value& v, CallArgs&) { return v.is_dict(); }},
      {"iterable",
       [](const Value& v, CallArgs&) {
         return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
       }},
      {"sequence",
       [](const Value& v, CallArgs&) {
         return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
       }},
      {"callable", [](const Value& v, CallArgs&) { return v.kind == Value::Kind::kFunction; }},
      {"even", [](const Value& v, CallArgs&) { return is_integral(v) && as_int(v) % 2 == 0; }},
      {"odd", [](const Value& v, CallArgs&) { return is_integral(v) && as_int(v) % 2 != 0; }},
      {"divisibleby",
       [](const Value& v, CallArgs& a) {
         const int64_t d = as_int(test_arg(a, "divisibleby"));
         return d != 0 && py_mod(as_int(v), d) == 0;
       }},
      {"lower",
       [](const Value& v, CallArgs&) { return v.is_string() && map_case(v.s, false) == v.s; }},
      {"upper",
       [](const Value& v, CallArgs&) { return v.is_string() && map_case(v.s, true) == v.s; }},
      {"sameas",
       [](const Value& v, CallArgs& a) {
         const Value& o = test_arg(a, "sameas");
         if (v.kind != o.kind) return false;
         if (v.is_none() || v.is_undefined()) return true;
         if (v.kind == Value::Kind::kBool) return v.b == o.b;
         return equals(v, o) && (v.list == o.list && v.dict == o.dict);
       }},
      {"eq", [](const Value& v, CallArgs& a) { return equals(v, test_arg(a, "eq")); }},
      {"ne", [](const Value& v, CallArgs& a) { return !equals(v, test_arg(a, "ne")); }},
      {"lt", [](const Value& v, CallArgs& a) { return compare_values(v, test_arg(a, "lt")) < 0; }},
      {"le", [](const Value& v, CallArgs& a) { return compare_values(v, test_arg(a, "le")) <= 0; }},
      {"gt", [](const Value& v, CallArgs& a) { return compare_values(v, test_arg(a, "gt")) > 0; }},
      {"ge", [](const Value& v, CallArgs& a) { return compare_values(v, test_arg(a, "ge")) >= 0; }},
      {"in", [](const Value& v, CallArgs& a) { return compare_op("in", v, test_arg(a, "in")); }},
      {"escaped", [](const Value&, CallArgs&) { return false; }},
  };
  return table;
}

const std::map<std::string, std::string>& aliases() {
  static const std::map<std::string, std::string> table = {
      {"d", "default"},      {"e", "escape"},    {"equalto", "eq"}, {"==", "eq"},
      {"!=", "ne"},          {"lessthan", "lt"}, {"<", "lt"},       {"<=", "le"},
      {"greaterthan", "gt"}, {">", "gt"},        {">=", "ge"}};
  return table;
}

std::string canonical(const std::string& name) {
  auto it = aliases().find(name);
  return it == aliases().end() ? name : it->second;
}

}  // namespace

bool has_filter(const std::string& name) {
  return filters().count(canonical(name)) > 0;
}
bool has_test(const std::string& name) {
  return tests().count(canonical(name)) > 0;
}

Value apply_filter(const std::string& name, const Value& v, CallArgs& args) {
  auto it = filters().find(canonical(name));
  if (it == filters().end()) throw TemplateError("no filter named '" + name + "'");
  return it->second(v, args);
}

bool apply_test(const std::string& name, const Value& v, CallArgs& args) {
  auto it = tests().find(canonical(name));
  if (it == tests().end()) throw TemplateError("no test named '" + name + "'");
  return it->second(v, args);
}

}  // namespace rlt::jinja
