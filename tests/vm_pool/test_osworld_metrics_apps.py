"""OSWorld's application metrics (VLC, the desktop's settings, Thunderbird, VS Code, MP3 tags)
and their readers, over files in the forms the applications write them, with the rules the
published tasks pass; and the getters that ask a running desktop (VLC's web interface, the
default video player) on a real sandboxed one."""

import csv
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from mutagen.easyid3 import EasyID3

from vm_pool.evaluation.bounds import LimitHit
from vm_pool.evaluation.getters import Reading
from vm_pool.evaluation.getters.apps_state import default_video_player, vlc_playing_info
from vm_pool.evaluation.metrics import METRICS, MetricError
from vm_pool.evaluation.metrics.audio import check_mp3_meta
from vm_pool.evaluation.metrics.basic_os import (
    check_gnome_favorite_apps,
    check_moved_jpgs,
    is_in_vm_clickboard,
    is_utc_0,
)
from vm_pool.evaluation.metrics.records import check_csv, run_sqlite3
from vm_pool.evaluation.metrics.thunderbird import (
    check_thunderbird_filter,
    check_thunderbird_folder,
    check_thunderbird_prefs,
)
from vm_pool.evaluation.metrics.vlc import (
    check_global_key_play_pause,
    check_one_instance_when_started_from_file,
    check_play_and_exit,
    check_qt_bgcone,
    check_qt_max_volume,
    check_qt_minimal_view,
    check_qt_slider_colours,
    is_vlc_fullscreen,
    is_vlc_playing,
    is_vlc_recordings_folder,
)
from vm_pool.evaluation.metrics.vscode import check_json_keybindings, is_extension_installed
from vm_pool.evaluation.readers import READERS
from vm_pool.evaluation.scoring import score


def _write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def _scored(func: str, result: dict[str, Any], expected: dict[str, Any] | None) -> Any:
    """One metric scored as the jail scores it, over gathered values (no files)."""
    entry = {"func": func, "options": {}, "result": result, "expected": expected}
    verdict = score({"conjunction": "single", "metrics": [entry]}, Path("/nonexistent"))
    return verdict


def test_each_metric_is_registered_under_its_osworld_name() -> None:
    names = {
        "is_vlc_playing", "is_vlc_recordings_folder", "is_vlc_fullscreen",
        "check_global_key_play_pause", "check_qt_max_volume", "check_qt_slider_colours",
        "check_qt_minimal_view", "check_qt_bgcone", "check_play_and_exit",
        "check_one_instance_when_started_from_file", "check_gnome_favorite_apps", "is_utc_0",
        "check_moved_jpgs", "check_thunderbird_prefs", "check_thunderbird_filter",
        "check_thunderbird_folder", "run_sqlite3", "check_csv", "check_json_keybindings",
        "is_extension_installed", "check_mp3_meta", "is_in_vm_clickboard",
    }  # fmt: skip
    for name in names:
        assert METRICS[name].__name__ == name


# VLC ---------------------------------------------------------------------------------------

# What VLC 3.0 writes to ~/.config/vlc/vlcrc: every default commented out, a changed setting
# written bare.
VLCRC = """\
###
###  vlc 3.0.18
###

###
### lines beginning with a '#' character are comments
###

[qt] # Qt interface

# Start in minimal view (without menus) (boolean)
{minimal}

# Display background cone or art (boolean)
{bgcone}

# Define the colors of the volume slider  (string)
{slider}

# Maximum Volume displayed (integer)
{max_volume}

[core] # core program

# Record directory (string)
{record}

# Play and exit (boolean)
{play_and_exit}

# Allow only one running instance when started from file (boolean)
{one_instance}

# Play/Pause (string)
{global_key}

# Play/Pause (string)
#key-play-pause=Space
"""

VLC_DEFAULTS = {
    "minimal": "#qt-minimal-view=0",
    "bgcone": "#qt-bgcone=1",
    "slider": "#qt-slider-colours=153;210;153;20;210;20;255;199;15;245;39;29",
    "max_volume": "#qt-max-volume=125",
    "record": "#input-record-path=",
    "play_and_exit": "#play-and-exit=0",
    "one_instance": "#one-instance-when-started-from-file=1",
    "global_key": "#global-key-play-pause=",
}


