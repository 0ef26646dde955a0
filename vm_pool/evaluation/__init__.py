"""The evaluator of OSWorld tasks: getters gather what the desktop holds on its host; the
readers and metrics parse it in a jail of their own (``jail.py``), one short process per
evaluation.
"""
