"""The desktop's accessibility tree, read over AT-SPI and written as OSWorld's XML.

OSWorld's VM server answers ``/accessibility`` with the AT-SPI tree of every application as XML:
one element per accessible, named by its role (spaces as ``-``, ``unknown`` when it has none),
with ``name``; its states as ``st:<state>="true"``; its toolkit attributes as ``attr:<name>``;
its place and size as ``cp:screencoord`` and ``cp:size`` when it is visible and showing; its
text (without U+FFFC and U+FFFD) as the element's text; ``image`` and ``selection`` when it has
those interfaces; ``val:value``, ``val:min``, ``val:max``, ``val:step``; ``act:<action>_desc``
and ``act:<action>_kb``. The root is ``desktop-frame`` with the namespaces of
``NAMESPACES``. OSWorld stops at depth ``MAX_DEPTH`` and at ``MAX_WIDTH`` children, and walks a
LibreOffice Calc table by its showing cells only; a node whose children fail to list keeps
those listed before. All of that is done here the same way.

Everything an accessible says was written by a desktop program, so the tree is bounded: at
most ``MAX_NODES`` elements, ``MAX_TEXT_CHARS`` characters of text in one element and
``MAX_TREE_BYTES`` bytes of XML, read in ``TREE_TIMEOUT_S`` seconds. A tree past a bound is
refused whole with the bound's name (``TreeTooLarge``), never cut: a part of a tree could score
an element absent that is there.

The agent reads the tree in a child process, ``python3 -s -P -m vm_pool.agent.accessibility``
(the system's Python, which has Debian's ``python3-pyatspi``, whatever Python runs the agent):
a program that stops answering its AT-SPI calls cannot stall the agent, the time bound is a
kill, and the child's memory goes with it. The child prints the XML and exits 0, or prints why
the tree is refused and exits ``REFUSED``.

The desktop's programs reach AT-SPI through the desktop's session bus (``dbus-daemon``, started
by the agent) and the accessibility bus of ``at-spi-bus-launcher`` on it, which also tells
Chromium and Mozilla's programs that assistive technology is on (``--a11y=1``).
"""

import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from xml.sax.saxutils import escape, quoteattr

from vm_pool.desktop import MAX_TREE_BYTES, TREE_TIMEOUT_S

# OSWorld's namespaces of the tree on Ubuntu (desktop_env/server/main.py).
NAMESPACES = {
    "st": "https://accessibility.ubuntu.example.org/ns/state",
    "attr": "https://accessibility.ubuntu.example.org/ns/attributes",
    "cp": "https://accessibility.ubuntu.example.org/ns/component",
    "doc": "https://accessibility.ubuntu.example.org/ns/document",
    "docattr": "https://accessibility.ubuntu.example.org/ns/document/attributes",
    "txt": "https://accessibility.ubuntu.example.org/ns/text",
    "val": "https://accessibility.ubuntu.example.org/ns/value",
    "act": "https://accessibility.ubuntu.example.org/ns/action",
}
ROOT = "desktop-frame"
MAX_DEPTH = 50  # OSWorld's: the elements at this depth are written without their children
MAX_WIDTH = 1024  # OSWorld's: the children of one element past this many are left out
MAX_CALC_ROWS = 1_048_576  # OSWorld's walk of a Calc table, by rows of showing cells
CALC_GIVE_UP = 500  # OSWorld's: rows or columns looked at before no showing cell means none
MAX_NODES = 50_000
MAX_TEXT_CHARS = 100_000
REFUSED = 3  # the child's exit code for a refused tree
SYSTEM_PYTHON = "/usr/bin/python3"
BUS_READY_TIMEOUT_S = 10.0
# Turns assistive technology on (org.a11y.Status.IsEnabled): D-Bus starts the AT-SPI bus's
# launcher for it, and Chromium and Mozilla's programs expose their trees only when it is on.
ENABLE_COMMAND = [
    "dbus-send", "--session", "--print-reply", "--reply-timeout=5000", "--dest=org.a11y.Bus",
    "/org/a11y/bus", "org.freedesktop.DBus.Properties.Set",
    "string:org.a11y.Status", "string:IsEnabled", "variant:boolean:true",
]  # fmt: skip

