"""OSWorld's Chrome getters and metrics: the readers over real profile files (Preferences and
Bookmarks JSON as Chromium writes them, a Cookies database), the page selections over real HTML,
the relative-time rules, and the metrics' verdicts; and one real Chromium page read over
DevTools on a sandboxed desktop."""

import json
import sqlite3
from datetime import date
from pathlib import Path

import pytest

from vm_pool.evaluation.bounds import LimitHit
from vm_pool.evaluation.getters import GETTERS, Reading
from vm_pool.evaluation.metrics import METRICS, MetricError
from vm_pool.evaluation.readers import READERS
from vm_pool.evaluation.readers.relative_time import fill, relative_rules
from vm_pool.evaluation.readers.urls import macys_facets, url_dash_part, url_query
from vm_pool.evaluation.scoring import score
from vm_pool.setup.runner import run_setup

# What Chromium 156 wrote to a profile's Preferences after these settings were changed (trimmed
# to the keys around them).
PREFERENCES = {
    "browser": {"theme": {"color_scheme2": 2}, "window_placement": {"maximized": False}},
    "enable_do_not_track": True,
    "extensions": {
        "settings": {
            "jkecehnnobfeodoiginofoikcicnkpaa": {
                "location": 4,
                "path": "/home/user/Desktop/helloExtension",
                "creation_flags": 38,
            },
            "mhjfbmdgcfjbbpaeojofohoefgiehjai": {
                "location": 5,
                "manifest": {"name": "Chromium PDF Viewer", "version": "1"},
                "path": "/usr/lib/chromium/resources/pdf",
            },
        },
        "theme": {"system_theme": 1},
    },
    "profile": {
        "name": "Thomas",
        "avatar_index": 26,
        "default_content_setting_values": {"cookies": 4},
    },
    "safebrowsing": {"enabled": True, "enhanced": False},
    "session": {"restore_on_startup": 5},
    "webkit": {"webprefs": {"default_font_size": 20, "minimum_font_size": 6}},
}


def _preference(tmp_path: Path, setting: str, data: dict | None = PREFERENCES) -> object:
    path = None
    if data is not None:
        path = tmp_path / "Preferences"
        path.write_text(json.dumps(data))
    return READERS["chrome_preference"](str(path) if path else None, None, {"setting": setting})


def test_each_preference_getter_reads_its_setting_as_osworld_does(tmp_path):
    assert _preference(tmp_path, "profile_name") == "Thomas"
    assert _preference(tmp_path, "chrome_font_size") == {
        "default_font_size": 20,
        "minimum_font_size": 6,
    }
    assert _preference(tmp_path, "enable_do_not_track") == "true"
    assert _preference(tmp_path, "enable_safe_browsing") == "true"
    assert _preference(tmp_path, "new_startup_page") == "true"
    assert _preference(tmp_path, "data_delete_automacally") == "true"
    assert _preference(tmp_path, "chrome_color_scheme") == "dark"
    assert _preference(tmp_path, "find_unpacked_extension_path") == [
        "/home/user/Desktop/helloExtension",
        "/usr/lib/chromium/resources/pdf",
    ]
    # The unpacked extension has no manifest in Preferences: it is left out, not fatal.
    assert _preference(tmp_path, "find_installed_extension_name") == ["Chromium PDF Viewer"]


def test_a_fresh_profile_reads_as_chromium_defaults(tmp_path):
    fresh = {"profile": {"name": "Person 1"}, "browser": {}}
    assert _preference(tmp_path, "enable_do_not_track", fresh) == "false"
    assert _preference(tmp_path, "enable_safe_browsing", fresh) == "false"
    assert _preference(tmp_path, "new_startup_page", fresh) == "true"  # no session: fresh start
    assert _preference(tmp_path, "data_delete_automacally", fresh) == "false"
    assert _preference(tmp_path, "chrome_color_scheme", fresh) == "system"
    assert _preference(tmp_path, "chrome_font_size", fresh)["default_font_size"] == 16
    restoring = {**fresh, "session": {"restore_on_startup": 1}}
    assert _preference(tmp_path, "new_startup_page", restoring) == "false"


def test_without_a_preferences_file_each_getter_gives_osworlds_fallback(tmp_path):
    assert _preference(tmp_path, "profile_name", None) is None
    assert _preference(tmp_path, "enable_do_not_track", None) == "false"
    assert _preference(tmp_path, "new_startup_page", None) == "Google"
    assert _preference(tmp_path, "chrome_font_size", None) == {
        "default_fixed_font_size": 13,
        "default_font_size": 16,
    }


