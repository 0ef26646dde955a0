"""The base of every error Tandem's domain code raises on purpose.

Domain modules (the queue, the importer, …) raise subclasses with an HTTP status and a short
machine-readable code; the API turns them into its one error body without each view having
to know them.
"""

from typing import Any


class DomainError(Exception):
    status_code = 400
    code = "invalid"

    def __init__(self, message: str, details: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details