# An XML name without a colon (XML 1.0's NCName).
_START = (
    "A-Za-z_\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u02ff\u0370-\u037d\u037f-\u1fff\u200c\u200d"
    "\u2070-\u218f\u2c00-\u2fef\u3001-\ud7ff\uf900-\ufdcf\ufdf0-\ufffd\U00010000-\U000effff"
)
_NAME = re.compile(f"[{_START}][{_START}\\-.0-9\u00b7\u0300-\u036f\u203f-\u2040]*")
# What an attribute value must escape to be read back as it was (a parser folds whitespace).
_ATTRIBUTE_ESCAPES = {"\n": "&#10;", "\r": "&#13;", "\t": "&#9;"}
# What XML 1.0 cannot hold at all, even escaped.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


class TreeTooLarge(Exception):
    """The tree crosses one of the bounds; the message names it."""


@dataclass
class Element:
    """One accessible as OSWorld writes it: its role (as AT-SPI names it), its attributes with
    their prefixes (``st:active``, ``name``), and its text."""

    role: str
    attributes: dict[str, str] = field(default_factory=dict)
    text: str = ""

    @property
    def tag(self) -> str:
        return (self.role.strip() or "unknown").replace(" ", "-")


class Source(Protocol):
    """Where the accessibles come from: AT-SPI on a desktop (``AtspiSource``)."""

    def applications(self) -> list[Any]: ...

    def element(self, node: Any) -> Element: ...

    def children(self, node: Any, calc_table: bool) -> Iterator[Any]: ...


class XmlOut:
    """The XML as it is written, counted against ``max_bytes`` and ``max_nodes``."""

    def __init__(self, max_nodes: int, max_bytes: int) -> None:
        self.parts: list[str] = []
        self.size = 0
        self.nodes = 0
        self.max_nodes = max_nodes
        self.max_bytes = max_bytes

    def write(self, text: str) -> None:
        self.size += len(text.encode())
        if self.size > self.max_bytes:
            raise TreeTooLarge(f"the accessibility tree is over {self.max_bytes} bytes of XML")
        self.parts.append(text)

    def count(self) -> None:
        self.nodes += 1
        if self.nodes > self.max_nodes:
            raise TreeTooLarge(f"the accessibility tree has over {self.max_nodes} elements")


def xml_text(value: str) -> str:
    """Text as XML can hold it: the characters XML 1.0 cannot hold at all are left out."""
    # Deliberate difference from OSWorld: lxml refuses such a character, and OSWorld then loses
    # the node's subtree (or the whole tree); a program's stray control character is dropped.
    return _NOT_XML.sub("", value)


def start_tag(element: Element) -> tuple[str, str]:
    """The element's name and start tag (without its ``>``); attribute names that are not XML
    names are left out."""
    # Deliberate difference from OSWorld: lxml refuses such a name (a toolkit attribute with a
    # colon, say) and OSWorld loses the node's subtree; here only that attribute is dropped.
    tag = element.tag if _NAME.fullmatch(element.tag) else "unknown"
    written = [tag]
    for name, value in element.attributes.items():
        prefix, _, local = name.rpartition(":")
        if (prefix and prefix not in NAMESPACES) or not _NAME.fullmatch(local):
            continue
        written.append(f"{name}={quoteattr(xml_text(value), _ATTRIBUTE_ESCAPES)}")
    return tag, "<" + " ".join(written)


def text_content(text: str) -> str:
    """An element's text as XML, its carriage returns kept (a parser turns them into newlines)."""
    return escape(xml_text(text), {"\r": "&#13;"})


