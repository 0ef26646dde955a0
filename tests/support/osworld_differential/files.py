"""Case makers for the metrics that read an application's file: pictures' sizes, PDF page
counts, archives, MP3 tags, VLC's settings and status, Thunderbird's preferences, filters and
folders, CSV and SQLite files, and the accessibility tree's XML."""

import random
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mutagen.easyid3 import EasyID3
from PIL import Image
from pypdf import PdfWriter

from tests.support.osworld_differential.core import Case, makes, words


def _write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


@makes("check_image_size")
def _image_size(rng: random.Random, folder: Path) -> Iterator[Case]:
    published = [{"height": 512, "ignore_transparent": True}, {"height": 128, "width": 128}]
    for index in range(20):
        width, height = rng.choice([128, 200, 512]), rng.choice([128, 512, 600])
        mode = rng.choice(["RGB", "RGBA"])
        image = Image.new(mode, (width, height), (200, 10, 10, 0) if mode == "RGBA" else "red")
        if mode == "RGBA":
            box = (0, 0, width, rng.choice([height, 512, 100]))
            image.paste((0, 0, 255, 255), box)
        path = folder / f"p{index}.png"
        image.save(path)
        result = None if index == 0 else str(path)
        yield Case(f"{mode} {width}x{height}", (result, rng.choice(published)))


@makes("check_image_file_size")
def _image_file_size(rng: random.Random, folder: Path) -> Iterator[Case]:
    for index in range(12):
        path = folder / f"f{index}.bin"
        path.write_bytes(bytes(rng.choice([1000, 599_999, 600_000, 700_000])))
        result = None if index == 0 else str(path)
        yield Case(f"{path.stat().st_size} bytes", (result, {"max_size": 600000}))


@makes("check_pdf_pages")
def _pdf_pages(rng: random.Random, folder: Path) -> Iterator[Case]:
    for index in range(12):
        writer = PdfWriter()
        pages = rng.randint(1, 3)
        for _ in range(pages):
            writer.add_blank_page(width=200, height=200)
        path = folder / f"d{index}.pdf"
        with open(path, "wb") as f:
            writer.write(f)
        relation = rng.choice(["eq", "eq", "ge", "lt"])
        result = None if index == 0 else str(path)
        yield Case(f"{pages} pages", (result, {"relation": relation, "ref_value": 1}))


@makes("compare_archive")
def _archive(rng: random.Random, folder: Path) -> Iterator[Case]:
    """Published tasks compare PDFs inside; OSWorld reads those with PyMuPDF, which is not
    here, so PDF archives are compared only where the names differ (scored before any PDF is
    read), and archives of text files stand in for the per-file comparison."""
    for index in range(16):
        names = sorted({f"{w}.txt" for w in words(rng, 3)})
        file_type = "pdf" if index % 2 else "text"
        result_names = list(names)
        if file_type == "pdf":
            result_names[0] = "renamed.txt"
        elif rng.random() < 0.3:
            result_names = result_names[:-1]
        archives = []
        for side, listed in (("gold", names), ("result", result_names)):
            content = folder / f"{side}{index}" / "lecture_slides"
            content.mkdir(parents=True)
            for name in listed:
                text = name if side == "gold" or rng.random() < 0.7 else "changed"
                (content / name).write_text(text)
            archives.append(shutil.make_archive(str(folder / f"{side}{index}"), "zip",
                                                folder / f"{side}{index}"))  # fmt: skip
        options = {"file_path": "lecture_slides", "file_type": file_type}
        yield Case(f"{file_type}: {result_names} vs {names}", (archives[1], archives[0]), options)


# One MPEG-1 Layer III frame (128 kbit/s, 44.1 kHz): its header, then silence.
_MP3_FRAME = bytes.fromhex("fffb9064") + bytes(413)