def test_a_preferences_file_that_is_not_json_is_not_scored(tmp_path):
    path = tmp_path / "Preferences"
    path.write_text("{not json")
    with pytest.raises(LimitHit):
        READERS["chrome_preference"](str(path), None, {"setting": "profile_name"})


def test_check_font_size_by_value_and_by_open_range():
    check = METRICS["check_font_size"]
    assert check({"default_font_size": 20}, {"type": "range", "min": 16, "max": 99999}) == 1.0
    assert check({"default_font_size": 16}, {"type": "range", "min": 16, "max": 99999}) == 0.0
    assert check({"minimum_font_size": 6}, {"type": "value", "value": 16}) == 1.0
    with pytest.raises(MetricError):
        check({"default_font_size": 16}, {"type": "bigger"})


def _cookies(path: Path, hosts: list[str]) -> None:
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE cookies(creation_utc INTEGER NOT NULL,host_key TEXT NOT NULL,"
            "top_frame_site_key TEXT NOT NULL,name TEXT NOT NULL,value TEXT NOT NULL,"
            "encrypted_value BLOB NOT NULL,path TEXT NOT NULL,expires_utc INTEGER NOT NULL)"
        )
        for i, host in enumerate(hosts):
            db.execute(
                "INSERT INTO cookies VALUES (?, ?, '', ?, '', X'763130', '/', 0)",
                (i, host, f"c{i}"),
            )
    db.close()


def test_is_cookie_deleted_looks_for_the_domains_among_the_cookies_hosts(tmp_path):
    rule = {"type": "domains", "domains": [".amazon.com"]}
    kept = tmp_path / "Cookies"
    _cookies(kept, [".google.com", "www.amazon.com", ".github.com"])
    rows = READERS["chrome_cookies"](str(kept), None, {})
    assert [row[1] for row in rows] == [".google.com", "www.amazon.com", ".github.com"]
    assert METRICS["is_cookie_deleted"](rows, rule) == 0.0
    cleared = tmp_path / "Cleared"
    _cookies(cleared, [".google.com", "smile.amazon.com"])
    rows = READERS["chrome_cookies"](str(cleared), None, {})
    assert METRICS["is_cookie_deleted"](rows, rule) == 1.0
    with pytest.raises(MetricError):
        METRICS["is_cookie_deleted"](rows, {"type": "names", "names": ["c0"]})


def test_check_history_deleted_by_keyword_in_the_visited_urls():
    visits = [("https://www.youtube.com/watch?v=1", "YouTube", 1), ("https://example.org/", "", 2)]
    rule = {"type": "keywords", "keywords": ["youtube"]}
    assert METRICS["check_history_deleted"](visits, rule) == 0.0
    assert METRICS["check_history_deleted"](visits[1:], rule) == 1.0


# Bookmarks as Chromium writes them (checksum and ids kept, dates trimmed).
BOOKMARKS = {
    "checksum": "0d6f6b1a",
    "roots": {
        "bookmark_bar": {
            "children": [
                {"id": "5", "name": "Favorites", "type": "folder", "children": []},
                {
                    "id": "6",
                    "name": "Liked Authors",
                    "type": "folder",
                    "children": [
                        {"id": "7", "name": "Jim Fan", "type": "url", "url": "https://jimfan.me/"},
                        {"id": "8", "name": "Yuke", "type": "url", "url": "https://yukezhu.me/"},
                    ],
                },
                {
                    "id": "9",
                    "name": "The Illustrated Transformer",
                    "type": "url",
                    "url": "https://jalammar.github.io/illustrated-transformer/",
                },
            ],
            "id": "1",
            "name": "Bookmarks bar",
            "type": "folder",
        },
        "other": {"children": [], "id": "2", "name": "Other bookmarks", "type": "folder"},
    },
    "version": 1,
}