def _vlcrc(tmp_path: Path, **changed: str) -> str:
    """A vlcrc with these settings changed, in a folder of its own."""
    folder = tmp_path / str(len(list(tmp_path.iterdir())))
    folder.mkdir()
    return _write(folder / "vlcrc", VLCRC.format(**{**VLC_DEFAULTS, **changed}))


def test_vlc_settings_read_a_changed_setting_and_a_commented_default(tmp_path: Path) -> None:
    default = _vlcrc(tmp_path)
    assert check_qt_bgcone(default, {"expected_qt_bgcone": 0}) == 0.0
    assert check_qt_bgcone(_vlcrc(tmp_path, bgcone="qt-bgcone=0"), {"expected_qt_bgcone": 0}) == 1
    assert check_qt_max_volume(default, {"expected_qt_max_volume": 200}) == 0.0
    changed = _vlcrc(tmp_path, max_volume="qt-max-volume=200")
    assert check_qt_max_volume(changed, {"expected_qt_max_volume": 200}) == 1.0
    assert check_qt_minimal_view(default, {"expected_qt_minimal_view": 1}) == 0.0
    changed = _vlcrc(tmp_path, minimal="qt-minimal-view=1")
    assert check_qt_minimal_view(changed, {"expected_qt_minimal_view": 1}) == 1.0
    changed = _vlcrc(tmp_path, one_instance="one-instance-when-started-from-file=0")
    rule = {"expected_one_instance_when_started_from_file": 0}
    assert check_one_instance_when_started_from_file(default, rule) == 0.0
    assert check_one_instance_when_started_from_file(changed, rule) == 1.0


def test_play_and_exit_is_off_by_default(tmp_path: Path) -> None:
    rule = {"expected_play_and_exit": 0}
    assert check_play_and_exit(_vlcrc(tmp_path), rule) == 1.0
    assert check_play_and_exit(_vlcrc(tmp_path, play_and_exit="play-and-exit=1"), rule) == 0.0
    assert check_play_and_exit(None, rule) == 0.0


def test_a_global_play_pause_key_counts_when_it_has_a_value(tmp_path: Path) -> None:
    rule = {"expected_global_key_play_pause": 1}
    assert check_global_key_play_pause(_vlcrc(tmp_path), rule) == 0.0
    bound = _vlcrc(tmp_path, global_key="global-key-play-pause=Ctrl+Alt+p")
    assert check_global_key_play_pause(bound, rule) == 1.0
    assert check_global_key_play_pause(bound, {"expected_global_key_play_pause": "0"}) == 0.0


def test_the_recordings_folder_is_the_first_set_path(tmp_path: Path) -> None:
    rule = {"recording_file_path": "/home/user/Desktop"}
    assert is_vlc_recordings_folder(_vlcrc(tmp_path), rule) == 0.0  # only commented out
    desktop = _vlcrc(tmp_path, record="input-record-path=/home/user/Desktop")
    assert is_vlc_recordings_folder(desktop, rule) == 1.0
    videos = _vlcrc(tmp_path, record="input-record-path=/home/user/Videos")
    assert is_vlc_recordings_folder(videos, rule) == 0.0


def test_slider_colours_blackish_or_matching(tmp_path: Path) -> None:
    blackish = {"type": "blackish"}
    assert check_qt_slider_colours(_vlcrc(tmp_path), blackish) == 0.0
    dark = _vlcrc(tmp_path, slider="qt-slider-colours=0;0;0;20;20;20;50;60;70;99;10;0")
    assert check_qt_slider_colours(dark, blackish) == 1.0
    grey = _vlcrc(tmp_path, slider="qt-slider-colours=0;0;0;20;20;20;50;60;70;100;10;0")
    assert check_qt_slider_colours(grey, blackish) == 0.0
    broken = _vlcrc(tmp_path, slider="qt-slider-colours=black")
    assert check_qt_slider_colours(broken, blackish) == 0.0
    match = {"type": "match", "expected_qt_slider_colours": "0;0;0;20;20;20;50;60;70;99;10;0"}
    assert check_qt_slider_colours(dark, match) == 1.0
    assert check_qt_slider_colours(grey, match) == 0.0
    with pytest.raises(MetricError):
        check_qt_slider_colours(dark, {"type": "darkish"})


