"""The model alone: rollout batches, their runs on desktops, validation, stop rules, figures,
and a rollout handed to annotators from its first wrong step.
Floor 3: imports episodes/, projects/ and models/; never datasets/.
"""
