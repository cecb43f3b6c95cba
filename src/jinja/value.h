// Values of rlt's Jinja interpreter, with Python's semantics where templates can observe them:
// truthiness, equality, str() and repr() formatting, and json.dumps for the tojson filter.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rlt::jinja {

// A template error (syntax, undefined access, type error, raise_exception). Thrown inside the
// interpreter and turned into a Status by ChatTemplate; it never crosses the module's API.
class TemplateError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Sandbox limits. jinja2's sandbox bounds only range(); rlt renders templates from downloaded
// models with messages and kwargs from HTTP clients, so it also bounds what one render may build
// and run: without these, a short template ('x' * 10**12, range(100000) loops nested twice, a
// macro calling itself twice per call) pins a server thread or exhausts memory. The limits sit
// far above what real chat templates need (they render a conversation once).
inline constexpr size_t kMaxValueBytes = size_t{64} << 20;  // one string or list, and the output
inline constexpr int64_t kMaxRenderSteps = 500'000;         // loop iterations + macro calls
inline constexpr size_t kMaxRenderBytes = size_t{1} << 30;  // bytes of strings a render evaluates
// Throws a TemplateError naming the limit when a `what` of `bytes` would exceed kMaxValueBytes.
void check_size(size_t bytes, std::string_view what);

struct Value;
using List = std::vector<Value>;

// Insertion-ordered string-keyed map, like a Python dict built from JSON.
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(std::string_view key) const;
  void set(std::string key, Value v);
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  const Value* kwarg(std::string_view name) const;
};

using Function = std::function<Value(CallArgs&)>;

struct Value {
  enum class Kind {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kDict,
    kNamespace,
    kFunction
  };
  Kind kind = Kind::kUndefined;
  bool is_tuple = false;  // a list that prints as a Python tuple
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;                     // kString; for kUndefined, the name that was looked up
  std::shared_ptr<const List> list;  // kList (immutable once built, as in the sandbox)
  std::shared_ptr<Dict> dict;        // kDict (immutable) and kNamespace (mutable, shared)
  std::shared_ptr<const Function> fn;
  std::string fn_name;  // kFunction, for messages and printing

  static Value undefined(std::string name = "") {
    Value v;
    v.s = std::move(name);
    return v;
  }
  static Value none() { return make(Kind::kNone); }
  static Value boolean(bool x) {
    Value v = make(Kind::kBool);
    v.b = x;
    return v;
  }
  static Value integer(int64_t x) {
    Value v = make(Kind::kInt);
    v.i = x;
    return v;
  }
  static Value number(double x) {
    Value v = make(Kind::kFloat);
    v.f = x;
    return v;
  }
  static Value string(std::string x) {
    Value v = make(Kind::kString);
    v.s = std::move(x);
    return v;
  }
  static Value from_list(List items, bool tuple = false) {
    Value v = make(Kind::kList);
    v.list = std::make_shared<const List>(std::move(items));
    v.is_tuple = tuple;
    return v;
  }
  static Value from_dict(Dict d) {
    Value v = make(Kind::kDict);
    v.dict = std::make_shared<Dict>(std::move(d));
    return v;
  }
  static Value from_namespace(Dict d) {
    Value v = make(Kind::kNamespace);
    v.dict = std::make_shared<Dict>(std::move(d));
    return v;
  }
  static Value function(std::string name, Function f) {
    Value v = make(Kind::kFunction);
    v.fn = std::make_shared<const Function>(std::move(f));
    v.fn_name = std::move(name);
    return v;
  }

  bool is_undefined() const { return kind == Kind::kUndefined; }
  bool is_none() const { return kind == Kind::kNone; }
  bool is_string() const { return kind == Kind::kString; }
  bool is_number() const {
    return kind == Kind::kInt || kind == Kind::kFloat || kind == Kind::kBool;
  }
  bool is_list() const { return kind == Kind::kList; }
  bool is_dict() const { return kind == Kind::kDict; }

 private:
  static Value make(Kind k) {
    Value v;
    v.kind = k;
    return v;
  }
};

// Python's name for the value's type ("str", "int", "list", "dict", ...).
std::string type_name(const Value& v);
bool truthy(const Value& v);
// Python ==, with 1 == 1.0 == True.
bool equals(const Value& a, const Value& b);
// Python str(): what {{ value }} prints ("" for undefined).
std::string to_str(const Value& v);
// Python repr().
std::string repr(const Value& v);
// Python repr() of a float ("1.0", "1e+20", "0.30000000000000004").
std::string float_repr(double x);

// Python json.dumps(v, ensure_ascii, indent, separators, sort_keys) as transformers' tojson.
struct JsonOptions {
  bool ensure_ascii = false;
  bool indent_set = false;
  std::string indent;  // the per-level indent string when indent_set
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
};
std::string to_json(const Value& v, const JsonOptions& options);

Value from_json(const nlohmann::ordered_json& j);

}  // namespace rlt::jinja