# What VLC's web interface answers at /requests/status.xml (VLC 3.0, shortened).
STATUS_XML = """\
<?xml version="1.0" encoding="utf-8" standalone="yes" ?>
<root>
<fullscreen>false</fullscreen>
<apiversion>3</apiversion>
<currentplid>4</currentplid>
<time>12</time>
<volume>256</volume>
<length>213</length>
<state>{state}</state>
<version>3.0.18 Vetinari</version>
<information>
    <category name="meta">
    {meta}
    </category>
  <category name='Stream 0'>
    <info name='Codec'>H264 - MPEG-4 AVC (part 10) (avc1)</info>
    <info name='Type'>Video</info>
  </category>
</information>
</root>
"""

RICK = "Rick Astley - Never Gonna Give You Up (Official Music Video).mp4"
STREAM = (
    "https://devstreaming-cdn.apple.com/videos/streaming/examples/img_bipbop_adv_example_fmp4/"
    "master.m3u8"
)


def _status(tmp_path: Path, state: str, meta: str) -> str:
    """A status.xml of VLC in this state, with this meta information, in a folder of its own."""
    folder = tmp_path / str(len(list(tmp_path.iterdir())))
    folder.mkdir()
    return _write(folder / "status.xml", STATUS_XML.format(state=state, meta=meta))


def test_vlc_plays_the_named_file(tmp_path: Path) -> None:
    rule = {"type": "file_name", "file_name": RICK}
    playing = _status(tmp_path, "playing", f"<info name='filename'>{RICK}</info>")
    assert is_vlc_playing(playing, rule) == 1.0
    with_path = _status(tmp_path, "playing", f"<info name='filename'>/home/user/{RICK}</info>")
    assert is_vlc_playing(with_path, rule) == 1.0
    assert (
        is_vlc_playing(_status(tmp_path, "paused", f"<info name='filename'>{RICK}</info>"), rule)
        == 0
    )
    other = _status(tmp_path, "playing", "<info name='filename'>Baby.mp3</info>")
    assert is_vlc_playing(other, rule) == 0.0
    assert is_vlc_playing(_status(tmp_path, "playing", ""), rule) == 0.0
    assert is_vlc_playing(None, rule) == 0.0


def test_vlc_plays_the_stream_named_by_its_address_or_its_file(tmp_path: Path) -> None:
    rule = {"type": "url", "url": STREAM}
    by_file = _status(tmp_path, "playing", "<info name='filename'>master.m3u8</info>")
    assert is_vlc_playing(by_file, rule) == 1.0
    by_url = _status(tmp_path, "playing", f"<info name='url'>{STREAM}</info>")
    assert is_vlc_playing(by_url, rule) == 1.0
    elsewhere = _status(tmp_path, "playing", "<info name='url'>https://example.com/a.m3u8</info>")
    assert is_vlc_playing(elsewhere, rule) == 0.0
    with pytest.raises(MetricError):
        is_vlc_playing(by_url, {"type": "title", "title": "x"})


def test_vlc_status_is_parsed_without_entities(tmp_path: Path) -> None:
    bomb = _write(
        tmp_path / "status.xml",
        '<?xml version="1.0"?><!DOCTYPE r [<!ENTITY a "playing">]><root><state>&a;</state></root>',
    )
    assert is_vlc_playing(bomb, {"type": "file_name", "file_name": RICK}) == 0.0


def test_vlc_is_fullscreen_when_its_window_is_the_screen() -> None:
    screen = {"width": 1920, "height": 1080}
    assert is_vlc_fullscreen({"width": 1920, "height": 1080}, screen) == 1.0
    assert is_vlc_fullscreen({"width": 1280, "height": 720}, screen) == 0.0
    assert is_vlc_fullscreen(None, screen) == 0.0  # no VLC window