def write_tree(source: Source, out: XmlOut) -> None:
    """The whole desktop: ``desktop-frame`` and each application's subtree in it."""
    declarations = " ".join(f"xmlns:{p}={quoteattr(uri)}" for p, uri in NAMESPACES.items())
    out.write(f"<{ROOT} {declarations}>")
    for application in source.applications():
        try:
            element = source.element(application)
        except TreeTooLarge:
            raise
        except Exception:  # noqa: BLE001, S112 - it ended while the tree was read
            # Deliberate difference from OSWorld: there an application that cannot be read
            # fails the whole tree; here it is left out, as a program that closed is.
            continue
        _write_node(source, application, element, 1, "", out)
    out.write(f"</{ROOT}>")


def _write_node(
    source: Source, node: Any, element: Element, depth: int, flag: str, out: XmlOut
) -> None:
    """One element and, above ``MAX_DEPTH``, its children. Only ``TreeTooLarge`` leaves here
    once the start tag is written, so the XML stays whole."""
    out.count()
    if not flag and element.role == "document spreadsheet":
        flag = "calc"
    tag, start = start_tag(element)
    out.write(start + ">" + text_content(element.text))
    if depth < MAX_DEPTH:
        calc_table = flag == "calc" and element.tag == "table"
        try:
            for index, child in enumerate(source.children(node, calc_table)):
                if index == MAX_WIDTH:
                    break
                _write_node(source, child, source.element(child), depth + 1, flag, out)
        except TreeTooLarge:
            raise
        except Exception:  # noqa: BLE001, S110 - OSWorld keeps the children listed before
            pass
    out.write(f"</{tag}>")


def tree_xml(source: Source, max_nodes: int = MAX_NODES, max_bytes: int = MAX_TREE_BYTES) -> str:
    """The tree as OSWorld's XML; ``TreeTooLarge`` past a bound."""
    out = XmlOut(max_nodes, max_bytes)
    write_tree(source, out)
    return "".join(out.parts)


