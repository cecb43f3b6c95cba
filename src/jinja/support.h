// Helpers with Python's semantics (str methods, numbers, formatting) shared by the Jinja
// built-ins. Private to the tokenizer module.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "jinja/value.h"

namespace rlt::jinja {

[[noreturn]] void type_error(const std::string& msg);

// The bytes `n` copies of `unit` bytes take, checked against kMaxValueBytes without overflow.
size_t checked_repeat(size_t unit, int64_t n, std::string_view what);
// What copying a list costs: its items and the strings they hold (nested lists are shared).
size_t shallow_bytes(const List& items);
// Argument `index` (positional) or `name` (keyword), or nullptr.
const Value* arg(const CallArgs& a, size_t index, std::string_view name);

std::u32string to_u32(const std::string& s);
std::string from_u32(const std::u32string& s);

bool is_integral(const Value& v);  // int or bool
int64_t as_int(const Value& v);
double as_double(const Value& v);
int64_t floor_div(int64_t a, int64_t b);
int64_t py_mod(int64_t a, int64_t b);
// Python's ordering (<) of numbers, strings and sequences; throws for other types.
int compare_values(const Value& a, const Value& b);

std::string py_strip(const std::string& s, const Value* chars, bool left, bool right);
List py_split(const std::string& s, const Value* sep, int64_t maxsplit);
std::string py_replace(const std::string& s, const std::string& old, const std::string& rep,
                       int64_t count);
std::string map_case(const std::string& s, bool upper);
std::string capitalize(const std::string& s);
std::string title(const std::string& s);                                    // jinja2's title filter
std::string percent_format(const std::string& fmt_str, const Value& args);  // "%s" % x
std::string brace_format(const std::string& f, const CallArgs& args);       // str.format
std::string html_escape(const std::string& s);
std::string indent(const std::string& s, const Value* width, bool first, bool blank);

// A function value bound to `name` (methods, globals).
Value bound(std::string name, Function f);
// jinja2's attribute getter for filters: "a.b" or "0" paths.
Value attribute_path(const Value& v, const std::string& path);

}  // namespace rlt::jinja
