"""OSWorld's general metrics: values, JSON, text files, lists, URLs, images, archives."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from vm_pool.evaluation.metrics import METRICS, MetricError
from vm_pool.evaluation.metrics.archive import compare_archive
from vm_pool.evaluation.metrics.chrome import (
    is_expected_active_tab,
    is_expected_active_tab_approximate,
    is_expected_tabs,
    is_expected_url_pattern_match,
)
from vm_pool.evaluation.metrics.general import (
    check_direct_json_object,
    check_include_exclude,
    check_json,
    check_json_settings,
    check_list,
    compare_text_file,
    diff_text_file,
    exact_match,
    file_contains,
    fuzzy_match,
    is_in_list,
    literal_match,
    match_in_list,
)
from vm_pool.evaluation.metrics.images import (
    check_image_size,
    compare_images,
    structural_similarity,
)

PUBLISHED = {
    "compare_table", "compare_pptx_files", "check_direct_json_object", "check_include_exclude",
    "exact_match", "compare_docx_files", "compare_pdfs", "is_expected_url_pattern_match",
    "check_list", "compare_images", "check_json_settings", "compare_text_file",
    "is_expected_active_tab", "compare_docx_tables", "diff_text_file", "is_expected_tabs",
    "compare_csv", "compare_line_spacing", "check_json", "match_in_list", "is_in_list",
    "file_contains", "literal_match", "compare_archive",
}  # fmt: skip


def test_metrics_registry_holds_callables_under_osworld_names() -> None:
    assert set(METRICS) >= PUBLISHED
    assert "infeasible" not in METRICS
    for name, metric in METRICS.items():
        assert callable(metric)
        assert metric.__name__ == name


def _write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def test_value_matches() -> None:
    assert exact_match("42", {"expected": "42"}) == 1.0
    assert exact_match("41", {"expected": "42"}) == 0.0
    assert match_in_list("b", {"expected": ["a", "b"]}) == 1.0
    assert match_in_list("c", {"expected": ["a", "b"]}) == 0.0
    assert is_in_list(["a", "b"], {"expected": "b"}) == 1.0
    assert is_in_list(["a"], {"expected": "b"}) == 0.0
    assert is_in_list(None, {"expected": "b"}) == 0.0
    assert fuzzy_match("abcd", {"expected": "abcd"}) == 1.0
    assert fuzzy_match("abcd", {"expected": "wxyz"}) == 0.0


def test_literal_match() -> None:
    assert literal_match(3, "3") == 1.0
    assert literal_match("Yes", "yes") == 0.0
    assert literal_match("Yes", "yes", ignore_case=True) == 1.0
    assert literal_match(["A", 1], ("a", "1"), type="list", ignore_case=True) == 1.0
    assert literal_match(["A"], ["A", "B"], type="list") == 0.0
    assert literal_match("A", ["A"], type="list") == 0.0
    with pytest.raises(MetricError):
        literal_match("a", "a", type="dict")


def test_check_include_exclude() -> None:
    rules = {"include": ["installed"], "exclude": ["error"]}
    assert check_include_exclude("package installed", rules) == 1.0
    assert check_include_exclude("installed with error", rules) == 0.0
    assert check_include_exclude("nothing", rules) == 0.0
    assert check_include_exclude(None, rules) == 0.0


def test_check_direct_json_object() -> None:
    rules = {"expected": {"theme": "dark", "size": 12}}
    assert check_direct_json_object({"theme": "dark", "size": 12, "x": 1}, rules) == 1.0
    assert check_direct_json_object("{'theme': 'dark', 'size': 12}", rules) == 1.0
    assert check_direct_json_object({"theme": "light", "size": 12}, rules) == 0.0
    assert check_direct_json_object(None, rules) == 0.0
    assert check_direct_json_object("not json", rules) == 0.0
    failed = {"expected": {"theme": "__EVALUATION_FAILED__"}}
    assert check_direct_json_object({"theme": "__EVALUATION_FAILED__"}, failed) == 0.0
    loose = {"expect_in_result": True, "expected": {"city": ["Paris", "Lyon"], "note": "ok"}}
    assert check_direct_json_object({"city": "Lyon", "note": "all ok"}, loose) == 1.0
    assert check_direct_json_object({"city": ["Rome", "Paris"], "note": "ok"}, loose) == 1.0
    assert check_direct_json_object({"city": "Rome", "note": "ok"}, loose) == 0.0
    assert check_direct_json_object({"city": "Paris"}, loose) == 0.0


def test_check_list(tmp_path: Path) -> None:
    rules = {"expect": [r"^apt\b", "vim"], "unexpect": ["emacs"]}
    assert check_list(_write(tmp_path / "a.txt", "apt 1\nvim 9\n"), rules) == 1.0
    assert check_list(_write(tmp_path / "b.txt", "apt 1\n"), rules) == 0.0
    assert check_list(_write(tmp_path / "c.txt", "apt vim\nemacs\n"), rules) == 0.0
    assert check_list(None, rules) == 0.0


def test_check_json(tmp_path: Path) -> None:
    path = _write(tmp_path / "s.json", json.dumps({"editor": {"fontSize": 14, "theme": "x"}}))
    good = {"expect": [{"key": ["editor", "fontSize"], "method": "eq", "ref": 14}]}
    assert check_json(path, good) == 1.0
    assert check_json(path, {"expect": [{"key": ["editor", "tab"], "method": "eq", "ref": 2}]}) == 0
    unexpect = {"unexpect": [{"key": ["editor", "theme"], "method": "eq", "ref": "x"}]}
    assert check_json(path, unexpect) == 0.0
    absent = {"unexpect": [{"key": ["nowhere"], "method": "eq", "ref": "x"}]}
    assert check_json(path, absent) == 1.0
    yaml_path = _write(tmp_path / "c.yaml", "editor:\n  fontSize: 14\n")
    assert check_json(yaml_path, good, is_yaml=True) == 1.0
    assert check_json(_write(tmp_path / "bad.json", "{"), good) == 0.0
    assert check_json(None, good) == 0.0


def test_check_json_settings(tmp_path: Path) -> None:
    path = _write(tmp_path / "settings.json", json.dumps({"a": 1, "b": [2]}))
    assert check_json_settings(path, {"expected": {"b": [2]}}) == 1.0
    assert check_json_settings(path, {"expected": {"b": [3]}}) == 0.0
    assert check_json_settings(path, {"expected": {"c": 1}}) == 0.0
    assert check_json_settings(None, {"expected": {"a": 1}}) == 0.0


def test_text_files(tmp_path: Path) -> None:
    gold = _write(tmp_path / "gold.txt", "Hello\tWorld\n")
    assert compare_text_file(_write(tmp_path / "a.txt", "Hello\tWorld\n"), gold) == 1.0
    spaced = _write(tmp_path / "b.txt", "hello   world")
    assert compare_text_file(spaced, gold) == 0.0
    assert compare_text_file(spaced, gold, ignore_blanks=True, ignore_case=True) == 1.0
    assert compare_text_file(None, gold) == 0.0

    lines = _write(tmp_path / "lines.txt", "a\nb\nc\nd\n")
    assert diff_text_file(_write(tmp_path / "same.txt", "a\nb\nc\nd\n"), lines) == 1.0
    assert diff_text_file(_write(tmp_path / "half.txt", "a\nb\nx\ny\n"), lines) == 0.5
    assert diff_text_file(_write(tmp_path / "none.txt", "x\n"), lines) == 0.0
    assert diff_text_file(None, lines) == 0.0

    assert file_contains(lines, {"expected": ["b\nc", "d"]}) == 1.0
    assert file_contains(lines, {"expected": ["b", "z"]}) == 0.0
    assert file_contains(None, {"expected": ["b"]}) == 0.0
    assert file_contains(str(tmp_path / "absent.txt"), {"expected": ["b"]}) == 0.0


def test_url_pattern_match() -> None:
    rules = {"expected": [r"/flights", r"from=SFO"]}
    assert is_expected_url_pattern_match("https://x.com/flights?from=SFO", rules) == 1.0
    assert is_expected_url_pattern_match({"url": "https://x.com/flights?from=SFO"}, rules) == 1
    assert is_expected_url_pattern_match("https://x.com/flights?from=LAX", rules) == 0.0
    assert is_expected_url_pattern_match(None, rules) == 0.0
    assert is_expected_url_pattern_match(["not", "a", "url"], rules) == 0.0


def test_active_tab_compares_normalised_urls() -> None:
    rule = {"type": "url", "url": "https://www.airbnb.com/s/homes"}
    assert is_expected_active_tab({"url": "https://airbnb.com.sg/s/homes"}, rule) == 1.0
    assert is_expected_active_tab("https://www.airbnb.co.uk/s/homes", rule) == 1.0
    assert is_expected_active_tab("https://www.airbnb.com/s/flights", rule) == 0.0
    assert is_expected_active_tab("https://mail.airbnb.com/s/homes", rule) == 0.0
    assert is_expected_active_tab(None, rule) == 0.0
    with pytest.raises(MetricError):
        is_expected_active_tab("https://a.com", {"type": "title", "url": "x"})
    approximate = {"type": "url", "url": "https://a.com/p?q=1"}
    assert is_expected_active_tab_approximate("https://a.com/p?q=2", approximate) == 1.0
    assert is_expected_active_tab_approximate("https://a.com/other", approximate) == 0.0


def test_expected_tabs_in_any_order() -> None:
    rule = {"type": "url", "urls": ["https://a.com/", "https://b.org/x"]}
    tabs = [{"url": "http://b.org/x"}, {"url": "https://www.a.com"}]
    assert is_expected_tabs(tabs, rule) == 0.0  # scheme differs for b.org
    tabs = [{"url": "https://b.org/x"}, {"url": "https://www.a.com"}]
    assert is_expected_tabs(tabs, rule) == 1.0
    assert is_expected_tabs(tabs[:1], rule) == 0.0
    assert is_expected_tabs([], rule) == 0.0


def _png(path: Path, pixels: np.ndarray) -> str:
    Image.fromarray(pixels.astype(np.uint8)).save(path)
    return str(path)


def _reference_ssim(x: np.ndarray, y: np.ndarray) -> float:
    """scikit-image's structural_similarity, window by window, for the defaults OSWorld uses."""
    x, y = x.astype(float), y.astype(float)
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    values = []
    for i in range(x.shape[0] - 6):
        for j in range(x.shape[1] - 6):
            a, b = x[i : i + 7, j : j + 7], y[i : i + 7, j : j + 7]
            cov = np.cov(a.ravel(), b.ravel())
            values.append(
                (2 * a.mean() * b.mean() + c1)
                * (2 * cov[0, 1] + c2)
                / ((a.mean() ** 2 + b.mean() ** 2 + c1) * (cov[0, 0] + cov[1, 1] + c2))
            )
    return float(np.mean(values))


