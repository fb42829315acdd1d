//===- ChatTemplateTest.cpp - the Jinja2 interpreter of chat templates ----===//
//
// Part of xfmr.
//
// Checks runtime/ChatTemplate.h against what Jinja2 3.1 renders (each
// expected string was produced by jinja2 with transformers' settings):
// whitespace control with trim_blocks/lstrip_blocks, loop variables and
// loop scoping, namespaces, filters, Python printing of values, key order
// of ordered contexts, and errors (parse errors with line:column,
// raise_exception, undefined values). scripts/check-chat-template.py
// compares whole model templates with transformers.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/ChatTemplate.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>

using namespace xfmr::rt;

namespace {

/// Renders `source` with `context` (JSON text, key order kept); the
/// rendering, or "ERROR: message".
std::string render(const std::string &source,
                   const std::string &context = "{}") {
  auto tmpl = ChatTemplate::parse(source, "t.jinja");
  if (!tmpl)
    return "ERROR: " + tmpl.error();
  auto out = (*tmpl)->render(nlohmann::ordered_json::parse(context));
  return out ? *out : "ERROR: " + out.error();
}

const char *kMessages =
    R"({"messages": [{"role": "system", "content": " S "},
                     {"role": "user", "content": "U"},
                     {"role": "assistant", "content": "A"}]})";

TEST(ChatTemplateTest, TrimBlocksAndLstripBlocks) {
  // trim_blocks drops the newline after %} and #}, lstrip_blocks the
  // indentation before {% and {#, but not before {{.
  EXPECT_EQ(render("  {% if true %}\n    x\n  {% endif %}\n  {{ 1 }}\n"),
            "    x\n  1");
  EXPECT_EQ(render("a\n{# comment #}\nb"), "a\nb");
  // {%+ keeps the indentation; the newline after endif goes to
  // trim_blocks, the last one of the source is dropped.
  EXPECT_EQ(render("  {%+ if true %}y{% endif %}\n\n"), "  y");
}

TEST(ChatTemplateTest, ExplicitWhitespaceControl) {
  EXPECT_EQ(render("a  \n  {%- if true -%}  \n b  {%- endif %}"), "ab");
  EXPECT_EQ(render("x {{- ' y ' -}} z"), "x y z");
  EXPECT_EQ(render("{%- for m in messages -%}\n  {{- m.role -}}\n"
                   "{%- endfor -%}",
                   kMessages),
            "systemuserassistant");
}

TEST(ChatTemplateTest, LoopVariables) {
  EXPECT_EQ(render("{% for m in messages %}{{ loop.index0 }}{{ loop.index }}"
                   "{{ loop.first }}{{ loop.last }}{{ loop.length }}"
                   "{{ loop.revindex }};{% endfor %}",
                   kMessages),
            "01TrueFalse33;12FalseFalse32;23FalseTrue31;");
  EXPECT_EQ(render("{% for m in messages if m.role != 'system' %}"
                   "{{ loop.index }}{{ m.role }}{% endfor %}"
                   "{% for x in [] %}x{% else %}empty{% endfor %}",
                   kMessages),
            "1user2assistantempty");
  EXPECT_EQ(render("{% for i in range(4) %}{{ loop.cycle('a', 'b', 'c') }}"
                   "{% endfor %}"),
            "abca");
  EXPECT_EQ(render("{% for i in range(10) %}{% if i == 1 %}{% continue %}"
                   "{% endif %}{% if i > 3 %}{% break %}{% endif %}{{ i }}"
                   "{% endfor %}"),
            "023");
}

TEST(ChatTemplateTest, LoopBodiesAreScopes) {
  // Each iteration starts from the outer value; nothing leaks out.
  EXPECT_EQ(render("{% set x = 1 %}{% for i in range(3) %}{{ x }}"
                   "{% set x = x + 1 %}{{ x }},{% endfor %}{{ x }}"),
            "12,12,12,1");
  // A namespace is how templates carry state out of a loop.
  EXPECT_EQ(render("{% set ns = namespace(n=0, seen=false) %}"
                   "{% for m in messages %}{% set ns.n = ns.n + 1 %}"
                   "{% if m.role == 'user' %}{% set ns.seen = true %}"
                   "{% endif %}{% endfor %}{{ ns.n }} {{ ns.seen }}",
                   kMessages),
            "3 True");
}

TEST(ChatTemplateTest, Filters) {
  EXPECT_EQ(render("{{ messages[0].content | trim }}|{{ 'a b' | upper }}|"
                   "{{ messages | map(attribute='role') | join(',') }}|"
                   "{{ messages | selectattr('role', 'equalto', 'user') "
                   "| list | length }}|{{ nope | default('d') }}|"
                   "{{ 'x\ny' | indent(2, true) }}",
                   kMessages),
            "S|A B|system,user,assistant|1|d|  x\n  y");
  // tojson keeps key order and non-ASCII text, as transformers' tojson.
  EXPECT_EQ(render("{{ t | tojson }}|{{ t | tojson(indent=2) }}",
                   R"({"t": {"z": "é", "a": [1, 2.5, null, true]}})"),
            "{\"z\": \"é\", \"a\": [1, 2.5, null, true]}|{\n  \"z\": \"é\",\n"
            "  \"a\": [\n    1,\n    2.5,\n    null,\n    true\n  ]\n}");
  // select/map over a false value give nothing, as in Jinja2; tests on
  // floats use Python's modulo.
  EXPECT_EQ(render("{{ none | select | list }}{{ 2.5 is odd }}"
                   "{{ 3.0 is odd }}{{ 2.5 is divisibleby 2 }}"),
            "[]FalseTrueFalse");
  // The trim filter strips Python whitespace, including U+3000.
  EXPECT_EQ(render("[{{ s | trim }}]", R"({"s": "\u3000 x \u00a0"})"), "[x]");
}

