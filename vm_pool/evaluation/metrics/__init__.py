"""OSWorld's metric functions, reimplemented with light libraries.

A metric scores what the agent left behind: ``metric(result, expected, **options) -> float``
when the task's evaluator has an ``expected``, ``metric(result, **options)`` when it has none
(this is how OSWorld calls them). ``result`` and ``expected`` are what the getters return: a
local file path for file getters (vm_file, cloud_file, cache_file), or None when the file is
missing (which scores 0, as in OSWorld); a list of paths for ``multi`` getters; a string for
command output; a dict for ``rule`` getters; and so on. Scores are 0 or 1, or a similarity in
between, with the same meaning, option names and defaults as OSWorld's.

MetricError means the evaluator's options are wrong (an unknown rule type, a bad method); it is
never a verdict on the agent. ``infeasible`` is not a metric: the evaluator handles it.

Left out on purpose, each with its reason: ``vm_pool.evaluation.unsupported`` (OCR, audio and
video fingerprints, running the desktop's own code). compare_table's filter and sparkline
rules, which no published task uses, raise MetricError (see ``table``). Where a verdict here
differs from OSWorld's on purpose (OSWorld crashes on an input a correct episode can produce),
the place says "Deliberate difference from OSWorld", and ``DIFFERENCES.md`` lists them all.
"""

import importlib
from collections.abc import Callable, Iterator, Mapping

from vm_pool.evaluation.metrics.errors import MetricError

__all__ = ["METRICS", "MetricError"]

_MODULES: dict[str, str] = {
    "check_accessibility_tree": "accessibility",
    "compare_archive": "archive",
    "check_mp3_meta": "audio",
    "check_gnome_favorite_apps": "basic_os",
    "check_moved_jpgs": "basic_os",
    "is_in_vm_clickboard": "basic_os",
    "is_utc_0": "basic_os",
    "check_font_size": "chrome",
    "check_history_deleted": "chrome",
    "is_added_to_steam_cart": "chrome",
    "is_cookie_deleted": "chrome",
    "is_expected_active_tab": "chrome",
    "is_expected_active_tab_approximate": "chrome",
    "is_expected_bookmarks": "chrome",
    "is_expected_installed_extensions": "chrome",
    "is_expected_search_query": "chrome",
    "is_expected_tabs": "chrome",
    "is_expected_url_pattern_match": "chrome",
    "is_shortcut_on_desktop": "chrome",
    "check_config_status": "configs",
    "compare_config": "configs",
    "compare_docx_files": "docs",
    "compare_docx_tables": "docs",
    "compare_line_spacing": "docs",
    "check_direct_json_object": "general",
    "check_include_exclude": "general",
    "check_json": "general",
    "check_json_settings": "general",
    "check_list": "general",
    "compare_text_file": "general",
    "diff_text_file": "general",
    "exact_match": "general",
    "file_contains": "general",
    "fuzzy_match": "general",
    "is_in_list": "general",
    "literal_match": "general",
    "match_in_list": "general",
    "check_brightness_decrease_and_structure_sim": "gimp",
    "check_contrast_increase_and_structure_sim": "gimp",
    "check_file_exists_and_structure_sim": "gimp",
    "check_green_background": "gimp",
    "check_image_file_size": "gimp",
    "check_image_mirror": "gimp",
    "check_palette_and_structure_sim": "gimp",
    "check_saturation_increase_and_structure_sim": "gimp",
    "check_structure_sim": "gimp",
    "check_structure_sim_resized": "gimp",
    "check_structure_sim_with_threshold": "gimp",
    "check_textbox_on_leftside": "gimp",
    "check_triangle_position": "gimp",
    "compare_image_list": "gimp",
    "compare_htmls": "htmls",
    "check_image_size": "images",
    "compare_images": "images",
    "check_auto_saving_time": "impress",
    "check_left_panel": "impress",
    "check_page_number_colors": "impress",
    "check_presenter_console_disable": "impress",
    "check_slide_orientation_Portrait": "impress",
    "check_transition": "impress",
    "evaluate_presentation_fill_to_rgb_distance": "impress",
    "check_pdf_pages": "pdf",
    "compare_pdfs": "pdf",
    "compare_pdf_images": "pdf_images",
    "check_csv": "records",
    "run_sqlite3": "records",
    "check_image_stretch_and_center": "slide_pictures",
    "compare_pptx_files": "slides",
    "compare_csv": "table",
    "compare_table": "table",
    "check_line_number": "texts",
    "compare_conference_city_in_order": "texts",
    "compare_epub": "texts",
    "compare_python_pure_text": "texts",
    "compare_result_files": "texts",
    "compare_zip_files": "texts",
    "check_thunderbird_filter": "thunderbird",
    "check_thunderbird_folder": "thunderbird",
    "check_thunderbird_prefs": "thunderbird",
    "check_global_key_play_pause": "vlc",
    "check_one_instance_when_started_from_file": "vlc",
    "check_play_and_exit": "vlc",
    "check_qt_bgcone": "vlc",
    "check_qt_max_volume": "vlc",
    "check_qt_minimal_view": "vlc",
    "check_qt_slider_colours": "vlc",
    "is_vlc_fullscreen": "vlc",
    "is_vlc_playing": "vlc",
    "is_vlc_recordings_folder": "vlc",
    "check_json_keybindings": "vscode",
    "is_extension_installed": "vscode",
    "check_highlighted_words": "writer",
    "check_italic_font_size_14": "writer",
    "check_tabstops": "writer",
    "compare_docx_images": "writer",
    "compare_font_names": "writer",
    "compare_subscript_contains": "writer",
    "contains_page_break": "writer",
    "evaluate_colored_words_in_tables": "writer",
    "evaluate_strike_through_last_paragraph": "writer",
    "find_default_font": "writer",
    "has_page_numbers_in_footers": "writer",
    "is_first_line_centered": "writer",
    "compare_docx_files_and_ignore_new_lines": "writer_text",
    "compare_references": "writer_text",
    "compare_unique_train_records": "writer_text",
    "fuzzy_place_math": "writer_text",
}


class _Metrics(Mapping[str, Callable[..., float]]):
    """The metrics by name, each imported with its module when first asked for."""

    def __getitem__(self, name: str) -> Callable[..., float]:
        module = importlib.import_module(f"{__name__}.{_MODULES[name]}")
        metric: Callable[..., float] = getattr(module, name)
        return metric

    def __iter__(self) -> Iterator[str]:
        return iter(_MODULES)

    def __len__(self) -> int:
        return len(_MODULES)


METRICS: Mapping[str, Callable[..., float]] = _Metrics()