# The desktop's settings ---------------------------------------------------------------------

TIMEDATECTL = """\
               Local time: Thu 2024-01-25 12:56:06 {zone}
           Universal time: Thu 2024-01-25 12:56:06 UTC
                 RTC time: Thu 2024-01-25 12:56:05
                Time zone: {name} ({zone}, {offset})
System clock synchronized: yes
              NTP service: inactive
          RTC in local TZ: no
"""


def test_utc_0_reads_the_time_zone_line() -> None:
    assert is_utc_0(TIMEDATECTL.format(zone="WET", name="Atlantic/Faroe", offset="+0000")) == 1
    assert is_utc_0(TIMEDATECTL.format(zone="CST", name="Asia/Shanghai", offset="+0800")) == 0
    assert is_utc_0("System has not been booted with systemd as init system (PID 1).\n") == 0.0


def test_favorite_apps_in_any_order_and_never_evaluated() -> None:
    rule = {"expected": ["google-chrome.desktop", "thunderbird.desktop"]}
    assert check_gnome_favorite_apps("['thunderbird.desktop', 'google-chrome.desktop']\n", rule)
    extra = "['thunderbird.desktop', 'google-chrome.desktop', 'vim.desktop']\n"
    assert check_gnome_favorite_apps(extra, rule) == 0.0
    assert _scored(
        "check_gnome_favorite_apps",
        {"kind": "value", "value": "__import__('os').system('true')"},
        {"kind": "value", "value": rule},
    )["value"] == 0.0  # fmt: skip
    empty = {"kind": "value", "value": "@as []\n"}  # gsettings' empty list
    verdict = _scored("check_gnome_favorite_apps", empty, {"kind": "value", "value": rule})
    assert verdict["value"] == 0.0


def test_moved_jpgs_are_the_folders_names() -> None:
    listing = "f emnlp2023.jpg\nf hk_group_photo.jpg\nf hong-kong-china.jpg\n"
    tree = READERS["directory_tree"](None, listing, {"root": "/home/user/Desktop/cpjpg"})
    rule = {"expected": ["hk_group_photo.jpg", "emnlp2023.jpg", "hong-kong-china.jpg"]}
    assert check_moved_jpgs(tree, rule) == 1.0
    assert check_moved_jpgs(tree, {"expected": ["emnlp2023.jpg", "hk_group_photo.jpg"]}) == 0.0
    empty = READERS["directory_tree"](None, "", {"root": "/home/user/Desktop/cpjpg"})
    assert check_moved_jpgs(empty, rule) == 0.0


def test_the_clipboard_holds_the_expected_text() -> None:
    rule = {"expected": "/home/user/Data3/List3/secret.docx"}
    assert is_in_vm_clickboard(rule, "/home/user/Data3/List3/secret.docx") == 1.0
    assert is_in_vm_clickboard(rule, "/home/user/Data3/secret.docx") == 0.0
    assert is_in_vm_clickboard({"expected": ["a", "b"]}, "a b") == 1.0
    assert is_in_vm_clickboard({"expected": ["a", "c"]}, "a b") == 0.0


def test_the_default_video_player_is_the_program_most_types_open_with() -> None:
    read = READERS["most_common_program"]
    answers = "vlc.desktop\n\0\0org.gnome.Totem.desktop\n\0vlc.desktop\n\0"
    assert read(None, answers, {}) == "vlc.desktop\n"  # as xdg-mime printed it
    assert read(None, "\0\0\0", {}) == "unknown"
    assert read(None, "a.desktop\n\0b.desktop\n\0", {}) == "a.desktop\n"  # a tie: the first
    with pytest.raises(LimitHit):
        read(None, "vlc.desktop\n\0" * 2000, {})
    verdict = _scored(
        "check_include_exclude",
        {"kind": "read", "reader": "most_common_program", "file": None, "text": answers},
        {"kind": "value", "value": {"include": ["vlc.desktop"]}},
    )
    assert verdict["value"] == 1.0


# Thunderbird --------------------------------------------------------------------------------

