"""The one exception a metric raises: the evaluator's options are wrong, not the agent."""


class MetricError(Exception):
    """A metric was called with options it cannot honour (unknown rule type, bad method, ...).

    A missing or unreadable *result* file is the agent's failure and scores 0 instead.
    """
