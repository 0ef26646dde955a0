"""compare_htmls: two HTML files, node by node, as OSWorld compares them with BeautifulSoup.

OSWorld parses each file with BeautifulSoup over lxml's HTML parser and walks both trees'
descendants side by side. This builds the same node sequence without BeautifulSoup: lxml's
HTML parser sends its events to ``_SoupBuilder``, which keeps what BeautifulSoup (4.13) keeps:

- text between two events is one string; a string of ASCII whitespace only (space, tab, line
  and form feed, carriage return) becomes one newline if it had one, else one space, except
  inside ``pre`` or ``textarea``; an empty comment becomes a space the same way;
- comments, doctypes (``name PUBLIC "id" "system"``) and processing instructions are strings
  too, but never part of a tag's text;
- strings inside ``style``, ``script``, ``template``, ``rt`` and ``rp`` belong to the innermost
  such tag: that tag's text is made of them alone, and no other tag's text includes them;
- the ``class``, ``accesskey`` and ``dropzone`` attributes of any tag (and ``rel``/``rev`` of
  ``a`` and ``link``, ``headers`` of ``td``/``th``, and the other HTML list attributes) are
  lists of their whitespace-separated words.

Two nodes match when both are strings with the same text, or both are tags with the same name,
the same stripped text and the same attributes (``ignore_sdnum`` leaves out LibreOffice's
``sdnum`` number format). The walk stops at the shorter sequence, as Python's zip does.
"""

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from lxml import etree

from vm_pool.evaluation.bounds import check_size

_ASCII_SPACES = frozenset(" \n\t\x0c\r")
_PRESERVE_WHITESPACE = frozenset({"pre", "textarea"})
_STRING_CONTAINERS = frozenset({"rt", "rp", "style", "script", "template"})
_LIST_ATTRIBUTES: dict[str, frozenset[str]] = {
    "*": frozenset({"class", "accesskey", "dropzone"}),
    "a": frozenset({"rel", "rev"}),
    "link": frozenset({"rel", "rev"}),
    "td": frozenset({"headers"}),
    "th": frozenset({"headers"}),
    "form": frozenset({"accept-charset"}),
    "object": frozenset({"archive"}),
    "area": frozenset({"rel"}),
    "icon": frozenset({"sizes"}),
    "iframe": frozenset({"sandbox"}),
    "output": frozenset({"for"}),
}
_PLAIN = ""  # the kind of an ordinary string, outside any string container
_WORD = re.compile(r"\S+")


@dataclass
class _Tag:
    name: str
    attrs: dict[str, Any]
    kind: str  # the kind of string its text is made of
    first: int  # its text: pieces[kind][first:last]
    last: int = 0


