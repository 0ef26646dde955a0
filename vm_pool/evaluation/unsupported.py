"""OSWorld getters and metrics Tandem leaves out on purpose, each with the reason.

``manage.py osworld_coverage`` prints the reason beside the tasks each one blocks (instead of
"not implemented yet"). An entry belongs here only when the piece needs something the desktops
or the evaluation jail do not have (a program or library Debian does not ship, a model, an
account), not when it is merely unwritten.
"""

UNSUPPORTED_GETTERS: dict[str, str] = {}

UNSUPPORTED_METRICS: dict[str, str] = {
    "compare_image_text": (
        "reads the text in a screenshot with EasyOCR, a neural OCR model (PyTorch and downloaded "
        "weights) that the evaluation jail does not have; a different OCR engine would read "
        "different text than the task's expected strings were tuned for"
    ),
}
