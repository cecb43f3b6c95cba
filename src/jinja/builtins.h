// Jinja built-ins with jinja2 / Python semantics: filters, tests, the methods templates call on
// str / dict / list values, operators, and the globals of transformers' chat-template
// environment (range, dict, namespace, raise_exception, strftime_now).
#pragma once

#include <functional>
#include <string>

#include "jinja/value.h"

namespace rlt::jinja {

// Applies a filter by name; `apply_named` lets map/select call other filters and tests.
Value apply_filter(const std::string& name, const Value& v, CallArgs& args);
bool apply_test(const std::string& name, const Value& v, CallArgs& args);
bool has_filter(const std::string& name);
bool has_test(const std::string& name);

// obj.name: a bound method, a dict item, a namespace attribute, or undefined. Throws for
// attributes of an undefined value (jinja2's UndefinedError).
Value get_attribute(const Value& obj, const std::string& name);
// obj[key] (jinja2's getitem: falls back to attributes for string keys).
Value get_item(const Value& obj, const Value& key);
Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

Value binary_op(const std::string& op, const Value& a, const Value& b);
// ==, !=, <, >, <=, >=, in, not in
bool compare_op(const std::string& op, const Value& a, const Value& b);
Value negate(const Value& v);

// Items a for loop visits (list items, dict keys, string characters; nothing for undefined).
List iterate(const Value& v);
int64_t length(const Value& v);

// The global functions of the environment.
Value global_function(const std::string& name);

// Throws the jinja2-style error for using an undefined value.
[[noreturn]] void undefined_error(const Value& v);

}  // namespace rlt::jinja