@dataclass
class _SoupBuilder:
    """An lxml parser target that lays out the nodes BeautifulSoup's tree would have."""

    nodes: list[_Tag | str] = field(default_factory=list)
    pieces: dict[str, list[str]] = field(default_factory=dict)
    open_tags: list[_Tag] = field(default_factory=list)
    open_names: Counter[str] = field(default_factory=Counter)
    containers: list[str] = field(default_factory=list)  # open string containers' names
    preserving: int = 0  # open pre and textarea tags
    pending: list[str] = field(default_factory=list)

    def text(self, tag: _Tag) -> str:
        return "".join(self.pieces.get(tag.kind, [])[tag.first : tag.last])

    def _flush(self, counted: bool = True) -> None:
        """End the current string; ``counted`` False for comments, doctypes and PIs."""
        if not self.pending:
            return
        data = "".join(self.pending)
        self.pending = []
        if not self.preserving and all(char in _ASCII_SPACES for char in data):
            data = "\n" if "\n" in data else " "
        self.nodes.append(data)
        if counted:
            kind = self.containers[-1] if self.containers else _PLAIN
            self.pieces.setdefault(kind, []).append(data)

    def _string(self, data: str) -> None:
        self._flush()
        self.pending.append(data)
        self._flush(counted=False)

    def _pop(self) -> _Tag:
        tag = self.open_tags.pop()
        tag.last = len(self.pieces.get(tag.kind, []))
        self.open_names[tag.name] -= 1
        self.preserving -= tag.name in _PRESERVE_WHITESPACE
        if tag.name in _STRING_CONTAINERS:
            self.containers.pop()
        return tag

    def start(self, name: str, attrib: Any) -> None:
        self._flush()
        attrs: dict[str, Any] = dict(attrib)
        listed = _LIST_ATTRIBUTES["*"] | _LIST_ATTRIBUTES.get(name.lower(), frozenset())
        for key, value in attrs.items():
            if key in listed and isinstance(value, str):
                attrs[key] = _WORD.findall(value)
        kind = name if name in _STRING_CONTAINERS else _PLAIN
        tag = _Tag(name, attrs, kind, len(self.pieces.get(kind, [])))
        self.nodes.append(tag)
        self.open_tags.append(tag)
        self.open_names[name] += 1
        self.preserving += name in _PRESERVE_WHITESPACE
        if name in _STRING_CONTAINERS:
            self.containers.append(name)

    def end(self, name: str) -> None:
        """Close the most recent open ``name`` and whatever is open inside it."""
        self._flush()
        while self.open_tags and self.open_names[name] > 0:
            if self._pop().name == name:
                return

    def data(self, data: str) -> None:
        self.pending.append(data)

    def comment(self, text: str) -> None:
        self._string(text)

    def doctype(self, name: str | None, public_id: str | None, system_id: str | None) -> None:
        value = name or ""
        if public_id is not None:
            value += f' PUBLIC "{public_id}"'
            if system_id is not None:
                value += f' "{system_id}"'
        elif system_id is not None:
            value += f' SYSTEM "{system_id}"'
        self._string(value)

    def pi(self, target: str, data: str | None) -> None:
        self._string(f"{target} {data or ''}")

    def close(self) -> None:
        self._flush()
        while self.open_tags:
            self._pop()


def _parse(path: str) -> _SoupBuilder:
    """The file's nodes in document order, read as UTF-8 text (newlines made ``\\n``)."""
    check_size(path)
    with open(path, encoding="utf-8") as f:
        markup = f.read()
    markup = markup.removeprefix("\N{BYTE ORDER MARK}")
    try:
        builder = _SoupBuilder()
        parser = etree.HTMLParser(target=builder, recover=True, encoding=None)
        parser.feed(markup)
        parser.close()
    except (UnicodeDecodeError, LookupError, etree.ParserError):
        # BeautifulSoup's second try: the same text handed over as UTF-8 bytes.
        builder = _SoupBuilder()
        parser = etree.HTMLParser(target=builder, recover=True, encoding="utf8")
        parser.feed(markup.encode("utf8"))
        parser.close()
    return builder


def compare_htmls(result: str | None, expected: str | None, **options: Any) -> float:
    """1 when the two HTML files' nodes match pairwise (see the module docstring)."""
    if not result or not expected:
        return 0.0
    # Deliberate difference from OSWorld: a result that is not UTF-8 text crashes OSWorld
    # (UnicodeDecodeError); here it is not the expected page and scores 0.
    try:
        soup1 = _parse(result)
    except (UnicodeDecodeError, etree.LxmlError):
        return 0.0
    soup2 = _parse(expected)
    ignore_sdnum = options.get("ignore_sdnum")
    for node1, node2 in zip(soup1.nodes, soup2.nodes, strict=False):
        if isinstance(node1, str) or isinstance(node2, str):
            if node1 != node2:
                return 0.0
            continue
        if node1.name != node2.name:
            return 0.0
        if soup1.text(node1).strip() != soup2.text(node2).strip():
            return 0.0
        if node1.attrs != node2.attrs:
            if not ignore_sdnum:
                return 0.0
            attrs1 = {k: v for k, v in node1.attrs.items() if k != "sdnum"}
            attrs2 = {k: v for k, v in node2.attrs.items() if k != "sdnum"}
            if attrs1 != attrs2:
                return 0.0
    return 1.0