def test_is_expected_bookmarks_reads_the_bookmark_bar(tmp_path):
    path = tmp_path / "Bookmarks"
    path.write_text(json.dumps(BOOKMARKS))
    roots = READERS["chrome_bookmarks"](str(path), None, {})
    check = METRICS["is_expected_bookmarks"]
    folders = {"type": "bookmark_bar_folders_names", "names": ["Favorites", "Liked Authors"]}
    assert check(roots, folders) == 1.0
    assert check(roots, {**folders, "names": ["Favorites"]}) == 0.0
    sites = ["https://jalammar.github.io/illustrated-transformer/"]
    assert check(roots, {"type": "bookmark_bar_websites_urls", "urls": sites}) == 1.0
    authors = [
        ["https://jimfan.me/", "https://www.linkedin.com/in/drjimfan/"],
        "https://yukezhu.me/",
    ]
    assert check(roots, {"type": "liked_authors_websites_urls", "urls": authors}) == 1.0
    one_missing = [*authors, ["https://ai.stanford.edu/~dahuang/"]]
    assert check(roots, {"type": "liked_authors_websites_urls", "urls": one_missing}) == 0.0
    assert check([], folders) == 0.0
    with pytest.raises(MetricError):
        check(roots, {"type": "other_folder"})


def test_is_expected_installed_extensions_takes_either_zoom_name():
    installed = ["Zoom Chrome Extension", "Momentum", "Google Translate"]
    check = METRICS["is_expected_installed_extensions"]
    assert check(installed, {"expected": ["Zoom for Google Chrome", "Momentum"]}) == 1.0
    assert check(installed, {"expected": ["React Developer Tools"]}) == 0.0
    assert check("Google", {"expected": ["Momentum"]}) == 0.0


def test_is_shortcut_on_desktop_by_name_or_exec():
    shortcut = (
        "#!/usr/bin/env xdg-open\n[Desktop Entry]\nVersion=1.0\nTerminal=false\nType=Application\n"
        "Name=Play Puzzle Game 2048\nExec=/usr/bin/chromium --profile-directory=Default "
        "--app-id=abcdef\nIcon=chrome-abcdef-Default\n"
    )
    shortcuts = {"chrome-abcdef-Default.desktop": shortcut}
    check = METRICS["is_shortcut_on_desktop"]
    assert check(shortcuts, {"type": "name", "name": "Play Puzzle Game 2048"}) == 1.0
    assert check(shortcuts, {"type": "name", "name": "play puzzle game"}) == 1.0
    assert check(shortcuts, {"type": "name", "name": "Tetris"}) == 0.0
    assert check(shortcuts, {"type": "exec", "exec": "--app-id=abcdef"}) == 1.0
    assert check({}, {"type": "name", "name": "Play Puzzle Game 2048"}) == 0.0
    with pytest.raises(MetricError):
        check(shortcuts, {"type": "url", "url": "https://play2048.co/"})


def test_steam_cart_and_search_query_read_the_tab():
    cart = {"title": "Cart", "url": "https://store.steampowered.com/cart/", "content": "<div>"
            "The Dota 2 Official Soundtrack</div>"}  # fmt: skip
    assert METRICS["is_added_to_steam_cart"](cart, {"items": ["The Dota 2 Official Soundtrack"]})
    assert METRICS["is_added_to_steam_cart"](cart, {"items": ["Portal 2"]}) == 0.0
    pattern = r"(?i)https?://(?:www\.)?google\.com/search\?q=nereida(?:&|$|#)"
    tab = {"url": "https://www.google.com/search?q=nereida&sca_esv=1", "title": "", "content": ""}
    assert METRICS["is_expected_search_query"](tab, {"expect": {"pattern": pattern}}) == 1.0
    other = {**tab, "url": "https://www.google.com/search?q=nereid"}
    assert METRICS["is_expected_search_query"](other, {"expect": {"pattern": pattern}}) == 0.0


def test_macys_url_path_parse():
    url = (
        "https://www.macys.com/shop/mens-clothing/mens-casual-shirts/Men_regular_size_t,"
        "Price_discount_range,Sleeve_length/L,50_PERCENT_%20off%20%26%20more,Short%20Sleeve"
        "?id=20627"
    )
    keys = ["mens_clothing", "shirts", "Men_regular_size_t", "Price_discount_range", "short_sleeve"]
    assert macys_facets(url, keys) == {
        "mens_clothing": True,
        "shirts": True,
        "short_sleeve": True,
        "Men_regular_size_t": "L",
        "Price_discount_range": "50_PERCENT_ off & more",
    }


# Relative times: Wednesday 15 May 2024 (a Wednesday), and other days where the rule turns.
WEDNESDAY = date(2024, 5, 15)


