"""One annotator of the claim benchmark in a process of its own (``spawn``: a fresh
interpreter and connection, as a real client's request has). Kept apart from ``claim``, which
imports Django's models at its top: a spawned process imports this module before Django is set
up."""

from typing import Any


def run(username: str, warmup: int, timed: int, start_line: Any, out: Any) -> None:
    """Claim as ``username`` (``claim._Annotator``); put the timed claims in ms, or the error,
    on ``out``."""
    from tests.bench import setup_django

    try:
        setup_django()
        from backend.accounts.models import User  # Django: set up just above
        from tests.bench.claim import _Annotator  # Django: as above

        annotator = _Annotator(User.objects.get(username=username), warmup, timed, start_line)
        annotator.run()  # in this process's main thread
        if annotator.error is not None:
            raise annotator.error
        out.put(("claims", [s * 1000 for s in annotator.claim_seconds]))
    except BaseException as error:  # noqa: BLE001 - reported to the parent, which raises it
        start_line.abort()
        out.put(("error", f"{username}: {type(error).__name__}: {error}"))
