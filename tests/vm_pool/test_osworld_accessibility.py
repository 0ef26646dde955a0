"""The desktop's accessibility tree, read as OSWorld reads it, and its metric.

On a real sandboxed desktop a GTK program's tree comes back through the agent as OSWorld's XML
and ``check_accessibility_tree`` scores it in the jail: 1 for an element that is there, 0 for
one that is not. Without a desktop: the tree's bounds (a tree past one is refused with the
bound's name, and the evaluation is not scored), the XML kept well-formed whatever the
programs' names hold, and the metric's rules as OSWorld's tasks write them. And the text the
active terminal (xterm) shows, OSWorld's ``vm_terminal_output``, or None when none is active.
"""

from pathlib import Path

import pytest
from lxml import etree

from vm_pool.agent import accessibility
from vm_pool.agent.accessibility import Element, TreeTooLarge, tree_xml
from vm_pool.evaluation import scoring
from vm_pool.evaluation.evaluator import NotScored, evaluate
from vm_pool.evaluation.getters import GETTERS, Reading
from vm_pool.evaluation.metrics import METRICS, MetricError

check_accessibility_tree = METRICS["check_accessibility_tree"]
ST = accessibility.NAMESPACES["st"]


class Node:
    """An accessible as AT-SPI's registry lists it: an element and its children."""

    def __init__(self, role: str, name: str = "", *children: "Node", **extra: str) -> None:
        self.role, self.name, self.children, self.extra = role, name, list(children), extra
        self.text = extra.pop("text", "")


class Nodes:
    """A desktop's applications, as ``vm_pool.agent.accessibility.Source``."""

    def __init__(self, *applications: Node) -> None:
        self.apps = list(applications)

    def applications(self) -> list[Node]:
        return self.apps

    def element(self, node: Node) -> Element:
        if node.role == "gone":
            raise RuntimeError("the accessible is gone")
        return Element(node.role, {"name": node.name, **node.extra}, node.text)

    def children(self, node: Node, calc_table: bool):
        for child in node.children:
            if child.role == "broken":
                raise RuntimeError("the program stopped answering")
            yield child


def mail_window() -> Nodes:
    pill = Node("label", "fox@someuniversity.edu", **{"attr:class": "pill-label"})
    return Nodes(
        Node(
            "application",
            "Thunderbird",
            Node(
                "tool bar",
                "",
                Node("label", "To"),
                Node("section", "", pill, **{"attr:class": "address-pill"}),
                **{"attr:id": "MsgHeadersToolbar"},
            ),
            Node("push button", "Send", **{"st:focused": "true"}, text="Send"),
        )
    )


def test_the_tree_is_osworlds_xml_with_its_namespaces():
    root = etree.fromstring(tree_xml(mail_window()).encode())
    assert root.tag == "desktop-frame"
    assert root.nsmap == accessibility.NAMESPACES
    (button,) = root.iter("push-button")
    assert button.get(f"{{{ST}}}focused") == "true" and button.text == "Send"


def test_a_tree_past_its_bounds_is_refused_with_the_bound_it_crossed():
    many = Nodes(Node("application", "big", *[Node("label", str(i)) for i in range(200)]))
    with pytest.raises(TreeTooLarge, match="over 100 elements"):
        tree_xml(many, max_nodes=100)
    with pytest.raises(TreeTooLarge, match="over 5000 bytes of XML"):
        tree_xml(many, max_bytes=5000)
    assert etree.fromstring(tree_xml(many).encode()).xpath("count(//label)") == 200


def test_osworlds_own_cuts_depth_and_width_are_kept():
    deep = Node("panel", "leaf")
    for _ in range(60):
        deep = Node("panel", "", deep)
    wide = Node("list", "", *[Node("list item", str(i)) for i in range(1100)])
    root = etree.fromstring(tree_xml(Nodes(Node("application", "a", deep, wide))).encode())
    assert len(root.xpath("//list/list-item")) == accessibility.MAX_WIDTH
    deepest = max(len(list(e.iterancestors())) for e in root.iter("panel"))
    assert deepest == accessibility.MAX_DEPTH  # the application is at depth 1, as in OSWorld


def test_what_programs_say_cannot_break_the_xml():
    hostile = Node(
        "push button",
        'a "quoted" <name> & \x07bell',
        **{"attr:bad:name": "x", "attr:good": "line\nbreak", "attr:1st": "y"},
        text="<b>not markup</b>\x00",
    )
    nodes = Nodes(
        Node("gone"),  # an application that closed while the tree was read
        Node("application", "app", Node("role with <angle>"), hostile, Node("broken")),
    )
    root = etree.fromstring(tree_xml(nodes).encode())
    (app,) = root
    assert [e.tag for e in app] == ["unknown", "push-button"]
    button = app[1]
    assert button.get("name") == 'a "quoted" <name> & bell'
    assert button.text == "<b>not markup</b>"
    assert button.get(f"{{{accessibility.NAMESPACES['attr']}}}good") == "line\nbreak"
    assert len(button.attrib) == 2


