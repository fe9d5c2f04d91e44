"""Resource templates (RFC 6570) matched against the URI ``<server>__read_resource`` sends:
linear time, bounded work, whatever the server lists and the model writes. The servers' side
(a real server's templates, the refusal the model reads) is in ``tests/test_mcp_trust.py``."""

from __future__ import annotations

import time

import pytest

from langgraph_toolbudget.mcp.uri_templates import (
    MAX_TEMPLATES_CHECKED,
    MAX_URI_CHARS,
    match_template,
)

ADJACENT = "r://" + "".join(f"{{+p{i}}}" for i in range(12)) + "/end{x}"


@pytest.mark.parametrize("length", [36, 64, 1_000, MAX_URI_CHARS - 4])
def test_adjacent_expressions_and_a_long_uri_are_matched_in_linear_time(length):
    start = time.monotonic()
    assert match_template("r://" + "x" * length, [ADJACENT]).template is None
    assert match_template("r://" + "x" * (length - 8) + "/end/", [ADJACENT]).template is None
    named = "r://" + "x" * (length - 8) + "/endy"
    assert match_template(named, [ADJACENT]).template == ADJACENT
    assert time.monotonic() - start < 0.5  # was hours from 64 characters on


def test_a_server_listing_a_megabyte_template_costs_one_read_of_it():
    """The check before the caps cut the template once per expression: a 1.2 MB template of
    400,000 expressions took minutes on the loop every MCP session shares (review 14b)."""
    huge = "r://" + "{a}" * 400_000
    start = time.monotonic()
    match = match_template("r://xyz", [huge, "r://{name}"])
    assert match.template == "r://{name}" and match.unchecked == 1
    assert time.monotonic() - start < 2.0  # a hang guard: about 0.1 s now


def test_the_simple_forms_name_what_they_did():
    assert match_template("notes://monday", ["notes://{day}"]).template == "notes://{day}"
    assert match_template("notes://a/b", ["notes://{day}"]).template is None
    assert match_template("notes://", ["notes://{day}"]).template is None
    assert match_template("file:///a/b/c", ["file:///{+path}"]).template == "file:///{+path}"
    assert match_template("x://a.b*(c)", ["x://{name}"]).template == "x://{name}"  # literal text
    assert match_template("x://a.b", ["x://a.b{"]).template is None  # a { without } is text
    assert match_template("x://a.b{", ["x://a.b{"]).template == "x://a.b{"


def test_the_work_of_one_check_is_bounded_and_said():
    many = [f"t://{{a}}/{i}/{{+b}}" for i in range(MAX_TEMPLATES_CHECKED + 5)]
    match = match_template("t://x/1/y", many)
    assert match.template == "t://{a}/1/{+b}" and match.unchecked == 0
    match = match_template(f"t://x/{MAX_TEMPLATES_CHECKED + 4}/y", many)
    assert (match.template, match.unchecked) == (None, 5)
    assert "resource templates not checked: 5, each over 1,000 characters" in match.note
    assert match_template("t://x/1/y", ["t://" + "x" * 1_000 + "{a}"]).unchecked == 0  # no start
    match = match_template("t://" + "y" * MAX_URI_CHARS, ["t://{+a}"])
    assert match.long_uri and "over 8,192 characters" in match.note


# RFC 6570's examples (section 3.2, level 4), each template with the URI it expands to: var =
# "value", hello = "Hello World!", path = "/foo/bar", list = [red, green, blue], keys = {semi:
# ";", dot: ".", comma: ","}, dom = [example, com], x = 1024, y = 768, empty = "", undef unset.
RFC_EXPANSIONS = [
    ("{var}", "value"),
    ("{x,y}", "1024,768"),
    ("{x,hello,y}", "1024,Hello%20World%21,768"),
    ("{var:3}", "val"),
    ("{+path}/here", "/foo/bar/here"),
    ("{#var}", "#value"),
    ("{#path:6}/here", "#/foo/b/here"),
    ("X{.var}", "X.value"),
    ("X{.list*}", "X.red.green.blue"),
    ("www{.dom*}", "www.example.com"),
    ("X{.undef}", "X"),
    ("{/var}", "/value"),
    ("{/var,x}/here", "/value/1024/here"),
    ("{/list*,path:4}", "/red/green/blue/%2Ffoo"),
    ("{/undef}", ""),
    ("{;x,y}", ";x=1024;y=768"),
    ("{;x,y,empty}", ";x=1024;y=768;empty"),
    ("{;list*}", ";list=red;list=green;list=blue"),
    ("{;keys*}", ";semi=%3B;dot=.;comma=%2C"),
    ("{?x,y}", "?x=1024&y=768"),
    ("{?x,y,empty}", "?x=1024&y=768&empty="),
    ("{?list*}", "?list=red&list=green&list=blue"),
    ("{?keys*}", "?semi=%3B&dot=.&comma=%2C"),
    ("{?x,undef}", "?x=1024"),
    ("{?undef,y}", "?y=768"),
    ("?fixed=yes{&x}", "?fixed=yes&x=1024"),
    ("{&x,y,empty}", "&x=1024&y=768&empty="),
]


@pytest.mark.parametrize(("template", "expanded"), RFC_EXPANSIONS)
def test_every_rfc6570_form_names_the_uris_it_expands_to(template, expanded):
    assert match_template(f"t://h{expanded}", [f"t://h{template}"]).template == f"t://h{template}"


@pytest.mark.parametrize(
    ("template", "uri"),
    [
        ("{/var}", "/a/b"),  # one variable: one segment
        ("{/var,x}", "/a/b/c"),
        ("{?x,y}", "?z=1"),  # not a parameter it names
        ("{?x}", "/x"),
        ("{?x}", "x=1"),  # no "?"
        ("{&x}", "?x=1"),
        ("{;x}", ";z=1"),
        ("{.x}", "/x"),
        ("{#x}", "x"),  # no "#"
        ("{var}", "/value"),
    ],
)
def test_rfc6570_forms_refuse_what_they_do_not_expand_to(template, uri):
    assert match_template(f"t://h{uri}", [f"t://h{template}"]).template is None
