"""Case makers for the metrics that score a value or a small text file: command output,
browser state, settings files (general, chrome, basic_os, vscode, gimp's config)."""

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.support.osworld_differential.core import Case, makes, words


def _write(folder: Path, name: str, text: str) -> str:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def _near(rng: random.Random, text: str) -> str:
    """The text as an agent might leave it: the same, re-cased, trimmed, cut or extended."""
    return rng.choice([text, text, text.upper(), text.strip(), text[:-1], text + "\n", text + " x"])


@makes("exact_match")
def _exact_match(rng: random.Random, folder: Path) -> Iterator[Case]:
    published = [
        "true\n",
        "false\n",
        "Thomas",
        "true",
        "1\n",
        "[1, 1]\n",
        "uint32 0\n",
        "File exists.\n",
        "a.pdf\nb.pdf\nGLUE: A MULTI-TASK.pdf\n",
    ]
    for index in range(30):
        expected = rng.choice(published)
        result = None if index == 0 else _near(rng, expected)
        yield Case(f"{result!r} vs {expected!r}", (result, {"expected": expected}))


@makes("match_in_list")
def _match_in_list(rng: random.Random, folder: Path) -> Iterator[Case]:
    lists = [["Microsoft Bing", "Bing"], ["light", "system"]]
    for _ in range(20):
        expected = rng.choice(lists)
        result = rng.choice([*expected, "dark", "Google", "bing", None])
        yield Case(f"{result!r} in {expected}", (result, {"expected": expected}))


@makes("is_in_list")
def _is_in_list(rng: random.Random, folder: Path) -> Iterator[Case]:
    path = "/home/user/Desktop/helloExtension"
    for _ in range(20):
        result = rng.sample(
            [path, "/home/user/other", path + "2", "/opt/ext"], rng.randint(0, 3)
        ) + rng.choice([[], [path]])
        as_text = rng.random() < 0.3
        value: Any = "\n".join(result) if as_text else result
        yield Case(f"{value!r}", (value, {"expected": path}))


@makes("fuzzy_match")
def _fuzzy_match(rng: random.Random, folder: Path) -> Iterator[Case]:
    for _ in range(20):
        expected = " ".join(words(rng, 3))
        yield Case("near text", (_near(rng, expected), {"expected": expected}))


@makes("literal_match")
def _literal_match(rng: random.Random, folder: Path) -> Iterator[Case]:
    for _ in range(24):
        expected = words(rng, rng.randint(1, 4))
        result: Any = list(expected)
        change = rng.randrange(5)
        if change == 1:
            result = [w.upper() for w in result]
        elif change == 2:
            result = result[:-1]
        elif change == 3:
            result = tuple(result)
        elif change == 4:
            result = " ".join(result)
        options = rng.choice([{"type": "list", "ignore_case": True}, {"type": "list"}, {}])
        yield Case(f"{result!r} vs {expected!r}", (result, expected), options)


@makes("check_include_exclude")
def _include_exclude(rng: random.Random, folder: Path) -> Iterator[Case]:
    published = [
        {"include": ["use terminal"]},
        {"include": ["filters-vignette"], "exclude": ["error", "failed", "not found"]},
        {
            "include": ["no libreoffice is running", "killed from terminal"],
            "exclude": ["libreoffice is still running", "not killed from terminal"],
        },
        {"include": [], "exclude": ["Error:"]},
        {"include": ["43 132"], "exclude": []},
    ]
    for index in range(30):
        rules = rng.choice(published)
        parts = [s for s in rules.get("include", []) if rng.random() < 0.8]
        parts += [s for s in rules.get("exclude", []) if rng.random() < 0.2]
        rng.shuffle(parts)
        result = None if index == 0 else "\n".join(["$ run", *parts, "done"])
        yield Case(f"{result!r}", (result, rules))


