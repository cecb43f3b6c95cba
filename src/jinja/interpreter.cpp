#include "jinja/interpreter.h"

#include <fmt/format.h>

#include "jinja/builtins.h"
#include "jinja/lexer.h"
#include "jinja/support.h"

namespace rlt::jinja {
namespace {

// An error that already names its position in the template.
class PositionedError : public TemplateError {
 public:
  using TemplateError::TemplateError;
};

struct Scope {
  Scope* parent = nullptr;
  std::vector<std::pair<std::string, Value>> vars;

  const Value* find(std::string_view name) const {
    for (const Scope* s = this; s != nullptr; s = s->parent) {
      for (const auto& [k, v] : s->vars) {
        if (k == name) return &v;
      }
    }
    return nullptr;
  }
  void set(const std::string& name, Value v) {
    for (auto& [k, old] : vars) {
      if (k == name) {
        old = std::move(v);
        return;
      }
    }
    vars.emplace_back(name, std::move(v));
  }
};

enum class Flow { kNormal, kBreak, kContinue };

constexpr int kMaxDepth = 256;  // nested macro calls / statements, against runaway recursion

class Renderer {
 public:
  Renderer(const Template& t, const Dict& variables) : t_(t), vars_(variables) {}

  std::string run() {
    std::string out;
    root_.parent = nullptr;
    exec(t_.body, root_, out);
    return out;
  }

 private:
  [[noreturn]] void fail_at(size_t pos, const std::string& what) const {
    throw PositionedError(fmt::format("{} (at {})", what, describe_position(t_.source, pos)));
  }

