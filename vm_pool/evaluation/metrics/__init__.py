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

Left out: OSWorld's other metrics (about 80, each used by one to six tasks), because they need
what we do not install (OCR, audio and video fingerprints, a formula engine, HTML parsing) or
read application state our getters do not fetch. compare_table's chart, pivot_table, filter
and sparkline rules raise MetricError (see ``table``).
"""

from collections.abc import Callable

from vm_pool.evaluation.metrics.archive import compare_archive
from vm_pool.evaluation.metrics.chrome import (
    is_expected_active_tab,
    is_expected_active_tab_approximate,
    is_expected_tabs,
    is_expected_url_pattern_match,
)
from vm_pool.evaluation.metrics.docs import (
    compare_docx_files,
    compare_docx_tables,
    compare_line_spacing,
)
from vm_pool.evaluation.metrics.errors import MetricError
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
from vm_pool.evaluation.metrics.images import check_image_size, compare_images
from vm_pool.evaluation.metrics.pdf import check_pdf_pages, compare_pdfs
from vm_pool.evaluation.metrics.slides import compare_pptx_files
from vm_pool.evaluation.metrics.table import compare_csv, compare_table

__all__ = ["METRICS", "MetricError"]

METRICS: dict[str, Callable[..., float]] = {
    metric.__name__: metric
    for metric in (
        compare_table,
        compare_csv,
        compare_pptx_files,
        compare_docx_files,
        compare_docx_tables,
        compare_line_spacing,
        compare_pdfs,
        check_pdf_pages,
        exact_match,
        match_in_list,
        is_in_list,
        fuzzy_match,
        literal_match,
        check_include_exclude,
        check_direct_json_object,
        check_list,
        check_json,
        check_json_settings,
        compare_text_file,
        diff_text_file,
        file_contains,
        is_expected_url_pattern_match,
        is_expected_tabs,
        is_expected_active_tab,
        is_expected_active_tab_approximate,
        compare_images,
        check_image_size,
        compare_archive,
    )
}
