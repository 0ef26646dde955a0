"""Audio files' metrics, as OSWorld scores them: an MP3's ID3 tags.

``compare_audios`` is left out: it needs librosa's audio features, which the jail does not have
(``vm_pool.evaluation.unsupported``).
"""

from typing import Any

from mutagen.easyid3 import EasyID3

from vm_pool.evaluation.bounds import check_size
from vm_pool.evaluation.metrics.rules import match_value_to_rule


def check_mp3_meta(result: str | None, meta: dict[str, dict[str, Any]]) -> float:
    """1 when each tag named in ``meta`` (``title``, ``artist``, … as mutagen's EasyID3 names
    them) matches its value rule; a tag with several values is read as them joined by ``,``, a
    missing one as ``""``. A file without an ID3 tag cannot be read: it scores 0."""
    if result is None:
        return 0.0
    check_size(result)
    tags = EasyID3(result)
    for key, rule in meta.items():
        value = tags.get(key, "")
        if isinstance(value, list):
            value = ",".join(value)
        if not match_value_to_rule(value, rule):
            return 0.0
    return 1.0
