// Python string and number semantics shared by the Jinja built-ins.
#include "jinja/support.h"

#include <fmt/format.h>
#include <utf8proc.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <ctime>
#include <map>

#include "common/utf8.h"
#include "jinja/builtins.h"
#include "jinja/lexer.h"

namespace rlt::jinja {

[[noreturn]] void type_error(const std::string& msg) {
  throw TemplateError(msg);
}

size_t checked_repeat(size_t unit, int64_t n, std::string_view what) {
  if (n <= 0 || unit == 0) return 0;
  if (static_cast<uint64_t>(n) > kMaxValueBytes / unit)
    type_error(fmt::format("{} repeated {} times exceeds the sandbox limit of {} MiB per value", what, n,
                           kMaxValueBytes >> 20));
  return unit * static_cast<size_t>(n);
}

size_t shallow_bytes(const List& items) {
  size_t n = 0;
  for (const Value& v : items) n += sizeof(Value) + v.s.size();
  return n;
}

// Argument `index` (positional) or `name` (keyword), or nullptr.
const Value* arg(const CallArgs& a, size_t index, std::string_view name) {
  if (index < a.positional.size()) return &a.positional[index];
  return a.kwarg(name);
}

std::u32string to_u32(const std::string& s) {
  std::u32string out;
  size_t i = 0;
  while (i < s.size()) {
    char32_t c = 0;
    i += utf8::decode(s, i, c);
    out.push_back(c);
  }
  return out;
}

std::string from_u32(const std::u32string& s) {
  std::string out;
  for (char32_t c : s) utf8::append(out, c);
  return out;
}

bool is_integral(const Value& v) {
  return v.kind == Value::Kind::kInt || v.kind == Value::Kind::kBool;
}
int64_t as_int(const Value& v) {
  return v.kind == Value::Kind::kBool ? (v.b ? 1 : 0) : v.i;
}
double as_double(const Value& v) {
  if (v.kind == Value::Kind::kFloat) return v.f;
  return static_cast<double>(as_int(v));
}

std::string py_strip(const std::string& s, const Value* chars, bool left, bool right) {
  const std::u32string u = to_u32(s);
  std::u32string set;
  const bool whitespace = chars == nullptr || chars->is_none() || chars->is_undefined();
  if (!whitespace) set = to_u32(to_str(*chars));
  auto strip_it = [&](char32_t c) {
    return whitespace ? py_isspace(c) : set.find(c) != std::u32string::npos;
  };
  size_t b = 0;
  size_t e = u.size();
  if (left) {
    while (b < e && strip_it(u[b])) ++b;
  }
  if (right) {
    while (e > b && strip_it(u[e - 1])) --e;
  }
  return from_u32(u.substr(b, e - b));
}

List py_split(const std::string& s, const Value* sep, int64_t maxsplit) {
  List out;
  if (sep == nullptr || sep->is_none()) {
    const std::u32string u = to_u32(s);
    size_t i = 0;
    int64_t splits = 0;
    while (i < u.size()) {
      while (i < u.size() && py_isspace(u[i])) ++i;
      if (i >= u.size()) break;
      if (maxsplit >= 0 && splits == maxsplit) {
        size_t e = u.size();
        while (e > i && py_isspace(u[e - 1])) --e;
        out.push_back(Value::string(from_u32(u.substr(i, e - i))));
        break;
      }
      size_t j = i;
      while (j < u.size() && !py_isspace(u[j])) ++j;
      out.push_back(Value::string(from_u32(u.substr(i, j - i))));
      ++splits;
      i = j;
    }
    return out;
  }
  const std::string d = to_str(*sep);
  if (d.empty()) type_error("ValueError: empty separator");
  size_t start = 0;
  int64_t splits = 0;
  while (true) {
    const size_t p = (maxsplit >= 0 && splits >= maxsplit) ? std::string::npos : s.find(d, start);
    if (p == std::string::npos) {
      out.push_back(Value::string(s.substr(start)));
      return out;
    }
    out.push_back(Value::string(s.substr(start, p - start)));
    start = p + d.size();
    ++splits;
  }
}

std::string py_replace(const std::string& s, const std::string& old, const std::string& rep,
                       int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts the replacement between every character (and at both ends).
    const std::u32string u = to_u32(s);
    check_size(s.size() + checked_repeat(rep.size(), static_cast<int64_t>(u.size()) + 1, "replacement"),
               "replace result");
    int64_t n = 0;
    for (char32_t c : u) {
      if (count < 0 || n < count) {
        out += rep;
        ++n;
      }
      utf8::append(out, c);
    }
    if (count < 0 || n < count) out += rep;
    return out;
  }
  size_t start = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    const size_t p = s.find(old, start);
    if (p == std::string::npos) break;
    out.append(s, start, p - start);
    out += rep;
    check_size(out.size(), "replace result");  // a long replacement of a short, frequent string
    start = p + old.size();
    ++n;
  }
  out.append(s, start, std::string::npos);
  return out;
}