@makes("check_direct_json_object")
def _direct_json_object(rng: random.Random, folder: Path) -> Iterator[Case]:
    published: list[dict[str, Any]] = [
        {"expected": {"name": "James Smith", "mail": "james.smith@gmail.com"}},
        {"expected": {"q": "drip coffee maker"}, "expect_in_result": True},
        {
            "expected": {"fromStation": ["BOM"], "toStation": ["STO", "ARN"]},
            "expect_in_result": True,
        },
        {"expected": {"modelList": ["iphone-15", "iphone-14"]}, "ignore_list_order": True},
        {"expected": {"Black": True, "On sale": True, "is_other_exist": False}},
        {"expected": {"rank": "__EVALUATION_FAILED__"}},
    ]
    for index in range(36):
        rules = rng.choice(published)
        result: Any = {}
        for key, value in rules["expected"].items():
            roll = rng.random()
            if roll < 0.6:
                result[key] = value
            elif roll < 0.8 and isinstance(value, list):
                result[key] = rng.choice([value[::-1], value[:1], value[0]])
            elif roll < 0.8 and isinstance(value, str):
                result[key] = rng.choice([value + " and more", "x " + value, value.upper()])
            elif roll < 0.9:
                result[key] = "other"
        if index % 6 == 1:
            result = json.dumps(result).replace('"', "'")
        elif index == 2:
            result = None
        elif index == 3:
            result = "{not json"
        yield Case(f"{result!r}", (result, rules))


@makes("check_list")
def _check_list(rng: random.Random, folder: Path) -> Iterator[Case]:
    published = [
        {"unexpect": [".+"]},
        {"expect": ["org\\.openoffice\\.languagetool\\.oxt"]},
        {"expect": ["openjdk-\\d+-(jre|jdk)"]},
        {"expect": ["\\bCOMPANY\\.msf\\b", "\\bCOMPANY/?(?!\\.msf)"]},
    ]
    lines = [
        "org.openoffice.languagetool.oxt",
        "openjdk-17-jre",
        "openjdk-x-jdk",
        "COMPANY.msf",
        "COMPANY",
        "UNIVERSITY",
        "",
    ]
    for index in range(24):
        rules = rng.choice(published)
        text = "\n".join(rng.sample(lines, rng.randint(0, 4)))
        path = None if index == 0 else _write(folder, f"list{index}.txt", text)
        yield Case(f"{text!r}", (path, rules))


@makes("check_json")
def _check_json(rng: random.Random, folder: Path) -> Iterator[Case]:
    extension = {
        "name": "happy-extension",
        "version": "0.0.1",
        "background": {"scripts": ["background_script.js"]},
    }
    extension_rules = {
        "expect": [
            {"key": ["name"], "method": "eq", "ref": "happy-extension"},
            {"key": ["version"], "method": "eq", "ref": "0.0.1"},
            {"key": ["background", "scripts"], "method": "eq", "ref": ["background_script.js"]},
        ]
    }
    folder_rules = {
        "expect": [
            {
                "key": ["chrome://messenger/content/messenger.xhtml", "folderTree", "mode"],
                "method": "re",
                "ref": "\\bsmart\\b",
            }
        ]
    }
    for index in range(24):
        kind = index % 3
        if kind == 0:
            data: Any = json.loads(json.dumps(extension))
            if rng.random() < 0.5:
                data[rng.choice(["name", "version"])] = "other"
            if rng.random() < 0.2:
                del data["background"]
            yield Case(
                f"manifest {data}",
                (_write(folder, f"m{index}.json", json.dumps(data)), extension_rules),
            )
        elif kind == 1:
            mode = rng.choice(["smart", "all smart", "smartly", "favorite"])
            data = {"chrome://messenger/content/messenger.xhtml": {"folderTree": {"mode": mode}}}
            if rng.random() < 0.2:
                data = {"other": 1}
            text = json.dumps(data) if rng.random() < 0.9 else "{broken"
            yield Case(f"xulstore {text}", (_write(folder, f"x{index}.json", text), folder_rules))
        else:
            name = rng.choice(["Test Account", "test account"])
            email = rng.choice(["Test@gmail.com", "other@gmail.com"])
            text = f"name: {name}\nauthor:\n  name: {name}\n  email: {email}\n"
            if rng.random() < 0.15:
                text = ""
            rules = {
                "expect": [
                    {"key": ["name"], "method": "eq", "ref": "Test Account"},
                    {"key": ["author", "name"], "method": "eq", "ref": "Test Account"},
                    {"key": ["author", "email"], "method": "eq", "ref": "Test@gmail.com"},
                ]
            }
            path = _write(folder, f"y{index}.yaml", text)
            yield Case(f"yaml {text!r}", (path, rules), {"is_yaml": True})


