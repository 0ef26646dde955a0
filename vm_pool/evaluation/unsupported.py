"""OSWorld getters and metrics Tandem leaves out on purpose, each with the reason.

``manage.py osworld_coverage`` prints the reason beside the tasks each one blocks (instead of
"not implemented yet"). An entry belongs here only when the piece needs something the desktops
or the evaluation jail do not have (a program or library Debian does not ship, a model, an
account), not when it is merely unwritten.
"""

UNSUPPORTED_GETTERS: dict[str, str] = {}

UNSUPPORTED_METRICS: dict[str, str] = {
    "check_python_file_by_test_suite": (
        "imports the desktop's Python files and runs their code in the process that writes the "
        "verdict, which that code could then write itself; and the games it tests need pygame, "
        "which the jail does not have"
    ),
    "compare_audios": "needs librosa's audio features (MFCC) and fastdtw, not installed here",
    "compare_image_text": (
        "reads the text in a screenshot with EasyOCR, a neural OCR model (PyTorch and downloaded "
        "weights) that the evaluation jail does not have; a different OCR engine would read "
        "different text than the task's expected strings were tuned for"
    ),
    "compare_videos": (
        "needs OpenCV to decode the videos frame by frame, and imagehash; neither is installed here"
    ),
}