std::string map_case(const std::string& s, bool upper) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    char32_t c = 0;
    i += utf8::decode(s, i, c);
    const auto cp = static_cast<utf8proc_int32_t>(c);
    utf8::append(out, static_cast<char32_t>(upper ? utf8proc_toupper(cp) : utf8proc_tolower(cp)));
  }
  return out;
}

std::string capitalize(const std::string& s) {
  std::u32string u = to_u32(s);
  for (size_t k = 0; k < u.size(); ++k) {
    const auto cp = static_cast<utf8proc_int32_t>(u[k]);
    u[k] = static_cast<char32_t>(k == 0 ? utf8proc_totitle(cp) : utf8proc_tolower(cp));
  }
  return from_u32(u);
}

// jinja2's title filter: capitalize each run after "-", whitespace or an opening bracket.
std::string title(const std::string& s) {
  std::u32string u = to_u32(s);
  bool start = true;
  for (char32_t& c : u) {
    const bool sep = py_isspace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    const auto cp = static_cast<utf8proc_int32_t>(c);
    if (sep) {
      start = true;
      continue;
    }
    c = static_cast<char32_t>(start ? utf8proc_toupper(cp) : utf8proc_tolower(cp));
    start = false;
  }
  return from_u32(u);
}

int64_t floor_div(int64_t a, int64_t b) {
  if (b == 0) type_error("ZeroDivisionError: integer division or modulo by zero");
  // The one quotient that does not fit (and that traps the CPU's division instead of wrapping).
  if (a == INT64_MIN && b == -1) type_error("OverflowError: integer result does not fit in 64 bits");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t py_mod(int64_t a, int64_t b) {
  if (b == -1) return 0;  // also INT64_MIN % -1, whose quotient does not fit
  return a - floor_div(a, b) * b;
}

// Python printf-style formatting: "%s" % x, "%d-%s" % (a, b).
std::string percent_format(const std::string& fmt_str, const Value& args) {
  List values = args.is_list() && args.is_tuple ? *args.list : List{args};
  std::string out;
  size_t next = 0;
  for (size_t i = 0; i < fmt_str.size(); ++i) {
    if (fmt_str[i] != '%') {
      out += fmt_str[i];
      continue;
    }
    if (++i >= fmt_str.size()) type_error("ValueError: incomplete format");
    std::string spec;
    while (i < fmt_str.size() &&
           std::string_view("-+ 0#.0123456789").find(fmt_str[i]) != std::string_view::npos) {
      spec += fmt_str[i++];
    }
    // Widths and precisions are copied into the result: refuse huge ones before allocating.
    for (size_t d = 0; d < spec.size();) {
      size_t e = d;
      while (e < spec.size() && spec[e] >= '0' && spec[e] <= '9') ++e;
      if (e > d) check_size(e - d > 9 ? kMaxValueBytes + 1 : std::stoul(spec.substr(d, e - d)), "format width");
      d = e == d ? d + 1 : e;
    }
    const char conv = fmt_str[i];
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (next >= values.size()) type_error("TypeError: not enough arguments for format string");
    const Value& v = values[next++];
    std::string body;
    switch (conv) {
      case 's':
        body = to_str(v);
        break;
      case 'r':
        body = repr(v);
        break;
      case 'd':
      case 'i':
        if (!v.is_number()) type_error("TypeError: %d format: a real number is required");
        if (!is_integral(v) && !(std::fabs(v.f) < 9.2e18))
          type_error("OverflowError: %d format of a float outside the 64-bit range");
        try {  // fmt refuses specs Python accepts ("%.3d"): a template error, not an escape
          body = fmt::format(fmt::runtime("{:" + spec + "d}"),
                             is_integral(v) ? as_int(v) : static_cast<int64_t>(std::trunc(v.f)));
        } catch (const fmt::format_error& e) {
          type_error(fmt::format("ValueError: unsupported format '%{}d': {}", spec, e.what()));
        }
        spec.clear();
        break;
      case 'f':
        if (!v.is_number()) type_error("TypeError: must be real number");
        try {
          body = fmt::format(fmt::runtime("{:" + (spec.empty() ? std::string(".6") : spec) + "f}"),
                             as_double(v));
        } catch (const fmt::format_error& e) {
          type_error(fmt::format("ValueError: unsupported format '%{}f': {}", spec, e.what()));
        }
        spec.clear();
        break;
      default:
        type_error(fmt::format("unsupported format character '{}'", conv));
    }
    if (!spec.empty()) {
      const bool left = spec[0] == '-';
      const size_t width = static_cast<size_t>(std::atoi(spec.c_str() + (left ? 1 : 0)));
      const size_t len = utf8::count_code_points(body);
      if (len < width)
        body = left ? body + std::string(width - len, ' ') : std::string(width - len, ' ') + body;
    }
    out += body;
  }
  if (next < values.size() && !(values.size() == 1 && next == 0)) {
    type_error("TypeError: not all arguments converted during string formatting");
  }
  return out;
}

// str.format with {} / {0} / {name} fields (no format specs beyond plain replacement).
std::string brace_format(const std::string& f, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] == '{' && i + 1 < f.size() && f[i + 1] == '{') {
      out += '{';
      ++i;
    } else if (f[i] == '}' && i + 1 < f.size() && f[i + 1] == '}') {
      out += '}';
      ++i;
    } else if (f[i] == '{') {
      const size_t close = f.find('}', i);
      if (close == std::string::npos)
        type_error("ValueError: Single '{' encountered in format string");
      const std::string field = f.substr(i + 1, close - i - 1);
      const Value* v = nullptr;
      if (field.empty()) {
        if (auto_index < args.positional.size()) v = &args.positional[auto_index++];
      } else if (std::all_of(field.begin(), field.end(), ::isdigit)) {
        const size_t k = std::stoul(field);
        if (k < args.positional.size()) v = &args.positional[k];
      } else {
        v = args.kwarg(field);
      }
      if (v == nullptr) type_error("IndexError/KeyError: format field '" + field + "'");
      out += to_str(*v);
      i = close;
    } else {
      out += f[i];
    }
  }
  return out;
}

