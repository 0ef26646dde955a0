"""Does the flywheel turn: a project's figures, the chart of model versions, training stages
and offline evaluation of a version.
Floor 4: imports every floor below it.
"""