def test_check_accessibility_tree_scores_osworlds_rules():
    xml = tree_xml(mail_window())
    pill = (
        'tool-bar[attr|id=MsgHeadersToolbar] label[name=To]~[attr|class="address-pill"]'
        '>label[attr|class="pill-label"][name*="{}"]'
    )
    assert check_accessibility_tree(xml, [{"selectors": [pill.format("fox@")]}]) == 1.0
    assert check_accessibility_tree(xml, [{"selectors": [pill.format("iron@")]}]) == 0.0
    present = "//application[@name='Thunderbird']//*[contains(@name, 'Send')]"
    assert check_accessibility_tree(xml, [{"xpath": present}]) == 1.0
    assert check_accessibility_tree(xml, [{"xpath": "//push-button[@st:focused='true']"}]) == 1.0
    exact = {"xpath": "//push-button", "text": "Send", "exact": True}
    assert check_accessibility_tree(xml, [exact]) == 1.0
    fuzzy = {"xpath": "//push-button", "text": "Sent", "exact": False}
    assert check_accessibility_tree(xml, [fuzzy]) == 0.75
    assert check_accessibility_tree(xml, [exact, {"xpath": "//no-such-role"}]) == 0.0
    with pytest.raises(MetricError, match="'xpath' or 'selectors'"):
        check_accessibility_tree(xml, [{"text": "Send"}])
    with pytest.raises(MetricError, match="XPath"):
        check_accessibility_tree(xml, [{"xpath": "//push-button["}])
    with pytest.raises(MetricError, match="osname"):
        check_accessibility_tree(xml, [{"xpath": "//a"}], osname="plan9")


def test_a_refused_tree_is_not_scored_with_its_reason(tmp_path):
    refused = {"kind": "read", "reader": "accessibility_tree", "text": None, "file": None}
    refused["config"] = {"refused": "the accessibility tree has over 50000 elements"}
    rule = {"kind": "value", "value": [{"xpath": "//frame"}]}
    request = {"conjunction": "single"}
    request["metrics"] = [{"func": "check_accessibility_tree", "result": refused, "expected": rule}]
    verdict = scoring.score(request, tmp_path)
    assert verdict == {
        "scored": False,
        "limit": "accessibility tree",
        "reason": "accessibility tree: the accessibility tree has over 50000 elements",
    }


def never_fetched(url: str) -> bytes:
    raise AssertionError(url)


def present_in_tree(control, rule: dict) -> float:
    evaluator = {
        "func": "check_accessibility_tree",
        "result": {"type": "accessibility_tree"},
        "expected": {"type": "rule", "rules": [rule]},
    }
    return evaluate(control, evaluator, gave_up=False, fetch_url=never_fetched).value


@pytest.mark.django_db(transaction=True)
def test_a_gtk_windows_tree_is_read_from_the_desktop_and_scored(sandboxed_control):
    control = sandboxed_control
    launched = control.launch(["mousepad"], window_timeout=30)
    assert launched.window
    tree = control.accessibility_tree()
    assert tree.refused == "" and tree.xml is not None
    root = etree.fromstring(tree.xml.encode())
    assert root.xpath("//application/@name") == ["mousepad"]
    menu = "application[name=mousepad] frame[st|active=true] menu-bar > menu[name=File]"
    assert present_in_tree(control, {"selectors": [menu]}) == 1.0
    assert present_in_tree(control, {"selectors": [menu.replace("File", "Nowhere")]}) == 0.0
    with pytest.raises(NotScored):
        present_in_tree(control, {"xpath": "count(//menu)"})


def terminal_shows(control, text: str) -> float:
    evaluator = {
        "func": "check_include_exclude",
        "result": {"type": "vm_terminal_output"},
        "expected": {"type": "rule", "rules": {"include": [text], "exclude": []}},
    }
    return evaluate(control, evaluator, gave_up=False, fetch_url=never_fetched).value


@pytest.mark.django_db(transaction=True)
def test_the_active_terminals_screen_text_is_read_and_none_without_one(sandboxed_control):
    control = sandboxed_control
    gathered = GETTERS["vm_terminal_output"](
        Reading(control, Path("/nonexistent"), never_fetched), {}
    )
    assert gathered == {"kind": "value", "value": None}  # no window is active yet
    shell = "expr 6 \\* 9; exec sh"
    assert control.launch(["xterm", "-e", "sh", "-c", shell], window_timeout=30).window
    assert terminal_shows(control, "54") == 1.0
    assert terminal_shows(control, "55") == 0.0