def test_fill_replaces_each_placeholder_once():
    day = date(2024, 3, 5)
    assert fill("{DoW}, {Month} {Day0D}, {Year}", day) == "Tue, Mar 05, 2024"
    assert fill("{Year}-{Month0D}-{DayD}", day) == "2024-03-5"
    assert fill("{month}-weather {MonthFull} {MonthD}", day) == "march-weather March 3"
    assert fill("{DayD} {DayD}", day) == "5 {DayD}"


def test_relative_time_single_dates():
    def time_for(name: str, expected: object, today: date = WEDNESDAY) -> object:
        rules = {"relativeTime": {"from": name}, "expected": {"time": expected}}
        return relative_rules(rules, today)["expected"]["time"]

    assert time_for("tomorrow", "{DoW}, {Month} {Day0D}, {Year}") == "Thu, May 16, 2024"
    assert time_for("next Monday", ["{Year}-{Month0D}-{Day0D}"]) == ["2024-05-20"]
    assert time_for("10th next month", "{Year}-{Month0D}-{DayD}") == "2024-06-10"
    assert time_for("5th next month", "{Year}-{Month0D}-{DayD}", date(2024, 12, 31)) == "2025-01-5"
    assert time_for("this month", "{month}-weather") == "may-weather"
    eight = "first monday eight months later"
    assert time_for(eight, "{MonthFull} {Day0D}, 10:15 AM") == "January 06, 10:15 AM"
    # April + 8 is December, a month OSWorld's arithmetic turns into 0 (and crashes on).
    assert time_for(eight, "{Year}-{Month0D}-{Day0D}", date(2024, 4, 2)) == "2024-12-02"


def test_relative_time_ranges_and_split_fields():
    weekend = {
        "relativeTime": {"from": "next week Saturday", "to": "next week Sunday"},
        "timezone": "America/New_York",
        "expected": {"from": "{DoW}, {Month} {Day0D}", "to": "{DoW}, {Month} {Day0D}", "n": 2},
    }
    filled = relative_rules(weekend, WEDNESDAY)
    assert filled["expected"] == {"from": "Sat, May 25", "to": "Sun, May 26", "n": 2}
    assert weekend["expected"]["from"] == "{DoW}, {Month} {Day0D}"  # the task's rule is kept
    split = {
        "relativeTime": {"from": "next Monday split", "to": "next Friday split"},
        "expected": {"puDay": "{DayD}", "puMonth": "{MonthD}", "puYear": "{Year}",
                     "doDay": "{DayD}", "doMonth": "{MonthD}", "doYear": "{Year}"},
    }  # fmt: skip
    assert relative_rules(split, date(2024, 12, 28))["expected"] == {
        "puDay": "30", "puMonth": "12", "puYear": "2024",
        "doDay": "3", "doMonth": "1", "doYear": "2025",
    }  # fmt: skip
    friday = {"relativeTime": {"from": "next Friday", "to": "next Sunday"},
              "expected": {"from": "{DayD}", "to": "{DayD}"}}  # fmt: skip
    assert relative_rules(friday, date(2024, 5, 17))["expected"] == {"from": "24", "to": "26"}


def test_an_unknown_relative_time_is_a_malformed_rule():
    with pytest.raises(MetricError):
        relative_rules({"relativeTime": {"from": "yesterday"}, "expected": {"time": ""}}, WEDNESDAY)
    with pytest.raises(MetricError):  # known, but only as the start of a range
        relative_rules({"relativeTime": {"from": "next week Friday"}, "expected": {"time": ""}},
                       WEDNESDAY)  # fmt: skip


def test_the_relative_time_reader_takes_the_clocks_date_in_its_own_zone():
    rules = {"relativeTime": {"from": "tomorrow"}, "expected": {"time": "{Year}-{Month0D}-{Day0D}"}}
    read = READERS["relative_time_rules"]
    assert read(None, "2024-05-15T23:30:00-04:00\n", {"rules": rules})["expected"] == {
        "time": "2024-05-16"
    }
    with pytest.raises(LimitHit):
        read(None, "not a time", {"rules": rules})


