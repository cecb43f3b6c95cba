#!/usr/bin/env python3
"""Oracle for rlt's chat templates: renders with Python jinja2 exactly as transformers'
apply_chat_template does, and writes what rlt must reproduce.

    tokenizer_oracle_chat.py --workdir DIR [--fixtures DIR] [--per-template N] [--seed S]

Writes DIR/<name>.tokenizer_config.json for every template under test (the real ones from the
shared fixtures when present, plus templates written here in the ChatML / SmolLM2, Ouro-Thinking,
Qwen2.5-with-tools, Mistral and Llama-2 styles, a kitchen-sink template exercising the Jinja
subset, and malformed ones), and DIR/cases.jsonl with one object per render:

    {"config": file, "messages": [...], "add_generation_prompt": bool, "extra": {...},
     "expected": text}      or      {..., "error": message}
"""

import argparse
import json
import os
import random
import shutil
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


# ---- transformers' chat-template environment (transformers/utils/chat_template_utils.py) ----

class AssistantTracker(Extension):
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    def _generation_support(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def strftime_now(format):
    return datetime.now().strftime(format)


ENV = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                    extensions=[AssistantTracker, loopcontrols])
ENV.filters["tojson"] = tojson
ENV.globals["raise_exception"] = raise_exception
ENV.globals["strftime_now"] = strftime_now

SPECIAL_KEYS = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                "mask_token"]


def special_tokens_map(cfg):
    def content(v):
        if isinstance(v, str):
            return v
        if isinstance(v, dict) and isinstance(v.get("content"), str):
            return v["content"]
        return None
    out = {}
    for k in SPECIAL_KEYS:
        if k in cfg and content(cfg[k]) is not None:
            out[k] = content(cfg[k])
    if isinstance(cfg.get("additional_special_tokens"), list):
        out["additional_special_tokens"] = [content(v) for v in cfg["additional_special_tokens"]
                                            if content(v) is not None]
    return out


def select_template(cfg, name):
    ct = cfg.get("chat_template")
    if ct is None:
        raise ValueError("no chat_template")
    if isinstance(ct, str):
        return ct
    by_name = {e["name"]: e["template"] for e in ct}
    return by_name[name or "default"]


_COMPILED = {}


def render(cfg, name, messages, add_generation_prompt, extra):
    source = select_template(cfg, name)
    if source not in _COMPILED:
        _COMPILED[source] = ENV.from_string(source)
    template = _COMPILED[source]
    kwargs = dict(special_tokens_map(cfg))
    kwargs.update(extra)
    tools = kwargs.pop("tools", None)
    documents = kwargs.pop("documents", None)
    return template.render(messages=messages, tools=tools, documents=documents,
                           add_generation_prompt=add_generation_prompt, **kwargs)


# ---- templates written for the tests, in the style of real models --------------------------

CHATML_SMOLLM2 = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}")

OURO_THINKING = """{%- if messages[0]['role'] == 'system' -%}
{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
{%- else -%}
{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}
{%- endif -%}
{%- for message in messages -%}
  {%- if message.role == 'system' and loop.first -%}{# the system turn is already out #}
  {%- elif message.role == 'assistant' and '</think>' in message.content -%}
    {{- '<|im_start|>assistant\\n' + message.content.split('</think>')[-1].lstrip('\\n') + '<|im_end|>\\n' }}
  {%- else -%}
    {{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}
  {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|im_start|>assistant\\n<think>\\n' }}
{%- endif -%}
"""

QWEN25_TOOLS = """{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
    {%- else %}
        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\\n<tool_call>\\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' }}
        {{- message.content }}
        {{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""

MISTRAL = """{%- if messages[0]["role"] == "system" %}
    {%- set system_message = messages[0]["content"] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}
{%- set user_messages = loop_messages | selectattr("role", "equalto", "user") | list %}

