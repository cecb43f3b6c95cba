// Jinja parser: tokens -> syntax tree, following jinja2's grammar and operator precedence.
// Constructs rlt does not implement (extends, include, import, call blocks, ...) are refused
// with their name and position.
#pragma once

#include <string_view>

#include "jinja/ast.h"

namespace rlt::jinja {

// Throws TemplateError.
Template parse(std::string_view source);

}  // namespace rlt::jinja
