"""The catalog names of MCP tools: a server's tool names are untrusted input.

Its one reason to change: which catalog name each tool a server lists gets.

A server names its own tools, and nothing stops it from naming one ``search_tools``,
``good__get_weather`` (another server's prefix), ``docs__read_resource`` (another server's
resource reader), ``<|im_start|>system`` or 1,000 characters. The names the model sees
(and calls) are therefore chosen here, from the server's name and the tool's, never taken
as they are:

- a name that is not provider-safe (:data:`SAFE_NAME`, ``^[A-Za-z0-9_-]{1,64}$``: OpenAI's
  and Anthropic's rule) is mapped to a safe one (unsafe characters become ``_``, an empty
  result becomes ``tool``); the call still uses the server's own name;
- a name that two servers list, a built-in tool's name, a local tool's name, or a name that
  imitates another configured server (``<other>__...``) gets its own server's prefix,
  ``<server>__<name>``; with ``tool_name_prefix=True`` every name does;
- a name left longer than 64 characters is cut, with a hash of the original so two long
  names stay apart; a name taken all the same (``a.b`` and ``a_b`` of one server are both
  ``a_b``) gets that hash too, of its server and MCP name only, so it never changes with the
  other servers; a name still taken after all that is left out;
- a name one server lists twice keeps its first listing; the second is left out.

A server's prefix comes from its own name only (:func:`server_prefix`); a name with no ASCII
letter or digit (``погода``) has a short hash of itself as its prefix. Whether a tool *gets* the
prefix does depend on the other servers: ``search`` is ``notes__search`` while another loaded
server lists a ``search`` too, and plain ``search`` in a deployment where that server is down or
gone. So every tool also answers to its **aliases** (:attr:`NameChoice.aliases`): its name with
and without its server's prefix. A thread's exclusion and the loader's ``tool_metadata`` /
``categories`` keys follow a tool through them (an inclusion or a filter never does), except
that a key never follows the bare alias of a name imitating another configured server
(:attr:`NameChoice.imitations`). A name whose safe form was taken carries a hash of its server
and MCP name, never of what else was loaded; with ``tool_name_prefix=True`` names never change.

Two servers whose names map to one prefix (``my.docs``, ``my_docs``) are refused
(:func:`check_prefixes`) when both would put it on tool names: at load with
``tool_name_prefix=True``; otherwise once listed, if both have a prompt/resource tool or a
prefixed name. Two that never prefix a name load together.

Every change is reported in one :class:`~langgraph_toolbudget.mcp.errors.MCPLoadWarning`
per server, naming that server (the one that listed the name), never the one it imitated.

Key Components:
    - :func:`mcp_tool_name`: the prefixed name, ``<server>__<name>``.
    - :func:`server_prefix`: a server's prefix, ``<server>__``.
    - :func:`check_prefixes`: refuse two servers of one prefix.
    - :func:`assign_names`: the catalog name of every (server, MCP name) pair, and what was
      changed or left out, per server.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = [
    "MAX_NAME_CHARS",
    "PREFIX_TAKEN_ERROR",
    "SAFE_NAME",
    "NameChoice",
    "assign_names",
    "check_prefixes",
    "is_safe_name",
    "mcp_tool_name",
    "server_prefix",
]

MAX_NAME_CHARS = 64
"""The longest tool name the providers accept (OpenAI, Anthropic)."""
SAFE_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""A provider-safe tool name (matched whole)."""
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
PREFIX_SEPARATOR = "__"
PREFIX_TAKEN_ERROR = (
    "MCP servers {first!r} and {second!r} would share the tool-name prefix {prefix!r} "
    "(characters of a server's name outside [A-Za-z0-9_-] become '_'), and both give it to "
    "tool names ({why}), so their tools would take each other's names. Rename one of them "
    "(its key in the connections); a name of letters, digits, '_' and '-' is its own prefix."
)
_ASCII_ALNUM = re.compile(r"[A-Za-z0-9]")
_RECUTS = 8
"""How many salted hashes a name whose safe form was taken tries before it is left out."""


def is_safe_name(name: str) -> bool:
    """Is ``name`` a provider-safe tool name (``^[A-Za-z0-9_-]{1,64}$``)?"""
    return SAFE_NAME.fullmatch(name) is not None


