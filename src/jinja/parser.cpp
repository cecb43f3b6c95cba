#include "jinja/parser.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <set>

#include "jinja/lexer.h"

namespace rlt::jinja {
namespace {

using T = Token::Type;

class Parser {
 public:
  explicit Parser(LexedTemplate lexed) : lx_(std::move(lexed)) {}

  Template run() {
    Template t;
    t.body = parse_body({});
    if (peek().type != T::kEof) fail("unexpected token", peek().pos);
    t.source = std::move(lx_.source);
    return t;
  }

 private:
  [[noreturn]] void fail(const std::string& what, size_t pos) const {
    throw TemplateError(fmt::format("{} at {}", what, describe_position(lx_.source, pos)));
  }

  const Token& peek(size_t ahead = 0) const {
    const size_t i = std::min(i_ + ahead, lx_.tokens.size() - 1);
    return lx_.tokens[i];
  }
  const Token& next() {
    const Token& t = peek();
    if (i_ < lx_.tokens.size() - 1) ++i_;
    return t;
  }
  bool is_op(std::string_view op, size_t ahead = 0) const {
    return peek(ahead).type == T::kOperator && peek(ahead).value == op;
  }
  bool is_name(std::string_view n, size_t ahead = 0) const {
    return peek(ahead).type == T::kName && peek(ahead).value == n;
  }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view n) {
    if (!is_name(n)) return false;
    next();
    return true;
  }
  void expect_op(std::string_view op) {
    if (!skip_op(op)) fail(fmt::format("expected '{}'", op), peek().pos);
  }
  std::string expect_name() {
    if (peek().type != T::kName) fail("expected a name", peek().pos);
    return next().value;
  }
  // The ".part" continuations of a dotted filter or test name, appended to `name`. (In two steps:
  // GCC 12 misreports `"." + std::string&&` as overlapping copies, -Wrestrict.)
  void append_dotted_parts(std::string& name) {
    while (skip_op(".")) {
      name += '.';
      name += expect_name();
    }
  }
  void expect_block_end() {
    if (peek().type != T::kBlockEnd) fail("expected end of block tag '%}'", peek().pos);
    next();
  }

  // ---- statements -------------------------------------------------------------------------

