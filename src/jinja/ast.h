// Syntax tree of a parsed Jinja template.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "jinja/value.h"

namespace rlt::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,    // value
    kName,       // name
    kList,       // items
    kTuple,      // items
    kDict,       // items = key0, value0, key1, value1, ...
    kAttr,       // items[0].name
    kItem,       // items[0][items[1]]
    kSlice,      // items[0][items[1]:items[2]:items[3]] (null = omitted)
    kCall,       // items[0](args, kwargs)
    kFilter,     // items[0] | name(args, kwargs); items[0] null inside {% filter %}
    kTest,       // items[0] is [not] name(args)
    kUnary,      // op items[0]: "-", "+", "not"
    kBinary,     // items[0] op items[1]: + - * / // % ** ~ and or
    kCompare,    // items[0] ops[0] items[1] ops[1] items[2] ...
    kCondition,  // items[1] if items[0] else items[2] (items[2] null = undefined)
  };
  Kind kind;
  size_t pos = 0;
  Value value;
  std::string name;  // name / attribute / filter / test / operator
  bool negated = false;
  std::vector<ExprPtr> items;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// An assignment target: a name, a tuple of names, or namespace.attr.
struct Target {
  std::vector<std::string> names;  // one name, or several for tuple unpacking
  bool tuple = false;
  std::string attr;  // non-empty: names[0].attr = ... (namespace attribute)
};

struct Stmt {
  enum class Kind {
    kText,      // text
    kOutput,    // {{ expr }}
    kIf,        // conditions[i] -> bodies[i]; else_body
    kFor,       // target in expr [if filter] body [else else_body]
    kSet,       // target = expr
    kSetBlock,  // {% set target %}body{% endset %}, optional filter
    kMacro,     // name(params = defaults) body
    kBreak,
    kContinue,
    kFilterBlock,  // {% filter f %}body{% endfilter %}
    kWith,         // {% with a = x %}body{% endwith %}
    kScope,        // body rendered as is ({% generation %})
  };
  Kind kind;
  size_t pos = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr filter;  // kFor condition; kSetBlock / kFilterBlock filter chain
  Target target;
  std::vector<ExprPtr> conditions;
  std::vector<Body> bodies;
  Body body;
  Body else_body;
  bool recursive = false;
  std::string name;                 // kMacro
  std::vector<std::string> params;  // kMacro
  std::vector<ExprPtr> defaults;    // kMacro: parallel to params (null = required)
  std::vector<std::pair<Target, ExprPtr>> assignments;  // kWith
};

struct Template {
  std::string source;
  Body body;
};

}  // namespace rlt::jinja