PREFS_JS = """\
// Mozilla User Preferences

// DO NOT EDIT THIS FILE.
//
// If you make changes to this file while the application is running,
// the changes will be overwritten when the application exits.
//
// To change a preference value, you can either:
// - modify it via the UI (e.g. via about:config in the browser); or
// - set it within a user.js file in your profile.

user_pref("app.donation.eoy.version.viewed", 5);
user_pref("extensions.activeThemeID", "thunderbird-compact-dark@mozilla.org");
user_pref("mail.identity.id1.auto_quote", false);
user_pref("mail.identity.id1.htmlSigText", "Anonym\\nXYZ Lab");
user_pref("mail.imap.use_status_for_biff", false);
user_pref("mail.server.default.applyIncomingFilters", true);
user_pref("mail.server.server2.name", "anonym-x2024@outlook.com \\"work\\"");
"""

INCOMING_RULE = {
    "expect": {
        "mail.server.default.applyIncomingFilters": {"method": "eq", "ref": True},
        "mail.imap.use_status_for_biff": {"method": "eq", "ref": False},
    },
    "unexpect": {"mail.server.default.autosync_offline_stores": {"method": "eq", "ref": False}},
}


def test_thunderbird_prefs_with_the_published_rules(tmp_path: Path) -> None:
    prefs = _write(tmp_path / "prefs.js", PREFS_JS)
    assert check_thunderbird_prefs(prefs, INCOMING_RULE) == 1.0
    dark = {"expect": {"extensions.activeThemeID": {"method": "re", "ref": "dark"}}}
    assert check_thunderbird_prefs(prefs, dark) == 1.0
    signature = {
        "expect": {"mail.identity.id1.htmlSigText": {"method": "re.S", "ref": "Anonym\\nXYZ Lab"}}
    }
    assert check_thunderbird_prefs(prefs, signature) == 1.0
    quote = {"expect": {"mail.identity.id1.auto_quote": {"method": "eq", "ref": False}}}
    assert check_thunderbird_prefs(prefs, quote) == 1.0


def test_thunderbird_prefs_fail_on_a_missing_or_unexpected_setting(tmp_path: Path) -> None:
    offline = PREFS_JS + 'user_pref("mail.server.default.autosync_offline_stores", false);\n'
    assert check_thunderbird_prefs(_write(tmp_path / "a.js", offline), INCOMING_RULE) == 0.0
    untouched = PREFS_JS.replace('user_pref("mail.identity.id1.auto_quote", false);\n', "")
    quote = {"expect": {"mail.identity.id1.auto_quote": {"method": "eq", "ref": False}}}
    assert check_thunderbird_prefs(_write(tmp_path / "b.js", untouched), quote) == 0.0
    light = PREFS_JS.replace("compact-dark", "compact-light")
    dark = {"expect": {"extensions.activeThemeID": {"method": "re", "ref": "dark"}}}
    assert check_thunderbird_prefs(_write(tmp_path / "c.js", light), dark) == 0.0
    assert check_thunderbird_prefs(None, dark) == 0.0


MSG_FILTER_RULES = """\
version="9"
logging="no"
name="Promotions"
enabled="yes"
type="17"
action="Move to folder"
actionValue="mailbox://nobody@Local%20Folders/Promotions"
condition="AND (subject,contains,discount)"
name="Forward everything"
enabled="{forward}"
type="17"
action="Forward"
actionValue="anonym-x2024@gmail.com"
condition="ALL"
name="Quoted"
enabled="yes"
type="17"
action="Mark read"
condition="OR (subject,contains,\\"big sale\\") OR (from,is,shop@example.com)"
"""

MOVE_RULE = {
    "expect": [
        {
            "enabled": "yes",
            "action": "Move to folder",
            "actionValue": "mailbox://nobody@Local%20Folders/Promotions",
            "condition": ["AND (subject,contains,discount)"],
        }
    ]
}
FORWARD_RULE = {
    "expect": [
        {
            "enabled": "yes",
            "action": "Forward",
            "actionValue": "anonym-x2024@gmail.com",
            "condition": ["ALL"],
        }
    ]
}