@makes("check_mp3_meta")
def _mp3_meta(rng: random.Random, folder: Path) -> Iterator[Case]:
    rule = {"title": {"method": "eq", "ref": "Missing You"},
            "artist": {"method": "eq", "ref": "Cheng Xiang"}}  # fmt: skip
    for index in range(12):
        path = folder / f"s{index}.mp3"
        path.write_bytes(_MP3_FRAME * 4)
        tags = {"title": rng.choice(["Missing You", "missing you", None]),
                "artist": rng.choice(["Cheng Xiang", "Han Baoyi", None])}  # fmt: skip
        if any(tags.values()):
            id3 = EasyID3()
            for key, text in tags.items():
                if text:
                    id3[key] = text
            id3.save(path)
        yield Case(f"{tags}", (str(path), rule))


_VLC_SETTINGS = {
    "check_qt_bgcone": ("qt-bgcone", ["0", "1"], "expected_qt_bgcone", 0),
    "check_qt_max_volume": ("qt-max-volume", ["125", "200", "150"], "expected_qt_max_volume", 200),
    "check_qt_minimal_view": ("qt-minimal-view", ["0", "1"], "expected_qt_minimal_view", 1),
    "check_play_and_exit": ("play-and-exit", ["0", "1"], "expected_play_and_exit", 0),
    "check_one_instance_when_started_from_file": (
        "one-instance-when-started-from-file", ["0", "1"],
        "expected_one_instance_when_started_from_file", 0),
    "check_global_key_play_pause": ("global-key-play-pause", ["", "Space", "1"],
                                    "expected_global_key_play_pause", 1),
    "is_vlc_recordings_folder": ("input-record-path", ["/home/user/Desktop", "/tmp", ""],
                                 "recording_file_path", "/home/user/Desktop"),
    "check_qt_slider_colours": ("qt-slider-colours", [
        "153;210;153;20;210;20;255;199;15;245;39;29", "0;0;0;20;20;20;50;60;70;99;10;0",
        "0;0;0;20;20;20;50;60;70;100;10;0"], "type", "blackish"),
}  # fmt: skip


def _vlc_setting(rng: random.Random, folder: Path, metric: str) -> Iterator[Case]:
    key, values, rule_key, rule_value = _VLC_SETTINGS[metric]
    for index in range(12):
        lines = ["###", "### vlc 3.0.18", "###", "", "[qt] # Qt interface", ""]
        state = rng.choice(["default", "set", "set"])
        value = rng.choice(values)
        lines.append(f"#{key}={values[0]}" if state == "default" else f"{key}={value}")
        lines += ["", "[core] # core program", "#key-play-pause=Space", ""]
        path = _write(folder / f"vlcrc{index}", "\n".join(lines))
        yield Case(f"{lines[6]!r}", (path, {rule_key: rule_value}))


for _metric in _VLC_SETTINGS:

    def _maker(rng: random.Random, folder: Path, metric: str = _metric) -> Iterator[Case]:
        return _vlc_setting(rng, folder, metric)

    makes(_metric)(_maker)


_STATUS_XML = """<?xml version="1.0" encoding="utf-8" standalone="yes" ?>
<root><fullscreen>false</fullscreen><state>{state}</state>
<information><category name="meta">{meta}</category>
<category name='Stream 0'><info name='Codec'>H264</info></category></information></root>
"""
_RICK = "Rick Astley - Never Gonna Give You Up (Official Music Video).mp4"
_STREAM = "https://devstreaming-cdn.apple.com/videos/streaming/examples/bipbop/master.m3u8"


@makes("is_vlc_playing")
def _vlc_playing(rng: random.Random, folder: Path) -> Iterator[Case]:
    for index in range(16):
        state = rng.choice(["playing", "playing", "paused", "stopped"])
        name = rng.choice(["filename", "title", "url"])
        value = rng.choice([_RICK, "/home/user/" + _RICK, "other.mp4", _STREAM, "master.m3u8"])
        meta = f"<info name='{name}'>{value}</info>"
        rule = rng.choice(
            [{"type": "file_name", "file_name": _RICK}, {"type": "url", "url": _STREAM}]
        )
        path = _write(folder / f"status{index}.xml", _STATUS_XML.format(state=state, meta=meta))
        yield Case(f"{state} {name}={value}", (path, rule))


