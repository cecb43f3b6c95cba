"""Function calling through `rlt serve` on the real SmolLM2 GGUF with the official openai client:
tool_choice "required" and a named function always produce a valid call (arguments validate against
the function's parameters with `jsonschema`), streamed and not; the call and its result go back as
assistant tool_calls and a tool message, and the model answers; "none" and "auto" give well-formed
replies. SmolLM2's template has no tools: the server writes the Hermes convention into the prompt.
"""
import json
import unittest

import jsonschema
import openai

from serve_util import SmolLM2ServerCase


NAME = SmolLM2ServerCase.NAME
WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 40},
                                            "unit": {"enum": ["celsius", "fahrenheit"]}},
           "required": ["city", "unit"]}
TIME = {"type": "object", "properties": {"timezone": {"type": "string", "maxLength": 30}}, "required": ["timezone"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The current weather in a city",
                                           "parameters": WEATHER}},
         {"type": "function", "function": {"name": "get_time", "description": "The time in a timezone",
                                           "parameters": TIME}}]
SCHEMAS = {"get_weather": WEATHER, "get_time": TIME}
QUESTION = [{"role": "user", "content": "What is the weather like in Paris today?"}]


class ToolCalls(SmolLM2ServerCase):

    def create(self, **kwargs):
        args = dict(model=NAME, messages=QUESTION, tools=TOOLS, max_tokens=200, temperature=0)
        args.update(kwargs)
        return self.client.chat.completions.create(**args)

    def check_call(self, name, arguments):
        self.assertIn(name, SCHEMAS)
        jsonschema.validate(json.loads(arguments), SCHEMAS[name])

    def test_required_call_round_trip(self):
        r = self.create(tool_choice="required", parallel_tool_calls=False)
        choice = r.choices[0]
        self.assertEqual(choice.finish_reason, "tool_calls")
        self.assertIsNone(choice.message.content)
        self.assertEqual(len(choice.message.tool_calls), 1)
        call = choice.message.tool_calls[0]
        self.assertEqual(call.type, "function")
        self.assertTrue(call.id.startswith("call_"))
        self.check_call(call.function.name, call.function.arguments)
        # The call and its result go back; the model answers in words.
        messages = QUESTION + [choice.message.model_dump(exclude_none=True),
                               {"role": "tool", "tool_call_id": call.id, "content": "Sunny, 24 degrees."}]
        answer = self.create(messages=messages, tool_choice="none", max_tokens=40)
        self.assertIsNone(answer.choices[0].message.tool_calls)
        self.assertTrue(answer.choices[0].message.content)

    def test_required_call_streamed(self):
        calls, finish, content = {}, None, ""
        for chunk in self.create(tool_choice="required", stream=True):
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            content += delta.content or ""
            for tc in delta.tool_calls or []:
                entry = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
                entry["id"] = tc.id or entry["id"]
                entry["name"] += tc.function.name or ""
                entry["arguments"] += tc.function.arguments or ""
            finish = chunk.choices[0].finish_reason or finish
        self.assertEqual(finish, "tool_calls")
        self.assertGreaterEqual(len(calls), 1)
        self.assertEqual(content.strip(), "")
        for entry in calls.values():
            self.assertTrue(entry["id"].startswith("call_"))
            self.check_call(entry["name"], entry["arguments"])
        whole = self.create(tool_choice="required")
        self.assertEqual([(c.function.name, c.function.arguments) for c in whole.choices[0].message.tool_calls],
                         [(calls[i]["name"], calls[i]["arguments"]) for i in sorted(calls)])

    def test_required_is_always_a_valid_call_when_sampling(self):
        for seed in range(6):
            r = self.create(tool_choice="required", temperature=1.0, seed=seed, parallel_tool_calls=False)
            with self.subTest(seed=seed):
                self.assertEqual(r.choices[0].finish_reason, "tool_calls")
                for call in r.choices[0].message.tool_calls:
                    self.check_call(call.function.name, call.function.arguments)

    def test_named_function(self):
        r = self.create(tool_choice={"type": "function", "function": {"name": "get_time"}})
        calls = r.choices[0].message.tool_calls
        self.assertTrue(calls)
        for call in calls:
            self.assertEqual(call.function.name, "get_time")
            self.check_call(call.function.name, call.function.arguments)

    def test_none_and_auto_are_well_formed(self):
        none = self.create(tool_choice="none", max_tokens=30)
        self.assertIsNone(none.choices[0].message.tool_calls)
        self.assertIsInstance(none.choices[0].message.content, str)
        auto = self.create(max_tokens=120)
        message = auto.choices[0].message
        if message.tool_calls:
            self.assertEqual(auto.choices[0].finish_reason, "tool_calls")
            for call in message.tool_calls:
                json.loads(call.function.arguments)
        else:
            self.assertIsInstance(message.content, str)

    def test_bad_tools_are_refused(self):
        bad = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
                                                                          "patternProperties": {"a": {}}}}}]
        with self.assertRaises(openai.BadRequestError) as e:
            self.create(tools=bad, tool_choice="required")
        self.assertIn("patternProperties", str(e.exception))
        self.assertEqual(e.exception.body.get("param"), "tools")
        with self.assertRaises(openai.BadRequestError):
            self.create(tool_choice="required", response_format={"type": "json_object"})


if __name__ == "__main__":
    unittest.main()