  // Parses until a block tag whose first name is in `ends` (left unconsumed) or EOF.
  Body parse_body(const std::set<std::string>& ends) {
    Body body;
    while (true) {
      const Token& t = peek();
      if (t.type == T::kEof) {
        if (!ends.empty()) {
          fail(fmt::format("missing end tag (expected one of: {})", fmt::join(ends, ", ")), t.pos);
        }
        return body;
      }
      if (t.type == T::kText) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kText;
        s->pos = t.pos;
        s->text = next().value;
        body.push_back(std::move(s));
      } else if (t.type == T::kVariableBegin) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kOutput;
        s->pos = next().pos;
        s->expr = parse_expression();
        if (peek().type != T::kVariableEnd) fail("expected end of print tag '}}'", peek().pos);
        next();
        body.push_back(std::move(s));
      } else if (t.type == T::kBlockBegin) {
        if (peek(1).type == T::kName && ends.count(peek(1).value)) return body;
        next();
        body.push_back(parse_statement());
      } else {
        fail("unexpected token", t.pos);
      }
    }
  }

  // Consumes "{% name" for an expected end/else tag.
  void open_tag(const std::string& name) {
    if (peek().type != T::kBlockBegin || !is_name(name, 1))
      fail("expected {% " + name + " %}", peek().pos);
    next();
    next();
  }

  StmtPtr parse_statement() {
    DepthGuard guard(*this, peek().pos);
    const Token& kw = peek();
    if (kw.type != T::kName) fail("expected a statement name", kw.pos);
    const std::string name = kw.value;
    const size_t pos = kw.pos;
    next();
    auto s = std::make_unique<Stmt>();
    s->pos = pos;
    if (name == "if") {
      s->kind = Stmt::Kind::kIf;
      s->conditions.push_back(parse_expression());
      expect_block_end();
      s->bodies.push_back(parse_body({"elif", "else", "endif"}));
      while (true) {
        next();  // {%
        const std::string tag = next().value;
        if (tag == "elif") {
          s->conditions.push_back(parse_expression());
          expect_block_end();
          s->bodies.push_back(parse_body({"elif", "else", "endif"}));
        } else if (tag == "else") {
          expect_block_end();
          s->else_body = parse_body({"endif"});
          open_tag("endif");
          expect_block_end();
          break;
        } else {
          expect_block_end();
          break;
        }
      }
    } else if (name == "for") {
      s->kind = Stmt::Kind::kFor;
      s->target = parse_target(false);
      if (!skip_name("in")) fail("expected 'in' in for loop", peek().pos);
      s->expr = parse_condexpr_no_if();
      if (skip_name("if")) s->filter = parse_expression();
      if (skip_name("recursive")) {
        fail("recursive for loops are not supported", pos);
      }
      expect_block_end();
      s->body = parse_body({"endfor", "else"});
      next();
      if (next().value == "else") {
        expect_block_end();
        s->else_body = parse_body({"endfor"});
        open_tag("endfor");
      }
      expect_block_end();
    } else if (name == "set") {
      s->target = parse_target(true);
      if (skip_op("=")) {
        s->kind = Stmt::Kind::kSet;
        s->expr = parse_tuple_expression();
        expect_block_end();
      } else {
        s->kind = Stmt::Kind::kSetBlock;
        if (s->target.tuple || !s->target.attr.empty()) fail("block set needs a plain name", pos);
        if (is_op("|")) s->filter = parse_filter_chain(nullptr);
        expect_block_end();
        s->body = parse_body({"endset"});
        open_tag("endset");
        expect_block_end();
      }
    } else if (name == "macro") {
      s->kind = Stmt::Kind::kMacro;
      s->name = expect_name();
      expect_op("(");
      while (!is_op(")")) {
        s->params.push_back(expect_name());
        s->defaults.push_back(skip_op("=") ? parse_expression() : nullptr);
        if (!skip_op(",")) break;
      }
      expect_op(")");
      expect_block_end();
      s->body = parse_body({"endmacro"});
      open_tag("endmacro");
      if (peek().type == T::kName) next();  // {% endmacro name %}
      expect_block_end();
    } else if (name == "break" || name == "continue") {
      s->kind = name == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
      expect_block_end();
    } else if (name == "filter") {
      s->kind = Stmt::Kind::kFilterBlock;
      s->filter = parse_filter_chain(nullptr, /*leading_pipe=*/false);
      expect_block_end();
      s->body = parse_body({"endfilter"});
      open_tag("endfilter");
      expect_block_end();
    } else if (name == "with") {
      s->kind = Stmt::Kind::kWith;
      while (peek().type != T::kBlockEnd) {
        Target t = parse_target(false);
        expect_op("=");
        s->assignments.emplace_back(std::move(t), parse_expression());
        if (!skip_op(",")) break;
      }
      expect_block_end();
      s->body = parse_body({"endwith"});
      open_tag("endwith");
      expect_block_end();
    } else if (name == "generation") {
      // transformers' AssistantTracker extension: renders its body unchanged.
      s->kind = Stmt::Kind::kScope;
      expect_block_end();
      s->body = parse_body({"endgeneration"});
      open_tag("endgeneration");
      expect_block_end();
    } else {
      static const std::set<std::string> kKnown = {"extends", "include",   "import", "from",
                                                   "block",   "call",      "do",     "autoescape",
                                                   "trans",   "pluralize", "debug"};
      if (kKnown.count(name)) {
        fail(fmt::format("the '{}' statement is not supported in chat templates", name), pos);
      }
      fail(fmt::format("unknown statement '{}'", name), pos);
    }
    return s;
  }

  // name | name, name | (name, name) | name.attr (when allow_attr)
  Target parse_target(bool allow_attr) {
    Target t;
    const bool paren = skip_op("(");
    t.names.push_back(expect_name());
    if (allow_attr && !paren && skip_op(".")) {
      t.attr = expect_name();
      return t;
    }
    while (skip_op(",")) {
      t.tuple = true;
      if (peek().type != T::kName) break;
      t.names.push_back(expect_name());
    }
    if (paren) {
      t.tuple = true;
      expect_op(")");
    }
    return t;
  }

  // ---- expressions (jinja2 precedence) ------------------------------------------------------

  ExprPtr make(Expr::Kind k, size_t pos) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->pos = pos;
    return e;
  }

  // "a, b" without parentheses is a tuple (set statements and for targets' iterables).
  ExprPtr parse_tuple_expression() {
    const size_t pos = peek().pos;
    ExprPtr first = parse_expression();
    if (!is_op(",")) return first;
    auto t = make(Expr::Kind::kTuple, pos);
    t->items.push_back(std::move(first));
    while (skip_op(",")) {
      if (peek().type == T::kBlockEnd) break;
      t->items.push_back(parse_expression());
    }
    return t;
  }

  ExprPtr parse_expression() { return parse_condexpr(); }

  ExprPtr parse_condexpr() {
    const size_t pos = peek().pos;
    ExprPtr e = parse_or();
    while (skip_name("if")) {
      auto c = make(Expr::Kind::kCondition, pos);
      ExprPtr cond = parse_or();
      ExprPtr other = skip_name("else") ? parse_condexpr() : nullptr;
      c->items.push_back(std::move(cond));
      c->items.push_back(std::move(e));
      c->items.push_back(std::move(other));
      e = std::move(c);
    }
    return e;
  }

  // A for loop's iterable: no conditional expression (its "if" is the loop filter).
  ExprPtr parse_condexpr_no_if() { return parse_or(); }

  ExprPtr binary(std::string op, ExprPtr l, ExprPtr r, size_t pos) {
    auto b = make(Expr::Kind::kBinary, pos);
    b->name = std::move(op);
    b->items.push_back(std::move(l));
    b->items.push_back(std::move(r));
    return b;
  }

  ExprPtr parse_or() {
    ExprPtr l = parse_and();
    while (is_name("or")) {
      const size_t pos = next().pos;
      l = binary("or", std::move(l), parse_and(), pos);
    }
    return l;
  }

  ExprPtr parse_and() {
    ExprPtr l = parse_not();
    while (is_name("and")) {
      const size_t pos = next().pos;
      l = binary("and", std::move(l), parse_not(), pos);
    }
    return l;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      const size_t pos = next().pos;
      auto u = make(Expr::Kind::kUnary, pos);
      u->name = "not";
      u->items.push_back(parse_not());
      return u;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const size_t pos = peek().pos;
    ExprPtr first = parse_math1();
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (peek().type == T::kOperator &&
          (peek().value == "==" || peek().value == "!=" || peek().value == "<" ||
           peek().value == ">" || peek().value == "<=" || peek().value == ">=")) {
        op = next().value;
      } else if (is_name("in")) {
        next();
        op = "in";
      } else if (is_name("not") && is_name("in", 1)) {
        next();
        next();
        op = "not in";
      } else {
        break;
      }
      if (!cmp) {
        cmp = make(Expr::Kind::kCompare, pos);
        cmp->items.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->items.push_back(parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  ExprPtr parse_math1() {
    ExprPtr l = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& t = next();
      l = binary(t.value, std::move(l), parse_concat(), t.pos);
    }
    return l;
  }

  ExprPtr parse_concat() {
    ExprPtr l = parse_math2();
    while (is_op("~")) {
      const size_t pos = next().pos;
      l = binary("~", std::move(l), parse_math2(), pos);
    }
    return l;
  }

  ExprPtr parse_math2() {
    ExprPtr l = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& t = next();
      l = binary(t.value, std::move(l), parse_pow(), t.pos);
    }
    return l;
  }

  ExprPtr parse_pow() {
    ExprPtr l = parse_unary(true);
    while (is_op("**")) {
      const size_t pos = next().pos;
      l = binary("**", std::move(l), parse_unary(true), pos);
    }
    return l;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this, peek().pos);
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      const Token& t = next();
      node = make(Expr::Kind::kUnary, t.pos);
      node->name = t.value;
      node->items.push_back(parse_unary(false));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& t = peek();
    switch (t.type) {
      case T::kName: {
        next();
        const std::string& n = t.value;
        auto lit = make(Expr::Kind::kLiteral, t.pos);
        if (n == "true" || n == "True") {
          lit->value = Value::boolean(true);
        } else if (n == "false" || n == "False") {
          lit->value = Value::boolean(false);
        } else if (n == "none" || n == "None") {
          lit->value = Value::none();
        } else {
          auto name = make(Expr::Kind::kName, t.pos);
          name->name = n;
          return name;
        }
        return lit;
      }
      case T::kString: {
        auto lit = make(Expr::Kind::kLiteral, t.pos);
        std::string s = next().value;
        while (peek().type == T::kString) s += next().value;  // adjacent literals concatenate
        lit->value = Value::string(std::move(s));
        return lit;
      }
      case T::kInteger: {
        auto lit = make(Expr::Kind::kLiteral, t.pos);
        int64_t v = 0;
        const std::string& text = t.value;
        auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (ec != std::errc()) fail("integer literal out of range", t.pos);
        next();
        lit->value = Value::integer(v);
        return lit;
      }
      case T::kFloat: {
        auto lit = make(Expr::Kind::kLiteral, t.pos);
        // strtod, not stod: Python reads 1e309 as inf where stod would throw out_of_range.
        lit->value = Value::number(std::strtod(next().value.c_str(), nullptr));
        return lit;
      }
      case T::kOperator:
        if (t.value == "(") {
          const size_t pos = next().pos;
          if (skip_op(")")) return make(Expr::Kind::kTuple, pos);
          ExprPtr first = parse_expression();
          if (skip_op(")")) return first;
          auto tup = make(Expr::Kind::kTuple, pos);
          tup->items.push_back(std::move(first));
          while (skip_op(",")) {
            if (is_op(")")) break;
            tup->items.push_back(parse_expression());
          }
          expect_op(")");
          return tup;
        }
        if (t.value == "[") {
          auto list = make(Expr::Kind::kList, next().pos);
          while (!is_op("]")) {
            list->items.push_back(parse_expression());
            if (!skip_op(",")) break;
          }
          expect_op("]");
          return list;
        }
        if (t.value == "{") {
          auto dict = make(Expr::Kind::kDict, next().pos);
          while (!is_op("}")) {
            dict->items.push_back(parse_expression());
            expect_op(":");
            dict->items.push_back(parse_expression());
            if (!skip_op(",")) break;
          }
          expect_op("}");
          return dict;
        }
        break;
      default:
        break;
    }
    fail(t.type == T::kEof ? "unexpected end of template" : "unexpected token '" + t.value + "'",
         t.pos);
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".")) {
        const size_t pos = next().pos;
        auto a = make(Expr::Kind::kAttr, pos);
        if (peek().type == T::kInteger) {
          // foo.0 is foo[0] in jinja2.
          a->kind = Expr::Kind::kItem;
          a->items.push_back(std::move(node));
          auto idx = make(Expr::Kind::kLiteral, peek().pos);
          int64_t v = 0;
          const std::string& text = peek().value;
          if (std::from_chars(text.data(), text.data() + text.size(), v).ec != std::errc())
            fail("integer literal out of range", peek().pos);
          next();
          idx->value = Value::integer(v);
          a->items.push_back(std::move(idx));
        } else {
          a->name = expect_name();
          a->items.push_back(std::move(node));
        }
        node = std::move(a);
      } else if (is_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const size_t pos = next().pos;  // [
    ExprPtr parts[3];
    int colons = 0;
    for (int k = 0; k < 3; ++k) {
      if (!is_op(":") && !is_op("]")) parts[k] = parse_expression();
      if (k < 2 && skip_op(":")) {
        ++colons;
        continue;
      }
      break;
    }
    expect_op("]");
    if (colons == 0) {
      if (!parts[0]) fail("empty subscript", pos);
      auto item = make(Expr::Kind::kItem, pos);
      item->items.push_back(std::move(node));
      item->items.push_back(std::move(parts[0]));
      return item;
    }
    auto slice = make(Expr::Kind::kSlice, pos);
    slice->items.push_back(std::move(node));
    for (auto& p : parts) slice->items.push_back(std::move(p));
    return slice;
  }

  void parse_args(Expr& call) {
    expect_op("(");
    while (!is_op(")")) {
      if (peek().type == T::kName && is_op("=", 1)) {
        std::string key = next().value;
        next();
        call.kwargs.emplace_back(std::move(key), parse_expression());
      } else {
        if (!call.kwargs.empty()) fail("positional argument after keyword argument", peek().pos);
        if (is_op("*") || is_op("**"))
          fail("*args / **kwargs in calls are not supported", peek().pos);
        call.args.push_back(parse_expression());
      }
      if (!skip_op(",")) break;
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr node) {
    auto call = make(Expr::Kind::kCall, peek().pos);
    call->items.push_back(std::move(node));
    parse_args(*call);
    return call;
  }

  // node | f | g(x) ...; with leading_pipe false the first filter has no "|" ({% filter %}).
  ExprPtr parse_filter_chain(ExprPtr node, bool leading_pipe = true) {
    bool first = true;
    while ((first && !leading_pipe) || is_op("|")) {
      if (!(first && !leading_pipe)) next();
      first = false;
      auto f = make(Expr::Kind::kFilter, peek().pos);
      f->name = expect_name();
      append_dotted_parts(f->name);
      if (is_op("(")) parse_args(*f);
      f->items.push_back(std::move(node));
      node = std::move(f);
    }
    return node;
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op("|")) {
        node = parse_filter_chain(std::move(node));
      } else if (is_name("is")) {
        const size_t pos = next().pos;
        auto t = make(Expr::Kind::kTest, pos);
        t->negated = skip_name("not");
        // Test names may be keywords (none, true, false, in...).
        if (peek().type != T::kName && !(is_op("==") || is_op("!=") || is_op("<") || is_op(">") ||
                                         is_op("<=") || is_op(">="))) {
          fail("expected a test name after 'is'", peek().pos);
        }
        t->name = next().value;
        append_dotted_parts(t->name);
        if (is_op("(")) {
          parse_args(*t);
        } else if (peek().type == T::kString || peek().type == T::kInteger ||
                   peek().type == T::kFloat ||
                   (peek().type == T::kName && !is_name("and") && !is_name("or") &&
                    !is_name("else") && !is_name("if") && !is_name("in") && !is_name("is") &&
                    !is_name("not"))) {
          t->args.push_back(parse_unary(false));  // "x is divisibleby 3"
        }
        t->items.push_back(std::move(node));
        node = std::move(t);
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  // Bounds recursion (nested expressions and blocks) so hostile templates cannot overflow the
  // stack.
  struct DepthGuard {
    DepthGuard(Parser& p, size_t pos) : p_(p) {
      if (++p_.depth_ > kMaxDepth) p_.fail("template nested too deeply", pos);
    }
    ~DepthGuard() { --p_.depth_; }
    Parser& p_;
  };
  static constexpr int kMaxDepth = 200;

  LexedTemplate lx_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

Template parse(std::string_view source) {
  return Parser(lex(source)).run();
}

}  // namespace rlt::jinja