def test_thunderbird_filters_with_the_published_rules(tmp_path: Path) -> None:
    rules = _write(tmp_path / "msgFilterRules.dat", MSG_FILTER_RULES.format(forward="yes"))
    assert check_thunderbird_filter(rules, MOVE_RULE) == 1.0
    assert check_thunderbird_filter(rules, FORWARD_RULE) == 1.0
    quoted = {
        "expect": [
            {"condition": ['OR (subject,contains,"big sale")', "OR (from,is,shop@example.com)"]}
        ]
    }
    assert check_thunderbird_filter(rules, quoted) == 1.0
    assert check_thunderbird_filter(rules, {"unexpect": [{"action": "Forward"}]}) == 0.0


def test_a_disabled_or_missing_filter_fails(tmp_path: Path) -> None:
    disabled = _write(tmp_path / "a.dat", MSG_FILTER_RULES.format(forward="no"))
    assert check_thunderbird_filter(disabled, FORWARD_RULE) == 0.0
    assert (
        check_thunderbird_filter(
            _write(tmp_path / "b.dat", 'version="9"\nlogging="no"\n'), MOVE_RULE
        )
        == 0
    )
    assert check_thunderbird_filter(None, MOVE_RULE) == 0.0
    headless = _write(tmp_path / "c.dat", 'version="9"\nenabled="yes"\ncondition="ALL"\n')
    assert check_thunderbird_filter(headless, {"expect": [{"condition": ["ALL"]}]}) == 0.0


def _mbox(*messages: tuple[str, str]) -> str:
    """A Thunderbird mail folder: each message after its ``From - `` line."""
    return "".join(
        f"From - Mon Jan 01 10:00:00 2024\nX-Mozilla-Status: {status}\nX-Mozilla-Keys: \n"
        f"MIME-Version: 1.0\nSubject: {subject}\n\nHello\n\n"
        for subject, status in messages
    )


def test_thunderbird_folders_score_as_osworld_scores_them(tmp_path: Path) -> None:
    bills = _write(tmp_path / "Bills", _mbox(("Invoice", "0001"), ("Receipt", "0001")))
    other = _write(tmp_path / "Bills.gold", _mbox(("Something else", "0001")))
    # OSWorld keeps only blank pieces of a split on "FROM - ", which Thunderbird never writes:
    # two folders Thunderbird wrote read the same, whatever they hold.
    assert check_thunderbird_folder(bills, other) == 1.0
    assert check_thunderbird_folder([bills, bills], [other, bills], remove_deleted=True) == 1.0
    assert check_thunderbird_folder([None, bills], [other, bills]) == 0.0
    assert check_thunderbird_folder(None, other) == 0.0
    split = _write(tmp_path / "split", "FROM - a\n\nFROM - b\n")
    assert check_thunderbird_folder(split, bills) == 0.0


def _messages_db(path: Path, flagged: list[int], unflagged: list[int]) -> str:
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE messages (id INTEGER PRIMARY KEY, folderID INTEGER, messageKey INTEGER);"
        "CREATE TABLE messageAttributes (id INTEGER PRIMARY KEY, attributeID INTEGER,"
        " value NUMERIC, conversationID INTEGER, messageID INTEGER);"
    )
    for message in flagged + unflagged:
        db.execute("INSERT INTO messages (id, folderID) VALUES (?, 13)", (message,))
    db.execute("INSERT INTO messages (id, folderID) VALUES (99, 7)")
    for message in flagged:
        db.execute(
            "INSERT INTO messageAttributes (attributeID, value, messageID) VALUES (58, 1, ?)",
            (message,),
        )
    db.commit()
    db.close()
    return str(path)


ALL_STARRED = {
    "sql": "SELECT COALESCE((SELECT COUNT(*) FROM messageAttributes WHERE attributeID = 58 AND "
    "value = 1 AND messageID IN (SELECT id FROM messages WHERE folderID = 13)), 0) = (SELECT "
    "COUNT(*) FROM messages WHERE folderID = 13);"
}