@makes("check_json_settings")
def _json_settings(rng: random.Random, folder: Path) -> Iterator[Case]:
    published: list[dict[str, Any]] = [
        {"python.analysis.diagnosticSeverityOverrides": {"reportMissingImports": "none"}},
        {"debug.focusEditorOnBreak": False},
        {"editor.wordWrapColumn": 50},
        {"files.autoSave": "afterDelay", "files.autoSaveDelay": 500},
        {"folders": [{"path": "project"}, {"path": "data1"}, {"path": "data2"}]},
    ]
    for index in range(24):
        expected = rng.choice(published)
        data = dict(expected)
        key = rng.choice(list(data))
        roll = rng.random()
        if roll < 0.3:
            data[key] = 0
        elif roll < 0.4:
            del data[key]
        data["editor.fontSize"] = 14
        text = json.dumps(data) if rng.random() < 0.9 else "// comment\n" + json.dumps(data)
        path = None if index == 0 else _write(folder, f"s{index}.json", text)
        yield Case(f"{text!r}", (path, {"expected": expected}))


@makes("check_json_keybindings")
def _keybindings(rng: random.Random, folder: Path) -> Iterator[Case]:
    binding = {
        "key": "ctrl+j",
        "command": "workbench.action.focusActiveEditorGroup",
        "when": "terminalFocus",
    }
    for index in range(20):
        entries = [{"key": "ctrl+k", "command": "x"}]
        if rng.random() < 0.6:
            entries.append(dict(binding, when=rng.choice(["terminalFocus", "editorFocus"])))
        text = json.dumps(entries)
        if rng.random() < 0.3:
            text = "// Place your key bindings in this file\n" + text
        if rng.random() < 0.1:
            text = json.dumps({"key": "ctrl+j"})
        yield Case(f"{text!r}", (_write(folder, f"k{index}.json", text), {"expected": binding}))


@makes("compare_text_file")
def _compare_text_file(rng: random.Random, folder: Path) -> Iterator[Case]:
    for index in range(24):
        gold = "\n".join(" ".join(words(rng, 4)) for _ in range(3)) + "\n"
        result = rng.choice(
            [
                gold,
                gold.replace(" ", "  "),
                gold.replace("\n", "\t"),
                gold.lower(),
                gold + "extra\n",
                gold.strip(),
            ]
        )
        options = rng.choice([{}, {}, {"ignore_blanks": True}, {"ignore_case": True}])
        actual = None if index == 0 else _write(folder, f"r{index}.txt", result)
        yield Case(f"{result!r}", (actual, _write(folder, f"g{index}.txt", gold)), options)


@makes("diff_text_file")
def _diff_text_file(rng: random.Random, folder: Path) -> Iterator[Case]:
    for index in range(20):
        gold = [" ".join(words(rng, 3)) for _ in range(rng.randint(1, 8))]
        result = [line for line in gold if rng.random() < 0.8] + words(rng, rng.randint(0, 2))
        actual = None if index == 0 else _write(folder, f"r{index}.txt", "\n".join(result))
        yield Case(f"{result!r}", (actual, _write(folder, f"g{index}.txt", "\n".join(gold))))


@makes("file_contains")
def _file_contains(rng: random.Random, folder: Path) -> Iterator[Case]:
    expected = ["Ping", "Download", "Upload"]
    for index in range(16):
        text = " ".join(w for w in expected + ["ms"] if rng.random() < 0.8)
        path = None if index == 0 else _write(folder, f"f{index}.txt", text)
        yield Case(f"{text!r}", (path, {"expected": expected}))


@makes("is_extension_installed")
def _extension_installed(rng: random.Random, folder: Path) -> Iterator[Case]:
    names = ["ms-python.python", "mattn.lisp", "njpwerner.autodocstring"]
    for _ in range(20):
        listing = "\n".join(n for n in names if rng.random() < 0.5)
        rules = {
            "type": rng.choice(["contain", "contain", "not_contain"]),
            "expected": rng.choice(names),
        }
        yield Case(f"{listing!r}", (listing, rules))


@makes("compare_config")
def _compare_config(rng: random.Random, folder: Path) -> Iterator[Case]:
    for index in range(24):
        if index % 2:
            text = rng.choice(["project", "projects", "other", "project\n", ""])
            rules = {"expected": "project"}
            options: dict[str, Any] = {}
        else:
            theme = rng.choice(["Visual Studio Dark", "Default Light"])
            data = {"workbench.colorTheme": theme}
            if rng.random() < 0.5:
                data["editor.fontSize"] = "12"
            text = json.dumps(data) if rng.random() < 0.8 else "{bad json"
            rules = {"expected": '{"workbench.colorTheme": "Visual Studio Dark"}\n'}
            options = rng.choice([{"containment_ok": True}, {"containment_ok": False}])
        path = None if index == 1 else _write(folder, f"c{index}.txt", text)
        yield Case(f"{text!r}", (path, rules), options)