Value bound(std::string name, Function f) {
  return Value::function(std::move(name), std::move(f));
}

int compare_values(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (is_integral(a) && is_integral(b)) return as_int(a) < as_int(b) ? -1 : as_int(a) > as_int(b);
    return as_double(a) < as_double(b) ? -1 : as_double(a) > as_double(b);
  }
  if (a.is_string() && b.is_string()) return a.s < b.s ? -1 : a.s > b.s;
  if (a.is_list() && b.is_list()) {
    for (size_t k = 0; k < a.list->size() && k < b.list->size(); ++k) {
      if (!equals((*a.list)[k], (*b.list)[k])) return compare_values((*a.list)[k], (*b.list)[k]);
    }
    return a.list->size() < b.list->size() ? -1 : a.list->size() > b.list->size();
  }
  if (a.is_undefined() || b.is_undefined()) undefined_error(a.is_undefined() ? a : b);
  type_error("TypeError: '<' not supported between instances of '" + type_name(a) + "' and '" +
             type_name(b) + "'");
}

// jinja2's attribute getter for filters: "a.b" or "0" paths.
Value attribute_path(const Value& v, const std::string& path) {
  Value cur = v;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot - start);
    int64_t index = 0;
    // Digits are an index (a number past int64 can index nothing: it is looked up as a key).
    if (!part.empty() && std::all_of(part.begin(), part.end(), ::isdigit) &&
        std::from_chars(part.data(), part.data() + part.size(), index).ec == std::errc()) {
      cur = get_item(cur, Value::integer(index));
    } else {
      cur = get_item(cur, Value::string(part));
    }
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string indent(const std::string& s_in, const Value* width, bool first, bool blank) {
  std::string ind =
      width == nullptr ? "    "
      : width->is_string()
          ? width->s
          : std::string(checked_repeat(1, as_int(*width), "indent width"), ' ');
  std::string s = s_in + "\n";
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\n') {
      lines.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  // Every line may get the indent: refuse a result past the limit before building it.
  check_size(s.size() + lines.size() * ind.size(), "indent result");
  std::string rv;
  if (blank) {
    for (size_t k = 0; k < lines.size(); ++k) {
      if (k > 0) rv += "\n" + ind;
      rv += lines[k];
    }
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t k = 1; k < lines.size(); ++k) {
      rv += "\n";
      if (!lines[k].empty()) rv += ind;
      rv += lines[k];
    }
  }
  if (first) rv = ind + rv;
  return rv;
}

// select / reject / selectattr / rejectattr.

}  // namespace rlt::jinja