@makes("is_vlc_fullscreen")
def _vlc_fullscreen(rng: random.Random, folder: Path) -> Iterator[Case]:
    screen = {"width": 1920, "height": 1080}
    for _ in range(8):
        window = rng.choice([dict(screen), {"width": 1280, "height": 720}, None])
        yield Case(f"{window}", (window, screen))


@makes("check_thunderbird_prefs")
def _thunderbird_prefs(rng: random.Random, folder: Path) -> Iterator[Case]:
    signature = {"method": "re.S", "ref": "Anonym\\nXYZ Lab"}
    no_autosync = {"mail.server.default.autosync_offline_stores": {"method": "eq", "ref": False}}
    published = [
        {"expect": {"mail.identity.id1.htmlSigText": signature}},
        {"expect": {"mail.identity.id1.auto_quote": {"method": "eq", "ref": False}}},
        {"expect": {"extensions.activeThemeID": {"method": "re", "ref": "dark"}}},
        {"expect": {"mail.server.default.applyIncomingFilters": {"method": "eq", "ref": True},
                    "mail.imap.use_status_for_biff": {"method": "eq", "ref": False}},
         "unexpect": no_autosync},
    ]  # fmt: skip
    candidates = [
        'user_pref("mail.identity.id1.htmlSigText", "Anonym\\nXYZ Lab");',
        'user_pref("mail.identity.id1.htmlSigText", "Anonym");',
        'user_pref("mail.identity.id1.auto_quote", false);',
        'user_pref("mail.identity.id1.auto_quote", true);',
        'user_pref("extensions.activeThemeID", "thunderbird-compact-dark@mozilla.org");',
        'user_pref("extensions.activeThemeID", "default-theme@mozilla.org");',
        'user_pref("mail.server.default.applyIncomingFilters", true);',
        'user_pref("mail.imap.use_status_for_biff", false);',
        'user_pref("mail.server.default.autosync_offline_stores", false);',
        'user_pref("mail.server.server2.name", "x \\"work\\"");',
    ]
    for index in range(24):
        lines = ["// Mozilla User Preferences", "", *rng.sample(candidates, rng.randint(2, 7))]
        path = None if index == 0 else _write(folder / f"prefs{index}.js", "\n".join(lines))
        yield Case(f"{lines[2:]}", (path, published[index % len(published)]))


@makes("check_thunderbird_filter")
def _thunderbird_filter(rng: random.Random, folder: Path) -> Iterator[Case]:
    move = {"enabled": "yes", "action": "Move to folder",
            "actionValue": "mailbox://nobody@Local%20Folders/Promotions",
            "condition": ["AND (subject,contains,discount)"]}  # fmt: skip
    forward = {"enabled": "yes", "action": "Forward", "actionValue": "anonym-x2024@gmail.com",
               "condition": ["ALL"]}  # fmt: skip
    for index in range(16):
        blocks = ['version="9"', 'logging="no"']
        for name, rule in (("Promotions", move), ("Forward", forward)):
            if rng.random() < 0.7:
                enabled = rng.choice(["yes", "yes", "no"])
                condition = rule["condition"][0]
                if rng.random() < 0.2:
                    condition = 'OR (subject,contains,"big sale")'
                blocks += [f'name="{name}"', f'enabled="{enabled}"', 'type="17"',
                           f'action="{rule["action"]}"', f'actionValue="{rule["actionValue"]}"',
                           f'condition="{condition}"']  # fmt: skip
        path = None if index == 0 else _write(folder / f"f{index}.dat", "\n".join(blocks) + "\n")
        yield Case(f"{blocks[2:]}", (path, {"expect": [rng.choice([move, forward])]}))


@makes("check_thunderbird_folder")
def _thunderbird_folder(rng: random.Random, folder: Path) -> Iterator[Case]:
    def mbox(subjects: list[str]) -> str:
        return "".join(f"From - Mon Jan 01 10:00:00 2024\nX-Mozilla-Status: 0001\n"
                       f"Subject: {s}\n\nHello\n\n" for s in subjects)  # fmt: skip

    for index in range(12):
        gold = _write(folder / f"gold{index}", mbox(words(rng, 2)))
        text = mbox(words(rng, 3)) if rng.random() < 0.8 else "FROM - a\n\nFROM - b\n"
        result = None if index == 0 else _write(folder / f"result{index}", text)
        options = rng.choice([{}, {"remove_deleted": True, "remove_duplicate": True}])
        yield Case(f"{text[:40]!r}", (result, gold), options)