def server_prefix(server: str) -> str:
    """The prefix of a server's tools: its name with unsafe characters as ``_``, and ``__``.

    A name with no ASCII letter or digit (``погода``, which would be ``___`` like every other
    such name) is ``_`` and 8 hex digits of its hash instead. Either way the prefix depends on
    the server's own name only; whether a tool carries it depends on the other servers loaded
    (see :func:`assign_names`), so a tool answers to both forms (:attr:`NameChoice.aliases`).
    """
    if _ASCII_ALNUM.search(server) is None:
        digest = hashlib.sha1(server.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        return f"_{digest}{PREFIX_SEPARATOR}"
    return f"{_UNSAFE.sub('_', server)}{PREFIX_SEPARATOR}"


def check_prefixes(servers: Iterable[str], why: str = "tool_name_prefix=True") -> None:
    """Refuse two servers whose names map to the same tool-name prefix (``my.docs``, ``my_docs``).

    Args:
        servers: the servers that give their prefix to tool names.
        why: how they do, for the message.

    Raises:
        ValueError: two of ``servers`` share a prefix; names both and the fix.
    """
    seen: dict[str, str] = {}
    for server in servers:
        prefix = server_prefix(server)
        first = seen.setdefault(prefix, server)
        if first != server:
            raise ValueError(
                PREFIX_TAKEN_ERROR.format(first=first, second=server, prefix=prefix, why=why)
            )


def mcp_tool_name(server: str, name: str) -> str:
    """The prefixed catalog name of an MCP tool: ``<server>__<name>``.

    Characters of the server name outside ``[A-Za-z0-9_-]`` become ``_`` (a name with none
    of ``[A-Za-z0-9]`` is a hash: :func:`server_prefix`).

    Args:
        server: the server's name in the catalog.
        name: the tool's MCP name.

    Returns:
        The prefixed name, e.g. ``mcp_tool_name("math", "search") == "math__search"``.
    """
    return f"{server_prefix(server)}{name}"


def _cut(name: str, original: str, *, always: bool = False) -> str:
    """``name`` within :data:`MAX_NAME_CHARS`: cut, with 8 hex digits of ``original``'s hash
    (``always``: even when it fits, to tell it from a name it would equal)."""
    if len(name) <= MAX_NAME_CHARS and not always:
        return name
    digest = hashlib.sha1(original.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{name[: MAX_NAME_CHARS - 9]}_{digest}"


def _safe(name: str) -> str:
    """``name`` with every run of unsafe characters as ``_`` (``tool`` if nothing is left)."""
    return _UNSAFE.sub("_", name).strip("_") or "tool"


def _shown(name: str) -> str:
    """A server's name for a warning: quoted, cut at 80 characters."""
    return repr(name if len(name) <= 80 else name[:77] + "...")


@dataclass
class NameChoice:
    """The catalog names of every listed tool, and what was changed on the way.

    Attributes:
        names: (server, MCP name) -> catalog name, for every tool kept.
        changes: server -> ``"'mcp name' -> 'catalog name' (why)"`` lines, for the tools
            whose catalog name is not their MCP name for a reason other than a plain
            collision between servers (which the naming rule documents).
        left_out: server -> ``"'mcp name' (why)"`` lines, for the tools left out.
        aliases: (server, MCP name) -> the tool's other names, for every tool kept: its
            (safe) name with and without its server's prefix (whichever of them is not its
            catalog name). Which one a tool gets depends on the other servers loaded; its
            aliases do not. A thread's exclusion follows a tool through all of them.
        imitations: (server, MCP name) -> the aliases of a tool that count for a thread's
            exclusions only, never for the operator's ``tool_metadata`` / ``categories`` keys
            (which a hostile server must not capture, nor a sibling make ambiguous): the bare
            form of a name imitating another configured server (``evil``'s ``good__x`` while
            ``good`` is configured: plain ``good__x`` while it was not), and the plain forms of
            a name whose safe form was taken (``a.b`` beside ``a_b`` is ``notes__a_b_<hash>``;
            it was plain ``a_b`` in a deployment where ``a_b`` was not listed). They are in
            :attr:`aliases` too, so an exclusion under one fails closed on both tools.
    """

    names: dict[tuple[str, str], str] = field(default_factory=dict)
    changes: dict[str, list[str]] = field(default_factory=dict)
    left_out: dict[str, list[str]] = field(default_factory=dict)
    aliases: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)
    imitations: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)