@makes("check_config_status")
def _gimp_config(rng: random.Random, folder: Path) -> Iterator[Case]:
    published = [
        ("hide-docks", "yes"),
        ("layer-new-name", '"Square"'),
        ("undo-levels", "100"),
        ("theme", '"Light"'),
    ]
    for index in range(20):
        key, value = rng.choice(published)
        lines = ["# GIMP gimprc", "", "(show-tips no)"]
        if rng.random() < 0.7:
            lines.append(f"({key} {rng.choice([value, value, 'no', '50'])})")
        rule = {"type:": "key-value", "key": key, "value": value}
        path = None if index == 0 else _write(folder, f"gimprc{index}", "\n".join(lines) + "\n")
        yield Case(f"{lines[-1]!r}", (path, rule))
    blank = _write(folder, "gimprc-blank", '# gimprc\n   \n(theme "Light")\n')
    rule = {"type:": "key-value", "key": "theme", "value": '"Light"'}
    yield Case("a line of blanks", (blank, rule), difference="gimprc blank line")


@makes("is_expected_url_pattern_match")
def _url_pattern(rng: random.Random, folder: Path) -> Iterator[Case]:
    published = [
        ["^chrome://settings/appearance/?$"],
        ["united\\.com/en/us/checked-bag-fee-calculator(/.*)?"],
        ["^https://(www\\.)?drugs\\.com/tamiflu\\.html#side-effects"],
        ["https://scholar.google.com/citations", "user=qRAQ5BsAAAAJ"],
    ]
    urls = [
        "chrome://settings/appearance",
        "chrome://settings/appearance/x",
        "https://www.united.com/en/us/checked-bag-fee-calculator/any",
        "https://www.drugs.com/tamiflu.html#side-effects",
        "https://drugs.com/tamiflu.html",
        "https://scholar.google.com/citations?hl=en&user=qRAQ5BsAAAAJ",
        "https://scholar.google.com/citations?user=other",
    ]
    for index in range(28):
        url = rng.choice(urls)
        result: Any = {"url": url, "title": "t"} if rng.random() < 0.5 else url
        if index == 0:
            result = None
        yield Case(f"{result!r}", (result, {"expected": rng.choice(published)}))


@makes("is_expected_active_tab_approximate")
def _active_tab_approximate(rng: random.Random, folder: Path) -> Iterator[Case]:
    expected = "chrome://password-manager/passwords"
    for _ in range(16):
        url = rng.choice([expected, expected + "?q=1", expected + "/", "chrome://settings"])
        result: Any = {"url": url} if rng.random() < 0.5 else url
        yield Case(f"{result!r}", (result, {"type": "url", "url": expected}))


@makes("is_expected_installed_extensions")
def _installed_extensions(rng: random.Random, folder: Path) -> Iterator[Case]:
    expected = ["Zoom for Google Chrome", "React Developer Tools", "Momentum"]
    pool = [*expected, "Zoom Chrome Extension", "Google Translate"]
    for _ in range(16):
        installed = rng.sample(pool, rng.randint(0, len(pool)))
        yield Case(f"{installed}", (installed, {"expected": expected}))


@makes("is_expected_bookmarks")
def _bookmarks(rng: random.Random, folder: Path) -> Iterator[Case]:
    liked = [
        ["https://jimfan.me/", "https://www.linkedin.com/in/drjimfan/"],
        "https://research.nvidia.com/person/de-an-huang",
    ]
    for index in range(24):
        children: list[dict[str, Any]] = []
        if rng.random() < 0.6:
            children.append({"type": "folder", "name": "Favorites", "children": []})
        if rng.random() < 0.6:
            children.append(
                {
                    "type": "url",
                    "name": "t",
                    "url": "https://jalammar.github.io/illustrated-transformer/",
                }
            )
        if rng.random() < 0.6:
            urls = [rng.choice(liked[0]), liked[1]][: rng.randint(1, 2)]
            children.append(
                {
                    "type": "folder",
                    "name": "Liked Authors",
                    "children": [{"type": "url", "url": u} for u in urls],
                }
            )
        bookmarks: Any = {"bookmark_bar": {"children": children}} if index else None
        rule = rng.choice(
            [
                {"type": "bookmark_bar_folders_names", "names": ["Favorites"]},
                {
                    "type": "bookmark_bar_websites_urls",
                    "urls": ["https://jalammar.github.io/illustrated-transformer/"],
                },
                {
                    "type": "liked_authors_websites_urls",
                    "names": ["Liked Authors"],
                    "urls": json.loads(json.dumps(liked)),
                },
            ]
        )
        yield Case(f"{children}", (bookmarks, rule))