def test_run_sqlite3_answers_the_tasks_query_without_writing(tmp_path: Path) -> None:
    done = _messages_db(tmp_path / "done.sqlite", flagged=[1, 2, 3], unflagged=[])
    before = Path(done).read_bytes()
    assert run_sqlite3(done, ALL_STARRED) == 1.0
    assert Path(done).read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["done.sqlite"]  # no journal beside it
    half = _messages_db(tmp_path / "half.sqlite", flagged=[1], unflagged=[2, 3])
    assert run_sqlite3(half, ALL_STARRED) == 0.0
    assert run_sqlite3(half, {"sql": "SELECT NULL"}) == 0.0
    assert run_sqlite3(None, ALL_STARRED) == 0.0


def test_run_sqlite3_stops_a_query_that_computes_forever(tmp_path: Path) -> None:
    db = _messages_db(tmp_path / "db.sqlite", flagged=[1], unflagged=[])
    forever = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT max(i) FROM n"
    with pytest.raises(LimitHit, match="sqlite work"):
        run_sqlite3(db, {"sql": forever})


def test_check_csv_with_the_published_unexpect_rule(tmp_path: Path) -> None:
    rule = {
        "unexpect": [{"url": "imap://outlook.office365.com", "user": "anonym-x2024@outlook.com"}]
    }
    path = tmp_path / "thunderbird-accounts.csv"
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["url", "user"])
        writer.writerow(["imap://outlook.office365.com", "anonym-x2024@outlook.com"])
    assert check_csv(str(path), rule) == 0.0
    _write(path, "url,user\nimap://imap.gmail.com,someone@gmail.com\n")
    assert check_csv(str(path), rule) == 1.0
    assert check_csv(str(path), {"expect": [{"url": "imap://imap.gmail.com"}]}) == 1.0
    assert check_csv(str(path), {"expect": [{"url": "pop3://pop.gmail.com"}]}) == 0.0
    assert check_csv(None, rule) == 0.0


# VS Code ------------------------------------------------------------------------------------

KEYBINDINGS = """\
// Place your key bindings in this file to override the defaults
[
    {
        "key": "ctrl+j",
        "command": "workbench.action.focusActiveEditorGroup",
        "when": "terminalFocus"
    }
]
"""


def test_keybindings_hold_the_expected_binding(tmp_path: Path) -> None:
    binding = {
        "key": "ctrl+j",
        "command": "workbench.action.focusActiveEditorGroup",
        "when": "terminalFocus",
    }
    commented = _write(tmp_path / "keybindings.json", KEYBINDINGS)
    assert check_json_keybindings(commented, {"expected": binding}) == 1.0
    plain = _write(tmp_path / "plain.json", json.dumps([binding]))
    assert check_json_keybindings(plain, {"expected": binding}) == 1.0
    other = {"key": "ctrl+f", "command": "-list.find", "when": "listFocus && listSupportsFind"}
    assert check_json_keybindings(commented, {"expected": other}) == 0.0
    trailing_comma = _write(tmp_path / "bad.json", KEYBINDINGS.replace('"\n    }', '",\n    },'))
    assert check_json_keybindings(trailing_comma, {"expected": binding}) == 0.0
    assert check_json_keybindings(None, {"expected": binding}) == 0.0


def test_extension_installed_reads_the_listing() -> None:
    listing = "ms-python.debugpy\nms-python.python\nms-python.vscode-pylance\n"
    assert is_extension_installed(listing, {"type": "contain", "expected": "ms-python.python"}) == 1
    assert is_extension_installed(listing, {"type": "contain", "expected": "mattn.lisp"}) == 0.0
    assert is_extension_installed(listing, {"type": "not_contain", "expected": "mattn.lisp"}) == 1
    with pytest.raises(MetricError):
        is_extension_installed(listing, {"type": "equal", "expected": "mattn.lisp"})


# MP3 tags -----------------------------------------------------------------------------------

# One MPEG-1 Layer III frame (128 kbit/s, 44.1 kHz): 417 bytes, its header then silence.
MP3_FRAME = bytes.fromhex("fffb9064") + bytes(413)


