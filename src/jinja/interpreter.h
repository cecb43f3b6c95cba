// Renders a parsed Jinja template with jinja2's scoping rules: a for-loop iteration, a macro
// call and a with block get their own scope; if blocks do not; namespace() objects are shared.
#pragma once

#include <string>

#include "jinja/ast.h"

namespace rlt::jinja {

// Renders `tmpl` with the template variables `variables`. Throws TemplateError (with a
// position) on any error, including raise_exception().
std::string render(const Template& tmpl, const Dict& variables);

}  // namespace rlt::jinja