# A flight page shaped like the tasks' (class names from OSWorld's task files).
PAGE = """<!DOCTYPE html><html><head><title>Flights</title>
<style>.x { color: red }</style></head><body>
<div class="mach-flight-context-info__wrapper--date">Tue, Mar 05, 2024</div>
<div class="mach-flight-context-info__wrapper__info--separator">SEA<div class="aura-separator">
</div>NYC</div>
<ul class="mach-global-tabs-small__wrapper">
  <li class="mach-global-tabs-small__wrapper__tab">Money</li>
  <li class="mach-global-tabs-small__wrapper__tab mach-global-tabs-small__wrapper__tab--active">
    Miles</li></ul>
<div class="HAZ16"><h3> Apply for TAP </h3><span>x</span></div>
<div class="HAZ16"><p>no heading</p></div>
<div class="HAZ16"><div><h3>March 04, 10:15 AM</h3></div></div>
<span class="fT28tf">Black</span><span class="fT28tf">$25 - $60</span>
<span class="fT28tf">On sale</span>
<div class="day-time-info">Tue, Mar 05, 12:00 PM</div><div class="day-time-info">Wed</div>
<div><div><form><input name="n" value="James Smith"><input name="m" value="">
  <textarea>  a note </textarea><select><option value="a">A</option>
  <option value="b" selected>B</option></select></form></div></div>
<ol class="pmpSearch_breadcrumb"><li class="catAllProducts"><span> Spider-Man </span></li>
<li class="catAllProducts"><a><span>Toys</span></a></li><li><span>Kids</span></li></ol>
<p>Sort by: <b>Price (low to high)</b></p>
<script>var hidden = "not text";</script>
</body></html>"""


def _parse(tmp_path: Path, selection: dict, url: str = "https://www.example.com/") -> object:
    path = tmp_path / "active_tab.html"
    path.write_text(PAGE)
    return READERS["active_tab_html"](str(path), None, {"selection": selection, "url": url})


def test_class_selections_as_playwright_makes_them(tmp_path):
    found = _parse(
        tmp_path,
        {
            "category": "class",
            "class_singleObject": {
                "mach-flight-context-info__wrapper--date": "time",
                "mach-global-tabs-small__wrapper__tab--active": "category",
                "absent-class": "absent",
            },
            "class_multiObject_child": {
                "mach-flight-context-info__wrapper__info--separator": {"0": "start", "1": "end"}
            },
            "class_multiObject_only_child": {"HAZ16": {"0": "content", "1": "when"}},
            "class_multiObject": {"day-time-info": {"0": "from", "1": "to", "5": "none"}},
        },
    )
    assert found == {
        "time": "Tue, Mar 05, 2024",
        "category": "Miles",
        "absent": "",
        "start": "SEA",
        "end": "NYC",
        "content": "Apply for TAP",
        "when": "March 04, 10:15 AM",
        "from": "Tue, Mar 05, 12:00 PM",
        "to": "Wed",
        "none": "",
    }


def test_class_search_exist_flags_each_text_and_the_others(tmp_path):
    wanted = ["Black", "$25 - $60", "On sale", "is_other_exist"]
    found = _parse(tmp_path, {"category": "class", "class_multiObject_search_exist": {
        "fT28tf": wanted}})  # fmt: skip
    assert found == {"Black": True, "$25 - $60": True, "On sale": True, "is_other_exist": False}
    fewer = ["Black", "is_other_exist"]
    found = _parse(tmp_path, {"category": "class", "class_multiObject_search_exist": {
        "fT28tf": fewer}})  # fmt: skip
    assert found == {"Black": True, "is_other_exist": True}


def test_xpath_input_and_label_selections(tmp_path):
    found = _parse(tmp_path, {"category": "xpath", "xpathObject": {
        "//li[contains(@class, '--active')]": "tab", "//p/b": "rank", "//table": "none",
        "//[broken": "broken"}})  # fmt: skip
    assert found == {"tab": "Miles", "rank": "Price (low to high)", "none": "", "broken": ""}
    base = "/html/body/div[8]/div/form/"
    found = _parse(tmp_path, {"category": "input", "inputObject": {
        base + "input[1]": "name", base + "input[2]": "mail", base + "textarea": "note",
        base + "select": "choice", "//p": "not_a_field"}})  # fmt: skip
    assert found == {"name": "James Smith", "mail": "", "note": "a note", "choice": "b",
                     "not_a_field": ""}  # fmt: skip
    found = _parse(tmp_path, {"category": "label", "labelObject": {"price (LOW": "sort"}})
    assert found == {"sort": "Price (low to high)"}