def _mp3(path: Path, **tags: str) -> str:
    path.write_bytes(MP3_FRAME * 4)
    if tags:
        id3 = EasyID3()
        for key, text in tags.items():
            id3[key] = text
        id3.save(path)
    return str(path)


def test_mp3_tags_with_the_published_rules(tmp_path: Path) -> None:
    rule = {
        "title": {"method": "eq", "ref": "Missing You"},
        "artist": {"method": "eq", "ref": "Cheng Xiang"},
    }
    tagged = _mp3(tmp_path / "a.mp3", title="Missing You", artist="Cheng Xiang")
    assert check_mp3_meta(tagged, rule) == 1.0
    wrong = _mp3(tmp_path / "b.mp3", title="Missing You", artist="Han Baoyi")
    assert check_mp3_meta(wrong, rule) == 0.0
    title_only = _mp3(tmp_path / "c.mp3", title="Missing You")
    assert check_mp3_meta(title_only, rule) == 0.0
    assert check_mp3_meta(None, rule) == 0.0


def test_an_mp3_without_tags_scores_0(tmp_path: Path) -> None:
    untagged = _mp3(tmp_path / "untagged.mp3")
    rule = {"title": {"method": "eq", "ref": "Missing You"}}
    entry = {
        "func": "check_mp3_meta",
        "options": {},
        "result": {"kind": "files", "files": ["untagged.mp3"], "single": True},
        "expected": {"kind": "value", "value": rule},
    }
    verdict = score({"conjunction": "single", "metrics": [entry]}, Path(untagged).parent)
    assert verdict["value"] == 0.0
    assert "ID3" in verdict["metrics"][0]["error"]


# The getters, inside a real sandboxed desktop ----------------------------------------------

# A stand-in for VLC's web interface, on the desktop's loopback: status.xml to its password only.
VLC_WEB = """
import base64, http.server
STATUS = open('status.xml', 'rb').read()
class Status(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        good = 'Basic ' + base64.b64encode(b':password').decode()
        if self.path != '/requests/status.xml' or self.headers.get('Authorization') != good:
            self.send_response(401)
            self.end_headers()
            return
        self.send_response(200)
        self.end_headers()
        self.wfile.write(STATUS)
http.server.HTTPServer(('127.0.0.1', 8080), Status).serve_forever()
"""


def _entry(name: str) -> bytes:
    """A program's desktop file; xdg-mime names it only if its program exists (xterm here)."""
    return f"[Desktop Entry]\nType=Application\nName={name}\nExec=xterm %U\n".encode()


@pytest.mark.django_db(transaction=True)
def test_vlc_status_and_the_video_player_are_asked_inside_the_desktop(
    sandboxed_control: Any, tmp_path: Path
) -> None:
    control = sandboxed_control
    reading = Reading(control, tmp_path, fetch_url=lambda url: b"")
    for name in ("vlc", "totem"):
        control.put_file(f"~/.local/share/applications/{name}.desktop", _entry(name))
    control.put_file(
        "~/.config/mimeapps.list",
        b"[Default Applications]\nvideo/mp4=vlc.desktop\nvideo/webm=vlc.desktop\n"
        b"video/x-matroska=totem.desktop\n",
    )
    gathered = default_video_player(reading, {})
    player = READERS[gathered["reader"]](None, gathered["text"], gathered["config"])
    assert player == "vlc.desktop\n"  # two types of OSWorld's list against one

    assert vlc_playing_info(reading, {"dest": "status.xml"})["kind"] == "error"  # no VLC
    playing = STATUS_XML.format(state="playing", meta=f"<info name='filename'>{RICK}</info>")
    control.put_file("~/status.xml", playing.encode())
    control.launch(["python3", "-c", VLC_WEB])
    deadline = time.monotonic() + 10
    while (found := vlc_playing_info(reading, {"dest": "status.xml"}))["kind"] == "error":
        assert time.monotonic() < deadline, found
        time.sleep(0.2)
    assert found == {"kind": "files", "files": ["status.xml"], "single": True}
    rule = {"type": "file_name", "file_name": RICK}
    assert is_vlc_playing(str(tmp_path / "status.xml"), rule) == 1.0