class AtspiSource:
    """The accessibles of the desktop's AT-SPI registry, read as OSWorld reads them."""

    def __init__(self, pyatspi: Any, max_text_chars: int = MAX_TEXT_CHARS) -> None:
        self.pyatspi = pyatspi
        self.max_text_chars = max_text_chars

    def applications(self) -> list[Any]:
        return list(self.pyatspi.Registry.getDesktop(0))

    def element(self, node: Any) -> Element:
        atspi = self.pyatspi
        attributes: dict[str, str] = {"name": node.name}
        for state in node.getState().get_states():
            state_name = atspi.StateType._enum_lookup[state].split("_", maxsplit=1)[1].lower()
            if state_name:
                attributes[f"st:{state_name}"] = "true"
        for name, value in node.get_attributes().items():
            if name:
                attributes[f"attr:{name}"] = value
        if attributes.get("st:visible") == "true" and attributes.get("st:showing") == "true":
            try:
                box = node.queryComponent().getExtents(atspi.XY_SCREEN)
            except NotImplementedError:
                pass
            else:
                attributes["cp:screencoord"] = str(tuple(box[0:2]))
                attributes["cp:size"] = str(tuple(box[2:]))
        text = ""
        try:
            text_object = node.queryText()
        except NotImplementedError:
            pass
        else:
            count = text_object.characterCount
            if count > self.max_text_chars:
                raise TreeTooLarge(
                    f"an accessible ({node.getRoleName()}) holds {count} characters of text "
                    f"(at most {self.max_text_chars})"
                )
            text = text_object.getText(0, count).replace("\ufffc", "").replace("\ufffd", "")
        for interface, key in (("queryImage", "image"), ("querySelection", "selection")):
            try:
                getattr(node, interface)()
            except NotImplementedError:
                continue
            attributes[key] = "true"
        self._value(node, attributes)
        self._actions(node, attributes)
        return Element(node.getRoleName(), attributes, text)

    @staticmethod
    def _value(node: Any, attributes: dict[str, str]) -> None:
        try:
            value = node.queryValue()
        except NotImplementedError:
            return
        for name, field_name in (
            ("value", "currentValue"),
            ("min", "minimumValue"),
            ("max", "maximumValue"),
            ("step", "minimumIncrement"),
        ):
            try:
                attributes[f"val:{name}"] = str(getattr(value, field_name))
            except Exception:  # noqa: BLE001, S112 - OSWorld leaves out a value it cannot read
                continue

    @staticmethod
    def _actions(node: Any, attributes: dict[str, str]) -> None:
        try:
            action = node.queryAction()
        except NotImplementedError:
            return
        for i in range(action.nActions):
            name = action.getName(i).replace(" ", "-")
            attributes[f"act:{name}_desc"] = action.getDescription(i)
            attributes[f"act:{name}_kb"] = action.getKeyBinding(i)

    def children(self, node: Any, calc_table: bool) -> Iterator[Any]:
        if calc_table:
            yield from self._showing_cells(node)
        else:
            yield from node

    def _showing_cells(self, table: Any) -> Iterator[Any]:
        """OSWorld's walk of a Calc sheet: row by row, the cells that show, from the first
        showing column, until a row shows none past it (or none of 500 rows or columns shows).
        OSWorld takes the row length from LibreOffice's version; the table's own column count
        is that number."""
        columns = table.queryTable().nColumns
        showing_state = self.pyatspi.STATE_SHOWING
        index_base = 0
        first_showing = False
        column_base: int | None = None
        for row in range(MAX_CALC_ROWS):
            column = column_base or 0
            for column in range(column_base or 0, columns):
                cell = table[index_base + column]
                if cell.getState().contains(showing_state):
                    if not first_showing:
                        column_base = column
                        first_showing = True
                    yield cell
                elif (first_showing and column_base is not None) or column >= CALC_GIVE_UP:
                    break
            if (first_showing and column == column_base) or (
                not first_showing and row >= CALC_GIVE_UP
            ):
                break
            index_base += columns


def session_bus_command(address: str) -> list[str]:
    """The desktop's session bus, listening at ``address`` (``unix:path=...``)."""
    return [
        "dbus-daemon", "--session", "--nofork", "--nopidfile", "--nosyslog", f"--address={address}",
    ]  # fmt: skip


def read_tree(env: dict[str, str], timeout: float = TREE_TIMEOUT_S) -> dict[str, str]:
    """The desktop's tree, read by a child process (see the module's docstring):
    ``{"xml": ...}``, or ``{"refused": why}`` past a bound. ``RuntimeError`` when AT-SPI
    cannot be read at all."""
    code_root = str(Path(__file__).resolve().parents[2])  # where vm_pool is, for the child
    argv = [SYSTEM_PYTHON, "-s", "-P", "-m", "vm_pool.agent.accessibility"]
    try:
        done = subprocess.run(
            argv,
            env={**env, "PYTHONPATH": code_root},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"refused": f"the accessibility tree was not read in {timeout:g}s"}
    if done.returncode == REFUSED:
        return {"refused": done.stdout.decode(errors="replace")[:1000]}
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip()[-1000:]
        raise RuntimeError(f"the accessibility tree cannot be read: {tail}")
    if len(done.stdout) > MAX_TREE_BYTES:  # the child keeps to it; this is its guard
        return {"refused": f"the accessibility tree is over {MAX_TREE_BYTES} bytes of XML"}
    return {"xml": done.stdout.decode()}


def main() -> None:
    import pyatspi  # the system's python3-pyatspi: only the child process has it

    try:
        xml = tree_xml(AtspiSource(pyatspi))
    except TreeTooLarge as error:
        sys.stdout.write(str(error))
        sys.exit(REFUSED)
    sys.stdout.write(xml)


if __name__ == "__main__":
    main()