@makes("check_csv")
def _check_csv(rng: random.Random, folder: Path) -> Iterator[Case]:
    rules = {"unexpect": [{"url": "imap://outlook.office365.com",
                           "user": "anonym-x2024@outlook.com"}]}  # fmt: skip
    for index in range(12):
        rows = ["url,user,password"]
        for _ in range(rng.randint(0, 3)):
            url = rng.choice(["imap://outlook.office365.com", "smtp://x.org"])
            user = rng.choice(["anonym-x2024@outlook.com", "other@x.org"])
            rows.append(f"{url},{user},secret")
        path = None if index == 0 else _write(folder / f"p{index}.csv", "\n".join(rows) + "\n")
        yield Case(f"{rows[1:]}", (path, rules))


@makes("run_sqlite3")
def _run_sqlite3(rng: random.Random, folder: Path) -> Iterator[Case]:
    sql = ("SELECT COALESCE((SELECT COUNT(*) FROM messageAttributes WHERE attributeID = 58 AND "
           "value = 1 AND messageID IN (SELECT id FROM messages WHERE folderID = 13)), 0) = "
           "(SELECT COUNT(*) FROM messages WHERE folderID = 13);")  # fmt: skip
    for index in range(10):
        path = folder / f"global-messages-db{index}.sqlite"
        db = sqlite3.connect(path)
        db.executescript(
            "CREATE TABLE messages (id INTEGER PRIMARY KEY, folderID INTEGER);"
            "CREATE TABLE messageAttributes (id INTEGER PRIMARY KEY, attributeID INTEGER,"
            " value NUMERIC, messageID INTEGER);"
        )
        flagged = 0
        for message in range(rng.randint(1, 4)):
            db.execute("INSERT INTO messages VALUES (?, 13)", (message,))
            if rng.random() < 0.7:
                flagged += 1
                db.execute("INSERT INTO messageAttributes VALUES (NULL, 58, 1, ?)", (message,))
        db.commit()
        db.close()
        yield Case(f"{flagged} flagged", (str(path), {"sql": sql}))


_A11Y = """<desktop-frame xmlns:attr="https://accessibility.ubuntu.example.org/ns/attributes"
 xmlns:st="https://accessibility.ubuntu.example.org/ns/state">
<application name="Thunderbird"><page-tab-list attr:id="tabmail-tabs">{tabs}</page-tab-list>
<label name="{label}">{label}</label></application></desktop-frame>"""


@makes("check_accessibility_tree")
def _accessibility_tree(rng: random.Random, folder: Path) -> Iterator[Case]:
    published: list[list[dict[str, Any]]] = [
        [{"selectors": ['application[name=Thunderbird] page-tab-list[attr|id="tabmail-tabs"]'
                        '>page-tab[name="About Profiles"]']}],
        [{"xpath": "//application[@name='Thunderbird']//*[contains(text(), "
                   "'anonym-x2024@outlook.com') or contains(@name, 'anonym-x2024@outlook.com')]"}],
        [{"selectors": ["label"], "text": "anonym-x2024@outlook.com", "exact": False}],
    ]  # fmt: skip
    for index in range(12):
        tab = rng.choice(["About Profiles", "Inbox"])
        label = rng.choice(["anonym-x2024@outlook.com", "anonym-x2024@outlook.co", "someone"])
        xml = _A11Y.format(tabs=f'<page-tab name="{tab}"/>', label=label)
        yield Case(f"tab {tab}, label {label}", (xml, published[index % len(published)]))
    xml = _A11Y.format(tabs="", label="anonym-x2024@outlook.com")
    rules = [{"selectors": ["label"], "text": "anonym-x2024@outlook.com"}]
    yield Case("text without exact", (xml, rules), difference="a11y text without exact")
