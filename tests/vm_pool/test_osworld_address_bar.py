"""The active tab's URL as OSWorld reads it from Chrome's address bar (``getters._address_bar``):
the text an ``http(s)`` URL shows there has no scheme and gets ``goto_prefix``; a text with a
scheme is kept whole; a prefix ending in ``www.`` does not double the text's own. The cases are
the chrome tasks whose correct episodes scored 0 before (0d8b7de3, 59155008, f0b971a1,
a728a36e, b070486d, 93eabf48, 12086550 use ``goto_prefix`` ``https://www.`` or read a
``chrome://`` page)."""

import pytest

from vm_pool.evaluation.getters.browser import _address_bar
from vm_pool.evaluation.metrics.chrome import is_expected_active_tab

CASES = [
    ("https://www.nfl.com/standings/", {"goto_prefix": "https://www."},
     "https://www.nfl.com/standings/"),
    ("https://www.drugs.com/npc/", {"goto_prefix": "https://www."}, "https://www.drugs.com/npc/"),
    ("https://nfl.com/", {"goto_prefix": "https://www."}, "https://www.nfl.com/"),
    ("chrome://settings/appearance", {}, "chrome://settings/appearance"),
    ("chrome://settings/appearance", {"goto_prefix": "https://www."},
     "chrome://settings/appearance"),
    ("file:///home/user/page.html", {"goto_prefix": ""}, "file:///home/user/page.html"),
    ("https://www.google.com/search?q=tandem", {}, "https://www.google.com/search?q=tandem"),
    ("http://example.org/a", {"goto_prefix": None}, "example.org/a"),
]  # fmt: skip


@pytest.mark.parametrize(("url", "config", "read"), CASES)
def test_the_address_bar_reads_as_osworld_reads_it(url, config, read):
    assert _address_bar(url, config) == read


def test_a_correct_chrome_settings_episode_scores_1():
    read = _address_bar("chrome://settings/appearance", {})
    rule = {"type": "url", "url": "chrome://settings/appearance"}
    assert is_expected_active_tab(read, rule) == 1.0
    on_nfl = _address_bar("https://www.nfl.com/scores/", {"goto_prefix": "https://www."})
    assert is_expected_active_tab(on_nfl, {"type": "url", "url": "https://www.nfl.com/scores/"})