TEST(ChatTemplateTest, UnicodeCaseMapping) {
  EXPECT_EQ(render("{{ 'straße é' | upper }}|{{ 'ΟΔΟΣ' | lower }}|"
                   "{{ 'привет мир' | title }}|{{ 'ßa' | capitalize }}|"
                   "{{ '日本 🤖 x' | upper }}"),
            "STRASSE É|οδος|Привет Мир|Ssa|日本 🤖 X");
  // Characters outside the tables are refused rather than left alone.
  EXPECT_EQ(render("{{ 'ﬁ' | upper }}"),
            "ERROR: t.jinja:1:10: upper case of U+FB01 is not supported");
}

TEST(ChatTemplateTest, PythonPrinting) {
  EXPECT_EQ(render("{{ [1, 2.5, 'it\\'s', none, true, {'k': [0.1]}] }}"),
            "[1, 2.5, \"it's\", None, True, {'k': [0.1]}]");
  EXPECT_EQ(render("{{ 1 / 2 }} {{ 4 / 2 }} {{ -7 // 2 }} {{ -7 % 3 }} "
                   "{{ 1e20 }} {{ 0.0001 }} {{ 1.5e-5 }}"),
            "0.5 2.0 -4 2 1e+20 0.0001 1.5e-05");
  EXPECT_EQ(render("{{ range(3) }} {{ {'a': 1}.items() }}"),
            "range(0, 3) dict_items([('a', 1)])");
  EXPECT_EQ(render("{{ s[::-1] }}{{ s[1:-1] }}{{ s[-1] }}", R"({"s": "abcd"})"),
            "dcbabcd");
}

TEST(ChatTemplateTest, PercentFormatting) {
  EXPECT_EQ(render("{{ '%s-%03d|%5.2f|%(k)s' % ('a', 7, 3.14159, 'x') }}"),
            "ERROR: t.jinja:1:26: format requires a mapping");
  EXPECT_EQ(render("{{ '%s-%03d|%5.2f|%-3s|' % ('a', 7, 3.14159, 'é') }}"
                   "{{ '%(k)s' | format(k=1) }}{{ '%s %s' | format(1, [2]) }}"),
            "a-007| 3.14|é  |11 [2]");
  EXPECT_EQ(render("{{ '%s' % (1, 2) }}"),
            "ERROR: t.jinja:1:9: not all arguments converted during string "
            "formatting");
}

TEST(ChatTemplateTest, UndefinedValues) {
  EXPECT_EQ(render("[{{ nope }}]{{ nope is defined }}{{ nope | length }}"
                   "{% for x in nope %}x{% endfor %}{{ d.missing is defined }}",
                   R"({"d": {}})"),
            "[]False0False");
  EXPECT_EQ(render("{{ nope.attr }}"),
            "ERROR: t.jinja:1:8: 'nope' is undefined");
  EXPECT_EQ(render("{{ nope + 'a' }}"),
            "ERROR: t.jinja:1:9: 'nope' is undefined");
}

TEST(ChatTemplateTest, SortedJsonContext) {
  // nlohmann::json sorts object keys; ordered_json keeps them as written.
  auto tmpl = ChatTemplate::parse("{{ d | tojson }}", "t.jinja");
  ASSERT_TRUE(tmpl);
  auto sorted =
      (*tmpl)->render(nlohmann::json::parse(R"({"d": {"b": 1, "a": 2}})"));
  ASSERT_TRUE(sorted);
  EXPECT_EQ(*sorted, "{\"a\": 2, \"b\": 1}");
  auto ordered = (*tmpl)->render(
      nlohmann::ordered_json::parse(R"({"d": {"b": 1, "a": 2}})"));
  ASSERT_TRUE(ordered);
  EXPECT_EQ(*ordered, "{\"b\": 1, \"a\": 2}");
  EXPECT_EQ((*tmpl)->render(nlohmann::json::array()).error(),
            "t.jinja: the render context must be a JSON object");
}

TEST(ChatTemplateTest, Macros) {
  EXPECT_EQ(render("{% macro m(name, p='!') %}Hi {{ name }}{{ p }}"
                   "{% endmacro %}{{ m('A') }} {{ m('B', p='?') }}"),
            "Hi A! Hi B?");
}

TEST(ChatTemplateTest, Errors) {
  EXPECT_EQ(render("line one\n{% if x %}\n{{ 1 +* 2 }}{% endif %}"),
            "ERROR: t.jinja:3:7: unexpected '*'");
  EXPECT_EQ(render("{% if x %}unclosed"),
            "ERROR: t.jinja:1:19: unexpected end of template, expected "
            "'elif'");
  EXPECT_EQ(render("{% include 'other.jinja' %}"),
            "ERROR: t.jinja:1:4: the 'include' tag is not supported");
  EXPECT_EQ(render("\n  {{ raise_exception('Roles must alternate') }}"),
            "ERROR: t.jinja:2:21: Roles must alternate");
  EXPECT_EQ(render("{{ 'a' | no_such_filter }}"),
            "ERROR: t.jinja:1:10: no filter named 'no_such_filter'");
}

} // namespace