  Flow exec(const Body& body, Scope& scope, std::string& out) {
    for (const StmtPtr& s : body) {
      Flow f = Flow::kNormal;
      try {
        f = exec_one(*s, scope, out);
      } catch (const PositionedError&) {
        throw;
      } catch (const TemplateError& e) {
        fail_at(s->pos, e.what());
      }
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

  Flow exec_one(const Stmt& s, Scope& scope, std::string& out) {
    switch (s.kind) {
      case Stmt::Kind::kText:
        append(out, s.text);
        return Flow::kNormal;
      case Stmt::Kind::kOutput:
        append(out, to_str(eval(*s.expr, scope)));
        return Flow::kNormal;
      case Stmt::Kind::kIf:
        for (size_t k = 0; k < s.conditions.size(); ++k) {
          if (truthy(eval(*s.conditions[k], scope))) return exec(s.bodies[k], scope, out);
        }
        return exec(s.else_body, scope, out);
      case Stmt::Kind::kFor:
        exec_for(s, scope, out);
        return Flow::kNormal;
      case Stmt::Kind::kSet:
        assign(s.target, eval(*s.expr, scope), scope);
        return Flow::kNormal;
      case Stmt::Kind::kSetBlock: {
        std::string captured;
        Scope inner{&scope, {}};
        exec(s.body, inner, captured);
        Value v = Value::string(std::move(captured));
        if (s.filter) v = apply_filter_chain(*s.filter, v, scope);
        assign(s.target, v, scope);
        return Flow::kNormal;
      }
      case Stmt::Kind::kMacro:
        scope.set(s.name, make_macro(s));
        return Flow::kNormal;
      case Stmt::Kind::kBreak:
        return Flow::kBreak;
      case Stmt::Kind::kContinue:
        return Flow::kContinue;
      case Stmt::Kind::kFilterBlock: {
        std::string captured;
        Scope inner{&scope, {}};
        exec(s.body, inner, captured);
        append(out, to_str(apply_filter_chain(*s.filter, Value::string(std::move(captured)), scope)));
        return Flow::kNormal;
      }
      case Stmt::Kind::kWith: {
        Scope inner{&scope, {}};
        for (const auto& [target, expr] : s.assignments) assign(target, eval(*expr, scope), inner);
        return exec(s.body, inner, out);
      }
      case Stmt::Kind::kScope:
        return exec(s.body, scope, out);
    }
    return Flow::kNormal;
  }

  // Every rendered text (the output, a {% set %} block, a macro's result) stays within the
  // per-value limit; the bytes count against the render's budget.
  void append(std::string& out, const std::string& text) {
    check_size(out.size() + text.size(), "rendered text");
    charge_bytes(text.size());
    out += text;
  }

  // The render's budgets (see kMaxRenderSteps / kMaxRenderBytes): loops and macro calls are the
  // only ways a template's run time can outgrow its length and its inputs.
  void charge_step() {
    if (++steps_ > kMaxRenderSteps)
      throw TemplateError(fmt::format("the template ran more than {} loop iterations and macro calls "
                                      "(sandbox limit)", kMaxRenderSteps));
  }
  void charge_bytes(size_t n) {
    bytes_ += n;
    if (bytes_ > kMaxRenderBytes)
      throw TemplateError(fmt::format("the template evaluated more than {} MiB of strings (sandbox limit)",
                                      kMaxRenderBytes >> 20));
  }

  // Whether `target` (a namespace's items) can be reached from `v` through lists, dicts and
  // namespaces.
  static bool reaches(const Value& v, const Dict& target, int depth) {
    if (depth > 1000) throw TemplateError("value nested too deeply");
    if (v.is_list()) {
      for (const Value& x : *v.list)
        if (reaches(x, target, depth + 1)) return true;
    } else if (v.dict) {
      if (v.dict.get() == &target) return true;
      for (const auto& [k, x] : v.dict->items)
        if (reaches(x, target, depth + 1)) return true;
    }
    return false;
  }

  void assign(const Target& t, const Value& v, Scope& scope) {
    if (!t.attr.empty()) {
      const Value* obj = lookup_ptr(t.names[0], scope);
      if (obj == nullptr || obj->kind != Value::Kind::kNamespace) {
        throw TemplateError("cannot assign attribute on non-namespace object '" + t.names[0] + "'");
      }
      // A namespace reachable from its own attribute is a shared_ptr cycle: it would leak and
      // make tojson / == recurse for ever. jinja2 allows it; no chat template needs it.
      if (reaches(v, *obj->dict, 0))
        throw TemplateError("cannot store namespace '" + t.names[0] + "' inside itself (a reference cycle)");
      obj->dict->set(t.attr, v);
      return;
    }
    if (!t.tuple) {
      scope.set(t.names[0], v);
      return;
    }
    const List items = iterate(v);
    if (items.size() != t.names.size()) {
      throw TemplateError(
          fmt::format("cannot unpack {} values into {} names", items.size(), t.names.size()));
    }
    for (size_t k = 0; k < items.size(); ++k) scope.set(t.names[k], items[k]);
  }

  void exec_for(const Stmt& s, Scope& scope, std::string& out) {
    const Value seq = eval(*s.expr, scope);
    if (seq.is_none()) throw TemplateError("TypeError: 'NoneType' object is not iterable");
    List items = iterate(seq);
    charge_bytes(shallow_bytes(items));  // the loop's copy of the sequence
    if (s.filter) {
      List kept;
      for (const Value& item : items) {
        charge_step();
        Scope probe{&scope, {}};
        assign(s.target, item, probe);
        if (truthy(eval(*s.filter, probe))) kept.push_back(item);
      }
      items.swap(kept);
    }
    // jinja2 renders the else block unless some iteration ran its body to the end: an
    // iteration left by {% continue %} or {% break %} does not count.
    bool completed_any = false;
    const auto n = static_cast<int64_t>(items.size());
    for (int64_t k = 0; k < n; ++k) {
      charge_step();
      Scope inner{&scope, {}};
      assign(s.target, items[static_cast<size_t>(k)], inner);
      Dict loop;
      loop.set("index", Value::integer(k + 1));
      loop.set("index0", Value::integer(k));
      loop.set("revindex", Value::integer(n - k));
      loop.set("revindex0", Value::integer(n - k - 1));
      loop.set("first", Value::boolean(k == 0));
      loop.set("last", Value::boolean(k == n - 1));
      loop.set("length", Value::integer(n));
      loop.set("depth", Value::integer(1));
      loop.set("depth0", Value::integer(0));
      loop.set("previtem",
               k > 0 ? items[static_cast<size_t>(k - 1)] : Value::undefined("previtem"));
      loop.set("nextitem",
               k + 1 < n ? items[static_cast<size_t>(k + 1)] : Value::undefined("nextitem"));
      loop.set("cycle", Value::function("cycle", [k](CallArgs& a) {
                 if (a.positional.empty()) throw TemplateError("no items for cycling given");
                 return a.positional[static_cast<size_t>(k) % a.positional.size()];
               }));
      inner.set("loop", Value::from_dict(std::move(loop)));
      const Flow f = exec(s.body, inner, out);
      if (f == Flow::kBreak) break;
      if (f == Flow::kNormal) completed_any = true;
    }
    if (!completed_any && !s.else_body.empty()) {
      Scope inner{&scope, {}};
      exec(s.else_body, inner, out);
    }
  }

  Value make_macro(const Stmt& s) {
    const Stmt* def = &s;
    return Value::function(s.name, [this, def](CallArgs& a) {
      if (++depth_ > kMaxDepth) throw TemplateError("maximum recursion depth exceeded");
      charge_step();
      Scope frame{&root_, {}};
      if (a.positional.size() > def->params.size()) {
        throw TemplateError(fmt::format("macro '{}' takes not more than {} argument(s)", def->name,
                                        def->params.size()));
      }
      for (size_t k = 0; k < def->params.size(); ++k) {
        const std::string& p = def->params[k];
        if (k < a.positional.size()) {
          frame.set(p, a.positional[k]);
        } else if (const Value* kw = a.kwarg(p)) {
          frame.set(p, *kw);
        } else if (def->defaults[k]) {
          frame.set(p, eval(*def->defaults[k], frame));
        } else {
          frame.set(p, Value::undefined(p));
        }
      }
      for (const auto& [k, v] : a.keyword) {
        if (std::find(def->params.begin(), def->params.end(), k) == def->params.end()) {
          throw TemplateError(fmt::format("macro '{}' has no argument '{}'", def->name, k));
        }
      }
      std::string out;
      exec(def->body, frame, out);
      --depth_;
      return Value::string(std::move(out));
    });
  }

  const Value* lookup_ptr(const std::string& name, const Scope& scope) const {
    if (const Value* v = scope.find(name)) return v;
    return vars_.find(name);
  }

  Value lookup(const std::string& name, const Scope& scope) const {
    if (const Value* v = lookup_ptr(name, scope)) return *v;
    return global_function(name);  // undefined(name) when there is no such global
  }

  CallArgs eval_args(const Expr& e, Scope& scope) {
    CallArgs a;
    for (const ExprPtr& x : e.args) a.positional.push_back(eval(*x, scope));
    for (const auto& [k, x] : e.kwargs) a.keyword.emplace_back(k, eval(*x, scope));
    return a;
  }

  // Applies the filters of a {% filter %} / {% set x | f %} chain (innermost first).
  Value apply_filter_chain(const Expr& chain, Value input, Scope& scope) {
    if (chain.kind != Expr::Kind::kFilter) return input;
    if (chain.items[0]) input = apply_filter_chain(*chain.items[0], std::move(input), scope);
    CallArgs a = eval_args(chain, scope);
    return apply_filter(chain.name, input, a);
  }

  // Strings are copied by value: every evaluated string counts against the byte budget, so
  // that a loop re-reading a long string cannot run for hours within the step budget.
  Value eval(const Expr& e, Scope& scope) {
    Value v = eval_expr(e, scope);
    if (v.is_string()) charge_bytes(v.s.size());
    return v;
  }

  Value eval_expr(const Expr& e, Scope& scope) {
    switch (e.kind) {
      case Expr::Kind::kLiteral:
        return e.value;
      case Expr::Kind::kName:
        return lookup(e.name, scope);
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        List items;
        for (const ExprPtr& x : e.items) items.push_back(eval(*x, scope));
        return Value::from_list(std::move(items), e.kind == Expr::Kind::kTuple);
      }
      case Expr::Kind::kDict: {
        Dict d;
        for (size_t k = 0; k + 1 < e.items.size(); k += 2) {
          const Value key = eval(*e.items[k], scope);
          if (!key.is_string())
            throw TemplateError("only string keys are supported in dict literals");
          d.set(key.s, eval(*e.items[k + 1], scope));
        }
        return Value::from_dict(std::move(d));
      }
      case Expr::Kind::kAttr:
        return get_attribute(eval(*e.items[0], scope), e.name);
      case Expr::Kind::kItem:
        return get_item(eval(*e.items[0], scope), eval(*e.items[1], scope));
      case Expr::Kind::kSlice: {
        auto part = [&](size_t k) { return e.items[k] ? eval(*e.items[k], scope) : Value::none(); };
        return slice(eval(*e.items[0], scope), part(1), part(2), part(3));
      }
      case Expr::Kind::kCall: {
        const Value fn = eval(*e.items[0], scope);
        CallArgs a = eval_args(e, scope);
        if (fn.kind == Value::Kind::kFunction) return (*fn.fn)(a);
        if (fn.is_undefined()) undefined_error(fn);
        throw TemplateError("'" + type_name(fn) + "' object is not callable");
      }
      case Expr::Kind::kFilter: {
        const Value v = eval(*e.items[0], scope);
        CallArgs a = eval_args(e, scope);
        return apply_filter(e.name, v, a);
      }
      case Expr::Kind::kTest: {
        const Value v = eval(*e.items[0], scope);
        CallArgs a = eval_args(e, scope);
        return Value::boolean(apply_test(e.name, v, a) != e.negated);
      }
      case Expr::Kind::kUnary: {
        const Value v = eval(*e.items[0], scope);
        if (e.name == "not") return Value::boolean(!truthy(v));
        if (e.name == "-") return negate(v);
        if (!v.is_number())
          throw TemplateError("bad operand type for unary +: '" + type_name(v) + "'");
        return v;
      }
      case Expr::Kind::kBinary: {
        if (e.name == "and") {
          Value l = eval(*e.items[0], scope);
          return truthy(l) ? eval(*e.items[1], scope) : l;
        }
        if (e.name == "or") {
          Value l = eval(*e.items[0], scope);
          return truthy(l) ? l : eval(*e.items[1], scope);
        }
        return binary_op(e.name, eval(*e.items[0], scope), eval(*e.items[1], scope));
      }
      case Expr::Kind::kCompare: {
        Value left = eval(*e.items[0], scope);
        for (size_t k = 0; k < e.ops.size(); ++k) {
          Value right = eval(*e.items[k + 1], scope);
          if (!compare_op(e.ops[k], left, right)) return Value::boolean(false);
          left = std::move(right);
        }
        return Value::boolean(true);
      }
      case Expr::Kind::kCondition:
        if (truthy(eval(*e.items[0], scope))) return eval(*e.items[1], scope);
        return e.items[2] ? eval(*e.items[2], scope) : Value::undefined();
    }
    return Value::undefined();
  }

  const Template& t_;
  const Dict& vars_;
  Scope root_;
  int depth_ = 0;
  int64_t steps_ = 0;
  size_t bytes_ = 0;
};

}  // namespace

std::string render(const Template& tmpl, const Dict& variables) {
  return Renderer(tmpl, variables).run();
}

}  // namespace rlt::jinja
