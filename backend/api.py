"""What every API view shares: pagination, the one error body, the API root.

Every error the API returns has the shape::

    {"error": {"status": 403, "code": "permission_denied", "message": "…", "details": …}}

``details`` is optional: field errors for validation, per-row errors for imports.
"""

from typing import Any

from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.pagination import PageNumberPagination
from rest_framework.response import Response
from rest_framework.views import exception_handler

from backend.errors import DomainError


class StandardPagination(PageNumberPagination):
    page_size_query_param = "page_size"
    max_page_size = 500


def error_body(status_code: int, code: str, message: str, details: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"status": status_code, "code": code, "message": message}
    if details is not None:
        error["details"] = details
    return {"error": error}


def error_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, DomainError):
        return Response(
            error_body(exc.status_code, exc.code, exc.message, exc.details), status=exc.status_code
        )
    if isinstance(exc, RequestDataTooBig):
        return Response(
            error_body(413, "too_large", str(exc) or "request body too large"),
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) or "Not found.")
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)
    response = exception_handler(exc, context)
    if response is None:
        return None
    assert isinstance(exc, exceptions.APIException)
    if isinstance(exc, exceptions.ValidationError):
        message = "The request is not valid; see details."
        details: Any = exc.detail
        code = "invalid"
    else:
        message = str(exc.detail)
        details = None
        code = exc.get_codes() if isinstance(exc.get_codes(), str) else exc.default_code
    response.data = error_body(response.status_code, str(code), message, details)
    return response