@makes("is_expected_search_query")
def _search_query(rng: random.Random, folder: Path) -> Iterator[Case]:
    pattern = "(?i)https?://(?:www\\.)?google\\.com/(?:search\\?q=nereida(?:&|$|#)).*"
    for _ in range(12):
        url = rng.choice(
            [
                "https://www.google.com/search?q=nereida",
                "https://google.com/search?q=Nereida&x",
                "https://www.google.com/search?q=nereidas",
                "https://bing.com/?q=nereida",
            ]
        )
        yield Case(url, ({"url": url, "title": "t"}, {"expect": {"pattern": pattern}}))


@makes("is_shortcut_on_desktop")
def _shortcut(rng: random.Random, folder: Path) -> Iterator[Case]:
    for _ in range(16):
        name = rng.choice(["Play Puzzle Game 2048", "2048", "Puzzle", "Other"])
        shortcuts = {
            f"/home/user/Desktop/{name}.desktop": f"[Desktop Entry]\nName={name}\nExec=x\n"
        }
        if rng.random() < 0.2:
            shortcuts = {}
        yield Case(f"{shortcuts}", (shortcuts, {"type": "name", "name": "Play Puzzle Game 2048"}))


@makes("check_history_deleted")
def _history(rng: random.Random, folder: Path) -> Iterator[Case]:
    for _ in range(12):
        history = [
            [rng.choice(["https://youtube.com/x", "https://example.org"]), "t", 1]
            for _ in range(rng.randint(0, 3))
        ]
        yield Case(f"{history}", (history, {"type": "keywords", "keywords": ["youtube"]}))


@makes("check_font_size")
def _font_size(rng: random.Random, folder: Path) -> Iterator[Case]:
    for _ in range(12):
        size = rng.choice([12, 16, 17, 24])
        rule = rng.choice(
            [{"type": "range", "min": 16, "max": 99999}, {"type": "value", "value": 16}]
        )
        yield Case(f"{size}", ({"default_font_size": size}, rule))
    yield Case("no default_font_size", ({}, {"type": "value", "value": 16}),
               difference="font size not written")  # fmt: skip


@makes("is_added_to_steam_cart")
def _steam_cart(rng: random.Random, folder: Path) -> Iterator[Case]:
    item = "The Dota 2 Official Soundtrack"
    for _ in range(8):
        content = rng.choice([f"Cart: {item}", "Cart: empty", item.lower()])
        yield Case(content, ({"content": content}, {"items": [item]}))


@makes("check_gnome_favorite_apps")
def _favorite_apps(rng: random.Random, folder: Path) -> Iterator[Case]:
    expected = ["google-chrome.desktop", "thunderbird.desktop"]
    pool = [*expected, "vim.desktop"]
    for _ in range(12):
        apps = rng.sample(pool, rng.randint(1, 3))
        yield Case(f"{apps}", (str(apps), {"expected": expected}))


@makes("is_utc_0")
def _utc(rng: random.Random, folder: Path) -> Iterator[Case]:
    for _ in range(8):
        zone = rng.choice(
            ["Atlantic/Faroe (WET, +0000)", "Etc/UTC (UTC, +0000)", "Europe/Berlin (CET, +0100)"]
        )
        text = (
            "               Local time: Thu 2024-01-25 12:56:06 WET\n"
            "           Universal time: Thu 2024-01-25 12:56:06 UTC\n"
            "                 RTC time: Thu 2024-01-25 12:56:05\n"
            f"                Time zone: {zone}\nSystem clock synchronized: yes\n"
        )
        yield Case(zone, (text,))


@makes("check_moved_jpgs")
def _moved_jpgs(rng: random.Random, folder: Path) -> Iterator[Case]:
    expected = ["emnlp2023.jpg", "hk_group_photo.jpg", "hong-kong-china.jpg"]
    for _ in range(12):
        names = rng.sample([*expected, "other.jpg"], rng.randint(1, 4))
        listing = {"name": "album", "children": [{"name": n} for n in names]}
        yield Case(f"{names}", (listing, {"expected": expected}))


@makes("is_in_vm_clickboard")
def _clipboard(rng: random.Random, folder: Path) -> Iterator[Case]:
    for _ in range(12):
        expected: Any = rng.choice(["31", ["Scottsdale", "Atlanta"]])
        output = rng.choice(["31\n", "Scottsdale Atlanta", "Atlanta", "13"])
        yield Case(f"{output!r} vs {expected!r}", ({"expected": expected}, output))