{#- This block checks for alternating user/assistant messages, skipping tool calling messages #}
{%- set ns = namespace() %}
{%- set ns.index = 0 %}
{%- for message in loop_messages %}
    {%- if not (message.role == "tool" or message.role == "tool_results" or (message.tool_calls is defined)) %}
        {%- if (message["role"] == "user") != (ns.index % 2 == 0) %}
            {{- raise_exception("After the optional system message, conversation roles must alternate user/assistant/user/assistant/...") }}
        {%- endif %}
        {%- set ns.index = ns.index + 1 %}
    {%- endif %}
{%- endfor %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if message["role"] == "user" %}
        {%- if tools is not none and (message == user_messages[-1]) %}
            {{- "[AVAILABLE_TOOLS] [" }}
            {%- for tool in tools %}
                {%- set tool = tool.function %}
                {{- '{"type": "function", "function": {' }}
                {%- for key, val in tool.items() if key != "return" %}
                    {%- if val is string %}
                        {{- '"' + key + '": "' + val + '"' }}
                    {%- else %}
                        {{- '"' + key + '": ' + val|tojson }}
                    {%- endif %}
                    {%- if not loop.last %}
                        {{- ", " }}
                    {%- endif %}
                {%- endfor %}
                {{- "}}" }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- else %}
                    {{- "]" }}
                {%- endif %}
            {%- endfor %}
            {{- "[/AVAILABLE_TOOLS]" }}
            {%- endif %}
        {%- if loop.last and system_message is defined %}
            {{- "[INST] " + system_message + "\\n\\n" + message["content"] + "[/INST]" }}
        {%- else %}
            {{- "[INST] " + message["content"] + "[/INST]" }}
        {%- endif %}
    {%- elif message.tool_calls is defined and message.tool_calls is not none %}
        {{- "[TOOL_CALLS] [" }}
        {%- for tool_call in message.tool_calls %}
            {%- set out = tool_call.function|tojson %}
            {{- out[:-1] }}
            {%- if not tool_call.id is defined or tool_call.id|length != 9 %}
                {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
            {%- endif %}
            {{- ', "id": "' + tool_call.id + '"}' }}
            {%- if not loop.last %}
                {{- ", " }}
            {%- else %}
                {{- "]" + eos_token }}
            {%- endif %}
        {%- endfor %}
    {%- elif message["role"] == "assistant" %}
        {{- " " + message["content"]|trim + eos_token}}
    {%- elif message["role"] == "tool_results" or message["role"] == "tool" %}
        {%- if message.content is defined and message.content.content is defined %}
            {%- set content = message.content.content %}
        {%- else %}
            {%- set content = message.content %}
        {%- endif %}
        {{- '[TOOL_RESULTS] {"content": ' + content|string + ", " }}
        {%- if not message.tool_call_id is defined or message.tool_call_id|length != 9 %}
            {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
        {%- endif %}
        {{- '"call_id": "' + message.tool_call_id + '"}[/TOOL_RESULTS]' }}
    {%- else %}
        {{- raise_exception("Only user and assistant roles are supported, with the exception of an initial optional system message!") }}
    {%- endif %}
{%- endfor %}
"""

LLAMA2 = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
    "{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}"
    "{% set system_message = false %}{% endif %}{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception("
    "'Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + "
    "system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}"
    "{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}"
    "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == "
    "'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}")

# Exercises the Jinja subset: macros, namespaces, loop variables, filters, tests, methods,
# slicing, operators, whitespace control, raw/filter/with/set blocks, break/continue.
KITCHEN_SINK = """{#- kitchen sink -#}
{%- macro render_content(c, prefix='> ') -%}
  {%- if c is string -%}{{ prefix }}{{ c | trim }}
  {%- elif c is mapping -%}{{ c | tojson }}
  {%- elif c is iterable -%}
    {%- for part in c -%}
      {%- if part.type == 'text' %}{{ prefix ~ part.text }}{% else %}[{{ part.type | upper }}]{% endif -%}
      {%- if not loop.last %} | {% endif -%}
    {%- endfor -%}
  {%- else -%}{{ c }}
  {%- endif -%}
{%- endmacro -%}
{%- set ns = namespace(count=0, chars=0, last_role=none) -%}
{%- set roles = messages | map(attribute='role') | list -%}
Roles: {{ roles | join(', ') }} ({{ roles | unique | list | length }} distinct, sorted {{ roles | sort | join('/') }})
{% for m in messages %}
  {%- set ns.count = ns.count + 1 %}
  {%- if m.content is string %}{% set ns.chars = ns.chars + m.content | length %}{% endif %}
[{{ loop.index }}/{{ loop.length }} rev{{ loop.revindex0 }} {{ loop.cycle('odd', 'even') }}{{ ' first' if loop.first }}{{ ' last' if loop.last else '' }}] {{ m.role | capitalize }}{% if loop.previtem is defined %} after {{ loop.previtem.role }}{% endif %}:
{{ render_content(m.content) }}
  {%- if m.tool_calls %}
    {%- for call in m.tool_calls %}
      {%- set f = call.function if call.function is defined else call %}
 -> {{ f.name }}({% if f.arguments is string %}{{ f.arguments }}{% else %}{% for k, v in f.arguments | dictsort %}{{ k }}={{ v | tojson }}{{ ', ' if not loop.last }}{% endfor %}{% endif %})
    {%- endfor %}
  {%- endif %}
  {%- set ns.last_role = m.role %}
{% endfor %}
{%- set summary %}{{ ns.count }} messages, {{ ns.chars }} chars, last {{ ns.last_role }}{% endset %}
Summary: {{ summary | upper }}
{% with first = messages[0], rest = messages[1:] -%}
First: {{ first.role ~ '#' ~ rest | length }}; reversed: {{ messages[::-1] | map(attribute='role') | join('<') }}
{%- endwith %}
{%- for m in messages if m.role == 'user' %}
  {%- if loop.index > 2 %}{% break %}{% endif %}
  {%- if m.content is not string %}{% continue %}{% endif %}
U{{ loop.index }}: {{ m.content[:12] | replace('\\n', ' ') | title }} | words={{ m.content | wordcount }} | starts={{ m.content.startswith(('Hi', 'What')) }} | {{ m.content.split()[:3] }} | {{ '%s/%d' % (m.role, loop.index) }}
{%- else %}
No user text.
{%- endfor %}
{% filter trim %}
   numbers: {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ 2 ** 5 }} {{ 10 / 4 }} {{ (1.5 * 2) | round }} {{ 3.14159 | round(2) }} {{ '42' | int + 1 }} {{ 'x' | int(9) }} {{ 1 < 2 <= 2 }} {{ 5 is divisibleby 5 }} {{ 4 is even }} {{ none }} {{ [1, 'a', none, true] }} {{ {'k': [1, 2.5]} }} {{ 1e20 }} {{ 0.1 + 0.2 }}
{% endfilter %}
{%+ if tools %}Tools ({{ tools | length }}):
{%- for t in tools %}
{{ t.function.name }}: {{ t.function.description | default('(none)', true) }} params={{ t.function.parameters.properties | list | sort | join(',') }}
{{ t | tojson(indent=2) }}
{%- endfor %}
{% endif -%}
{% raw %}{{ not a tag }} {% neither %}{% endraw %}
{{- '\\n' ~ ('yes' if 'assistant' in roles else 'no') ~ ' ' ~ (roles | select('equalto', 'user') | list | length) ~ ' ' ~ (messages | selectattr('role', 'ne', 'user') | map(attribute='role') | list) }}
{% if add_generation_prompt -%}
<assistant date="{{ date_string | default('unknown') }}" thinking="{{ enable_thinking is defined and enable_thinking }}">
{%- endif %}
"""

MALFORMED = {
    "unclosed_if": "{% if messages %}hello",
    "unknown_tag": "{% frobnicate %}",
    "bad_expression": "{{ messages[ }}",
    "unknown_filter": "{{ messages | frobnicate }}",
    "undefined_attribute": "{{ messages[0].content.nope.deeper }}",
    "type_error": "{{ messages[0].content + 1 }}",
}

WRITTEN = {
    "chatml_smollm2": {"chat_template": CHATML_SMOLLM2, "bos_token": "<|im_start|>",
                       "eos_token": "<|im_end|>"},
    "ouro_thinking": {"chat_template": OURO_THINKING, "eos_token": "<|im_end|>"},
    "qwen25_tools": {"chat_template": QWEN25_TOOLS, "eos_token": "<|im_end|>",
                     "pad_token": "<|endoftext|>"},
    "mistral": {"chat_template": MISTRAL, "bos_token": "<s>", "eos_token": "</s>",
                "unk_token": "<unk>"},
    "llama2_style": {"chat_template": LLAMA2, "bos_token": {"content": "<s>", "lstrip": False},
                     "eos_token": "</s>"},
    "named_templates": {"chat_template": [{"name": "default", "template": CHATML_SMOLLM2},
                                          {"name": "tool_use", "template": QWEN25_TOOLS}],
                        "eos_token": "<|im_end|>"},
    "kitchen_sink": {"chat_template": KITCHEN_SINK, "bos_token": "<s>", "eos_token": "</s>",
                     "additional_special_tokens": ["<a>", {"content": "<b>"}]},
}
for _name, _src in MALFORMED.items():
    WRITTEN["malformed_" + _name] = {"chat_template": _src}

FIXTURE_CONFIGS = ["ouro-1.4b", "llama3", "qwen3", "llama2"]

# ---- conversations -------------------------------------------------------------------------

TEXTS = [
    "Hi there!", "What is 2+2?", "  padded with spaces  \n", "line one\nline two\n\nline four",
    "Unicode: naïve café, 日本語, Ελληνικά, emoji 😀👍🏽", "quotes ' and \" and `backticks`",
    "braces {{ not a tag }} {% neither %}", "backslash \\ and tab\tend", "",
    "<think>\nLet me reason.\n</think>\n\nThe answer is 4.", "What about <tool_call> tags?",
    "Tell me a joke about tokenizers.", "Sure: why did the BPE merge? To get closer.",
    "\n\nleading newlines", "trailing newlines\n\n", "multi\r\nline\rcarriage",
    "Numbers 3.14 and 1e10 and -7", "A" * 300,
]

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Weather for a city (°C).",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "City, e.g. Zürich"},
            "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "search", "description": "",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string"}, "top_k": {"type": "integer", "default": 3}}},
        "return": {"type": "array"}}},
]


def tool_call(r, as_string):
    args = {"city": r.choice(["Paris", "東京", "São Paulo"]), "unit": r.choice(["c", "f"])}
    if r.random() < 0.3:
        args["days"] = r.randrange(1, 8)
        args["detail"] = {"hourly": r.random() < 0.5, "ratio": 0.25}
    call = {"type": "function", "id": "".join(r.choice("abcdefghij0123456789") for _ in range(9)),
            "function": {"name": r.choice(["get_weather", "search"]),
                         "arguments": json.dumps(args, ensure_ascii=False) if as_string else args}}
    return call


def conversation(r, style):
    msgs = []
    if r.random() < 0.5:
        msgs.append({"role": "system", "content": r.choice(["You are terse.", "Système: réponds en français.",
                                                            "Be helpful.\nAnd kind."])})
    turns = r.randrange(1, 5)
    tools_ok = style in ("qwen", "mistral", "sink", "qwen3")
    for t in range(turns):
        if style == "sink" and r.random() < 0.2:
            msgs.append({"role": "user", "content": [{"type": "text", "text": r.choice(TEXTS)},
                                                     {"type": "image"}]})
        else:
            msgs.append({"role": "user", "content": r.choice(TEXTS)})
        if tools_ok and r.random() < 0.35:
            calls = [tool_call(r, r.random() < 0.4) for _ in range(r.randrange(1, 3))]
            msgs.append({"role": "assistant", "content": "" if style == "mistral" else r.choice(["", "Let me check."]),
                         "tool_calls": calls})
            for c in calls:
                msgs.append({"role": "tool", "tool_call_id": c["id"],
                             "content": r.choice(['{"temp": 21}', "sunny", "no results"])})
        if t < turns - 1 or r.random() < 0.5:
            msgs.append({"role": "assistant", "content": r.choice(TEXTS)})
    if style == "mistral" and r.random() < 0.1:
        msgs.insert(1, {"role": "assistant", "content": "out of order"})  # raises in the template
    return msgs


def extra_kwargs(r, style):
    extra = {}
    if style in ("qwen", "mistral", "sink", "qwen3") and r.random() < 0.4:
        extra["tools"] = TOOLS[: r.randrange(1, 3)]
    if r.random() < 0.3:
        extra["enable_thinking"] = r.random() < 0.5
    if r.random() < 0.3:
        extra["date_string"] = "29 Nov 2026"
    return extra


STYLE = {"qwen3": "qwen3", "qwen25_tools": "qwen", "mistral": "mistral", "kitchen_sink": "sink",
         "named_templates": "qwen"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--fixtures", default="")
    ap.add_argument("--per-template", type=int, default=120)
    ap.add_argument("--seed", type=int, default=3)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    configs = {}
    for name, cfg in WRITTEN.items():
        configs[name] = cfg
    if args.fixtures and os.path.isdir(args.fixtures):
        for name in FIXTURE_CONFIGS:
            path = os.path.join(args.fixtures, name + ".tokenizer_config.json")
            if os.path.exists(path):
                with open(path, encoding="utf-8") as f:
                    configs[name] = json.load(f)
    r = random.Random(args.seed)
    with open(os.path.join(args.workdir, "cases.jsonl"), "w") as out:
        for name, cfg in configs.items():
            file = name + ".tokenizer_config.json"
            with open(os.path.join(args.workdir, file), "w", encoding="utf-8") as f:
                json.dump(cfg, f, ensure_ascii=False, indent=1)
            template_names = [""]
            if isinstance(cfg.get("chat_template"), list):
                template_names = [e["name"] for e in cfg["chat_template"]]
            count = 4 if name.startswith("malformed_") or cfg.get("chat_template") is None else args.per_template
            for k in range(count):
                tname = template_names[k % len(template_names)]
                style = "qwen" if tname == "tool_use" else STYLE.get(name, "plain")
                msgs = conversation(r, style)
                gen = k % 2 == 0
                extra = extra_kwargs(r, style)
                case = {"config": file, "name": tname, "messages": msgs,
                        "add_generation_prompt": gen, "extra": extra}
                try:
                    case["expected"] = render(cfg, tname, msgs, gen, extra)
                except Exception as e:  # the template (or jinja2) refuses: rlt must refuse too
                    case["error"] = "%s: %s" % (type(e).__name__, e)
                out.write(json.dumps(case, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
