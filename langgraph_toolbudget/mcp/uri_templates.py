"""Which URIs a server's resource templates name: RFC 6570 templates matched in linear time.

Its one reason to change: how a URI the model writes is checked against a server's resource
templates before ``<server>__read_resource`` sends it.

A template names the URIs it expands to under RFC 6570 (level 4): ``{x}`` one path segment,
``{+x}`` any text, ``{/path*}`` path segments (GitHub's ``repo://{owner}/{repo}/contents{/path*}``),
``{?q}``/``{&x}`` query parameters, ``{;x}`` path parameters, ``{.x}`` a label, ``{#x}`` a
fragment (see :func:`template_regex`).

The check runs on the catalog's background loop, which owns every server's session, so it is
bounded whatever the server lists and the model writes: each template becomes an RE2 pattern
(``google-re2``, a linear-time engine, as for ``search_tools``), never a backtracking one (a
template of twelve ``{+x}`` and a 64-character URI kept Python's ``re`` busy for hours and
froze every server), and the work of one check is capped (:data:`MAX_TEMPLATE_CHARS`,
:data:`MAX_TEMPLATES_CHECKED`, :data:`MAX_URI_CHARS`). A template the caps leave out is
counted in :attr:`TemplateMatch.unchecked`, so the refusal can say so.

Key Components:
    - :func:`template_regex`: a template as the RE2 pattern of the URIs it names.
    - :func:`match_template`: the template of a list that names a URI, if any.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import re2

__all__ = [
    "MAX_TEMPLATES_CHECKED",
    "MAX_TEMPLATE_CHARS",
    "MAX_URI_CHARS",
    "TemplateMatch",
    "match_template",
    "template_regex",
]

MAX_TEMPLATE_CHARS = 1_000
"""A resource template longer than this is not checked (it names no URI here)."""
MAX_TEMPLATES_CHECKED = 100
"""Templates checked at most for one URI, of those whose text before the first expression
starts it (a cheap test that leaves the others out without compiling them)."""
MAX_URI_CHARS = 8_192
"""A URI longer than this is checked against no template (a listed resource may be longer)."""
_MAX_MEM = 2 << 20  # RE2's memory for one template's program: a larger one is not checked

_SEGMENT = "[^/?#]"  # a character of one path segment
_QUERY_VALUE = "[^#&]*"
_PARAM_VALUE = "[^/?#;]*"
_OPERATORS = frozenset("+#./;?&")


LONG_URI_NOTE = " (it is over {limit:,} characters, so no resource template was checked)"
UNCHECKED_NOTE = (
    " (resource templates not checked: {count:,}, each over {chars:,} characters or past the "
    "first {most} that could name it)"
)


@dataclass(frozen=True)
class TemplateMatch:
    """The answer of :func:`match_template`.

    Attributes:
        template: the first template that names the URI; None if none does.
        unchecked: templates that could name the URI but were not checked: over
            :data:`MAX_TEMPLATE_CHARS`, past :data:`MAX_TEMPLATES_CHECKED`, or too large for
            RE2; all of them for a URI over :data:`MAX_URI_CHARS`.
        long_uri: the URI is over :data:`MAX_URI_CHARS`.
    """

    template: str | None = None
    unchecked: int = 0
    long_uri: bool = False

    @property
    def note(self) -> str:
        """What a refusal adds about the templates not checked ("" if every one was)."""
        if self.long_uri:
            return LONG_URI_NOTE.format(limit=MAX_URI_CHARS)
        if self.unchecked:
            return UNCHECKED_NOTE.format(
                count=self.unchecked, chars=MAX_TEMPLATE_CHARS, most=MAX_TEMPLATES_CHECKED
            )
        return ""


def _literal(text: str) -> str:
    """``text`` as an RE2 pattern matching it as written (every character but letters and
    digits as its code point)."""
    return "".join(c if c.isascii() and c.isalnum() else f"\\x{{{ord(c):x}}}" for c in text)


def _parts(template: str) -> list[tuple[str, str | None]]:
    """The template as (literal text, expression body or None) pairs; a ``{`` with no ``}``
    after it is literal text."""
    parts: list[tuple[str, str | None]] = []
    at = 0  # an index, not slices of what is left: linear in the template's length
    while True:
        start = template.find("{", at)
        end = template.find("}", start + 1) if start >= 0 else -1
        if start < 0 or end < 0:
            parts.append((template[at:], None))
            return parts
        parts.append((template[at:start], template[start + 1 : end]))
        at = end + 1


def _variables(specs: str) -> tuple[list[str], bool]:
    """An expression's variable names (a prefix ``:3`` dropped) and whether one is exploded
    (``*``: a list or a map, its items each named or each a segment)."""
    names, explode = [], False
    for spec in specs.split(","):
        explode = explode or spec.endswith("*")
        names.append(spec.removesuffix("*").split(":", 1)[0])
    return names, explode


def _expression(body: str) -> str:
    """The pattern of the text one expression expands to (RFC 6570, level 4).

    ``{x}`` one path segment and ``{+x}`` any text, neither empty; the others expand to
    nothing when their variables are undefined:
    ``{#x}`` ``#`` and any text, ``{.x}`` ``.`` and a label, ``{/x,y}`` a path segment per
    variable (``{/x*}`` any number), ``{;x}`` ``;x`` or ``;x=value`` parameters, ``{?x}`` and
    ``{&x}`` query parameters ``x=value``. Named parameters may come in any order, and a
    variable exploded (a map) names them as it likes.
    """
    op = body[:1] if body[:1] in _OPERATORS else ""
    names, explode = _variables(body[len(op) :])
    known = [n for n in names if n]
    if op == "":
        return _SEGMENT + "+"
    if op == "+":
        return ".+"
    if op == "#":
        return "(?:#.*)?"
    if op == ".":
        return f"(?:\\.{_SEGMENT}*)?"
    if op == "/":
        return "(?:/[^?#]*)?" if explode else f"(?:/{_SEGMENT}*){{0,{len(names)}}}"
    any_name = explode or not known
    if op == ";":
        key = "[^/?#;=]+" if any_name else f"(?:{'|'.join(map(_literal, known))})"
        return f"(?:;{key}(?:={_PARAM_VALUE})?)*"
    key = "[^#&=]+" if any_name else f"(?:{'|'.join(map(_literal, known))})"
    item = f"{key}={_QUERY_VALUE}"
    first = "\\?" if op == "?" else "&"
    return f"(?:{first}{item}(?:&{item})*)?"


def template_regex(template: str) -> str:
    """A resource template (RFC 6570) as the RE2 pattern of the URIs it names, matched whole.

    Args:
        template: the template, as the server lists it (``notes://{day}``).

    Returns:
        The pattern (for ``re2``; with a backtracking engine it could run for hours).
    """
    pattern = [
        _literal(text) + (_expression(body) if body is not None else "")
        for text, body in _parts(template)
    ]
    return "(?s)" + "".join(pattern)


@functools.lru_cache(maxsize=256)
def _compiled(template: str) -> Any:
    """The template's compiled pattern; None if RE2 refuses it (too large)."""
    options = re2.Options()
    options.log_errors = False
    options.max_mem = _MAX_MEM
    try:
        return re2.compile(template_regex(template), options=options)
    except re2.error:
        return None


def _could_name(uri: str, template: str) -> bool:
    """Does the URI start and end with the template's text before its first expression and
    after its last? (Every URI it names does.)"""
    parts = _parts(template)
    head, tail = parts[0][0], parts[-1][0] if len(parts) > 1 else ""
    return uri.startswith(head) and uri.endswith(tail) and len(uri) >= len(head) + len(tail)


def match_template(uri: str, templates: Iterable[str]) -> TemplateMatch:
    """The first of ``templates`` that names ``uri``, in bounded, linear time.

    Args:
        uri: the URI, as it will be sent.
        templates: the server's resource templates.

    Returns:
        The :class:`TemplateMatch`: the template (or None) and how many were not checked.
    """
    candidates = [t for t in templates if _could_name(uri, t)]
    if len(uri) > MAX_URI_CHARS:
        return TemplateMatch(None, len(candidates), long_uri=True)
    checked = unchecked = 0
    for template in candidates:
        compiled = None
        if len(template) <= MAX_TEMPLATE_CHARS and checked < MAX_TEMPLATES_CHECKED:
            compiled = _compiled(template)
        if compiled is None:
            unchecked += 1
            continue
        checked += 1
        if compiled.fullmatch(uri) is not None:
            return TemplateMatch(template, unchecked)
    return TemplateMatch(None, unchecked)