def test_ssim_matches_the_reference_definition() -> None:
    rng = np.random.default_rng(7)
    x = rng.integers(0, 256, (20, 24))
    y = np.clip(x + rng.integers(-40, 40, x.shape), 0, 255)
    assert structural_similarity(x, y) == pytest.approx(_reference_ssim(x, y), abs=1e-9)
    assert structural_similarity(x, x) == pytest.approx(1.0)


def test_compare_images(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    noise = rng.integers(0, 256, (32, 32))
    gold = _png(tmp_path / "gold.png", noise)
    assert compare_images(_png(tmp_path / "same.png", noise), gold) == pytest.approx(1.0)
    other = _png(tmp_path / "other.png", rng.integers(0, 256, (32, 32)))
    assert compare_images(other, gold) < 0.1
    assert compare_images(None, gold) == 0.0
    assert compare_images(other, gold, reference_base_result=0.5) == 0.0
    assert compare_images(gold, gold, reference_base_result=0.5) == pytest.approx(1.0)


def test_check_image_size(tmp_path: Path) -> None:
    path = _png(tmp_path / "i.png", np.zeros((30, 40)))
    assert check_image_size(path, {"width": 40, "height": 30}) == 1.0
    assert check_image_size(path, {"width": 40}) == 1.0
    assert check_image_size(path, {"width": 41, "height": 30}) == 0.0
    assert check_image_size(None, {"width": 40}) == 0.0


def test_compare_archive(tmp_path: Path) -> None:
    def archive(name: str, files: dict[str, str]) -> str:
        folder = tmp_path / name
        folder.mkdir()
        for file_name, text in files.items():
            (folder / file_name).write_text(text)
        return shutil.make_archive(str(tmp_path / name), "zip", folder)

    gold = archive("gold", {"a.txt": "one", "b.txt": "two"})
    assert compare_archive(archive("same", {"a.txt": "one", "b.txt": "two"}), gold) == 1.0
    assert compare_archive(archive("half", {"a.txt": "one", "b.txt": "TWO"}), gold) == 0.5
    assert compare_archive(archive("names", {"a.txt": "one"}), gold) == 0.0
    assert compare_archive(None, gold) == 0.0
    with pytest.raises(MetricError):
        compare_archive(gold, gold, file_type="audio")