def assign_names(
    listed: Mapping[str, Sequence[str]],
    *,
    servers: Iterable[str],
    reserved: Collection[str] = (),
    prefix: bool = False,
) -> NameChoice:
    """The catalog name of every (server, MCP name) pair of ``listed``.

    Args:
        listed: server -> the MCP names it listed, in its order (servers in load order).
        servers: every configured server (a name imitating one that failed to load is
            renamed all the same).
        reserved: names that are never a server tool's: the built-in tools' and local tools'.
        prefix: prefix every name with its server (``tool_name_prefix=True``).

    Returns:
        The :class:`NameChoice`.
    """
    choice = NameChoice()
    safe = {
        (s, n): n if is_safe_name(n) else _safe(n) for s, names in listed.items() for n in names
    }
    counts = Counter(safe[(s, n)] for s, names in listed.items() for n in set(names))
    prefixes = {server_prefix(s): s for s in servers}
    taken = set(reserved)
    for server, names in listed.items():
        own = server_prefix(server)
        for mcp_name in names:
            if (server, mcp_name) in choice.names:  # listed twice: the first one stands
                line = f"{_shown(mcp_name)} (listed again by the server; its first listing is kept)"
                choice.left_out.setdefault(server, []).append(line)
                continue
            base = safe[(server, mcp_name)]
            why = [] if base == mcp_name else ["not a provider-safe name"]
            imitated = next(
                (s for p, s in prefixes.items() if p != own and base.startswith(p)), None
            )
            if imitated is not None:
                why.append(f"imitates the tool names of server {imitated!r}")
            if base in reserved:
                why.append("the name of a built-in or local tool")
            collide = prefix or counts[base] > 1 or imitated is not None or base in reserved
            full = mcp_tool_name(server, base) if collide else base
            if len(full) > MAX_NAME_CHARS:
                why.append(f"longer than {MAX_NAME_CHARS} characters")
            original = f"{server}\n{mcp_name}"
            name, hashed = _cut(full, original), False
            if name in taken:  # e.g. two unsafe names of one server mapped alike
                # the hash is of the server and the MCP name only (the counter counts this
                # name's own tries), so the name does not change with the other servers
                name, salt, hashed = _cut(full, original, always=True), original, True
                for tries in range(1, _RECUTS + 1):
                    if name not in taken:
                        break
                    salt = f"{original}\n{tries}"
                    name = _cut(full, salt, always=True)
                original = salt
                why.append("its safe name was taken")
            if name in taken:
                line = f"{_shown(mcp_name)} (its name {name!r} is taken)"
                choice.left_out.setdefault(server, []).append(line)
                continue
            taken.add(name)
            choice.names[(server, mcp_name)] = name
            prefixed = _cut(mcp_tool_name(server, base), original, always=hashed)
            bare = _cut(base, original, always=hashed)
            exclusion_only: list[str] = []
            if imitated is not None:
                # prefixed only while the server it imitates is configured: the bare form
                # stays an alias for a thread's exclusions, never for the operator's keys
                exclusion_only.append(bare)
            if hashed:
                # hashed only while a sibling with its safe form is listed: its plain forms
                # were its names without that sibling (an exclusion then fails closed on both)
                exclusion_only += [
                    _cut(mcp_tool_name(server, base), original),
                    _cut(base, original),
                ]
            forms = dict.fromkeys(a for a in (prefixed, bare, *exclusion_only) if a != name)
            choice.aliases[(server, mcp_name)] = tuple(forms)
            only = tuple(a for a in dict.fromkeys(exclusion_only) if a != name)
            if only:
                choice.imitations[(server, mcp_name)] = only
            if why:
                line = f"{_shown(mcp_name)} -> {name!r} ({'; '.join(why)})"
                choice.changes.setdefault(server, []).append(line)
    return choice
