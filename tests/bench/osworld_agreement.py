"""``osworld_metric_agreement``: how often Tandem's OSWorld metrics give OSWorld's own verdict.

The same measurement as tests/vm_pool/test_osworld_differential.py (shared code in
``tests.support.osworld_differential``): generated inputs in the option combinations published
tasks use, both implementations on each, weighted by the published tasks using each metric,
deliberate differences excluded. Also reported: how many metrics and cases were compared.
"""

from tests.support import osworld_differential as differential

GOALS = {"osworld_metric_agreement": "≥ 0.99"}


def run() -> dict[str, float | int]:
    results = differential.measure_all()
    print(differential.table(results))
    return {
        "osworld_metric_agreement": round(differential.weighted_agreement(results), 4),
        "osworld_metrics_compared": len(results),
        "osworld_metric_cases": sum(len(r.counted) for r in results),
    }