def test_class_and_url_selections(tmp_path):
    selection = {
        "category": "class&url",
        "class_multiObject_li": {"pmpSearch_breadcrumb": ["Spider-Man", "Toys", "Kids"]},
        "url_include_expected_multichoice": {"Spider-Man": "Spider-Man", "Kids": "Kids",
                                             "S=4": "Price Low-High"},
    }  # fmt: skip
    found = _parse(tmp_path, selection, "https://www.macys.com/shop/kids?s=4")
    # "Kids" is not in a catAllProducts item: it comes from the URL.
    assert found == {"spider-man": True, "toys": True, "is_other_exist": False, "kids": True,
                     "price low-high": True}  # fmt: skip


def test_a_page_too_long_to_bring_back_is_not_scored():
    with pytest.raises(LimitHit):
        READERS["active_tab_html"](None, None, {"page_chars": 9_000_000, "url": ""})


def test_the_selected_page_is_scored_in_the_jail_side(tmp_path):
    (tmp_path / "active_tab.html").write_text(PAGE)
    selection = {"category": "class", "class_singleObject": {"HAZ16": "first"}}
    gathered = {"kind": "read", "reader": "active_tab_html", "file": "active_tab.html",
                "text": None, "config": {"selection": selection, "url": ""}}  # fmt: skip
    rule = {"kind": "value", "value": {"expected": {"first": "Apply for TAP x"}}}
    request = {"conjunction": "single", "metrics": [
        {"func": "check_direct_json_object", "options": {}, "result": gathered,
         "expected": rule}]}  # fmt: skip
    assert score(request, tmp_path)["value"] == 1.0


@pytest.mark.django_db(transaction=True)
def test_active_tab_html_parse_on_a_real_chromium_page(sandboxed_control, tmp_path):
    page = (
        "<title>Booking</title><div class='HAZ16'><h3>Apply for TAP</h3></div>"
        "<form><input id='name' value='default'></form><div id='late'></div>"
        "<script>document.getElementById('late').className = 'added';"
        "document.getElementById('late').textContent = 'made by script';"
        "document.getElementById('name').value = 'James Smith';</script>"
    )
    run_setup(
        sandboxed_control,
        [
            {"type": "file", "parameters": {"path": "~/booking.html", "content": page}},
            {"type": "chrome_open_tabs",
             "parameters": {"urls_to_open": ["file:///home/user/booking.html"]}},
        ],
    )  # fmt: skip
    reading = Reading(sandboxed_control, tmp_path, fetch_url=lambda url: b"")
    config = {
        "type": "active_tab_html_parse",
        "goto_prefix": "",
        "category": "class",
        "class_singleObject": {"added": "late"},
        "class_multiObject_only_child": {"HAZ16": {"0": "content"}},
    }
    gathered = GETTERS["active_tab_html_parse"](reading, config)
    assert gathered["kind"] == "read"  # the page's markup, parsed only in the jail's reader
    found = READERS["active_tab_html"](str(tmp_path / gathered["file"]), None, gathered["config"])
    assert found == {"late": "made by script", "content": "Apply for TAP"}
    typed = {**config, "category": "input", "inputObject": {"//input[@id='name']": "name"}}
    gathered = GETTERS["active_tab_html_parse"](reading, typed)
    found = READERS["active_tab_html"](str(tmp_path / gathered["file"]), None, gathered["config"])
    assert found == {"name": "James Smith"}  # the field's live value, not its markup's


def test_the_active_urls_parts_are_read_in_the_jail_as_osworld_reads_them():
    url = "https://www.example.com/product/12345?ref=home&tags=a,b"
    dash = {"partIndex": -1, "needDeleteId": True, "returnType": "json", "key": "id"}
    assert url_dash_part(None, url, dash) == {"id": "12345"}
    assert url_dash_part(None, url, {**dash, "returnType": "string", "needDeleteId": False}) == (
        "12345?ref=home&tags=a,b"
    )
    assert url_dash_part(None, url, {**dash, "partIndex": -9}) is None  # OSWorld: IndexError
    query = {"parse_keys": ["ref", "tags"], "replace": {"ref": "from"}, "split_list": True}
    assert url_query(None, url, query) == {"tags": ["a", "b"], "from": ["home"]}
    assert url_query(None, None, query) is None
    with pytest.raises(MetricError, match="parse_keys"):
        url_query(None, url, {})
