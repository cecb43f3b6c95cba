"""Structured output through `rlt serve` on the real SmolLM2 GGUF with the official openai client:
every output constrained by one of the JSON schemas in tests/data/structured/schemas.json (nested
objects, arrays, enums, bounded numbers, required/optional, $ref, formats, patterns) validates
with the `jsonschema` package (Draft 2020-12), greedy and sampled; json_object, regex, choice and
GBNF constraints hold; unsupported schema features are refused by name with a 400.
"""
import json
import os
import unittest
from concurrent.futures import ThreadPoolExecutor

import jsonschema
import openai

from serve_util import SmolLM2ServerCase

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

NAME = SmolLM2ServerCase.NAME
SCHEMAS = json.load(open(os.path.join(ROOT, "tests", "data", "structured", "schemas.json")))
MAX_TOKENS = 400


class StructuredOutput(SmolLM2ServerCase):
    CLIENT_TIMEOUT = 600

    def chat(self, content, **kwargs):
        return self.client.chat.completions.create(
            model=NAME, messages=[{"role": "user", "content": content}], max_tokens=MAX_TOKENS, **kwargs)

    def schema_outputs(self, sampling):
        def one(case):
            r = self.chat(case["prompt"], response_format={
                "type": "json_schema", "json_schema": {"name": case["name"], "schema": case["schema"]}}, **sampling)
            return case, r.choices[0]
        with ThreadPoolExecutor(8) as pool:
            return list(pool.map(one, SCHEMAS))

    def check_valid(self, results):
        self.assertGreaterEqual(len(results), 30)
        for case, choice in results:
            with self.subTest(schema=case["name"]):
                self.assertEqual(choice.finish_reason, "stop", choice.message.content)
                instance = json.loads(choice.message.content)
                jsonschema.validate(instance, case["schema"], cls=jsonschema.Draft202012Validator,
                                    format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)

    def test_every_schema_output_validates_greedy(self):
        self.check_valid(self.schema_outputs({"temperature": 0}))

    def test_every_schema_output_validates_sampled(self):
        self.check_valid(self.schema_outputs({"temperature": 1.0, "seed": 7}))

    def test_json_object_mode(self):
        r = self.chat("Give the name of a color as a JSON object.", response_format={"type": "json_object"},
                      temperature=0)
        self.assertEqual(r.choices[0].finish_reason, "stop", r.choices[0].message.content)
        self.assertIsInstance(json.loads(r.choices[0].message.content), dict)

    def test_streamed_output_equals_the_whole_one(self):
        case = SCHEMAS[0]
        fmt = {"type": "json_schema", "json_schema": {"name": case["name"], "schema": case["schema"]}}
        whole = self.chat(case["prompt"], response_format=fmt, temperature=0).choices[0].message.content
        streamed = "".join(c.choices[0].delta.content or "" for c in self.chat(
            case["prompt"], response_format=fmt, temperature=0, stream=True) if c.choices)
        self.assertEqual(streamed, whole)

    def test_regex_choice_and_grammar(self):
        r = self.client.completions.create(model=NAME, prompt="The year the Eiffel tower was built:", max_tokens=20,
                                           temperature=0, extra_body={"structured_outputs": {"regex": "1[0-9]{3}"}})
        self.assertRegex(r.choices[0].text, r"^1[0-9]{3}$")
        self.assertEqual(r.choices[0].finish_reason, "stop")
        r = self.chat("Is Paris in France?", temperature=0, extra_body={"guided_choice": ["yes", "no"]})
        self.assertIn(r.choices[0].message.content, ("yes", "no"))
        grammar = 'root ::= "The answer is " ("red" | "green" | "blue") "."'
        r = self.chat("What color is grass?", temperature=0.8, seed=3,
                      extra_body={"structured_outputs": {"grammar": grammar}})
        self.assertRegex(r.choices[0].message.content, r"^The answer is (red|green|blue)\.$")

    def test_unsupported_features_are_refused_by_name(self):
        for schema, named in [({"type": "object", "patternProperties": {"^a": {}}}, "patternProperties"),
                              ({"type": "number", "multipleOf": 5}, "multipleOf"),
                              ({"type": "string", "format": "hostname"}, "hostname")]:
            with self.assertRaises(openai.BadRequestError) as e:
                self.chat("hi", response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema}})
            self.assertIn(named, str(e.exception))
            self.assertEqual(e.exception.body.get("param"), "response_format")
        with self.assertRaises(openai.BadRequestError) as e:
            self.chat("hi", extra_body={"guided_regex": "(a)\\1"})
        self.assertIn("backreferences", str(e.exception))
        with self.assertRaises(openai.BadRequestError) as e:
            self.chat("hi", response_format={"type": "json_object"}, extra_body={"guided_regex": "a"})
        self.assertIn("both constrain", str(e.exception))
        # The server keeps serving.
        r = self.client.chat.completions.create(
            model=NAME, messages=[{"role": "user", "content": "Say hi."}], max_tokens=4, temperature=0)
        self.assertTrue(r.choices[0].message.content)


if __name__ == "__main__":
    unittest.main()
