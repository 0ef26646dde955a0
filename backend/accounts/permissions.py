"""DRF permission checks shared by every API view.

``TokenScopePermission`` applies to requests made with an access token: the view names the
resource it serves (``token_resource``) and the token must carry the matching scope. Views
with no ``token_resource`` (managing tokens themselves) refuse tokens, so a leaked token can
never mint another.
"""

from typing import Any

from rest_framework import permissions
from rest_framework.request import Request

from backend.accounts.models import AccessToken
from backend.accounts.tokens import token_allows


class TokenScopePermission(permissions.BasePermission):
    message = "This access token's scopes do not allow this request."

    def has_permission(self, request: Request, view: Any) -> bool:
        if not isinstance(request.auth, AccessToken):
            return True
        resource = getattr(view, "token_resource", None)
        if resource is None:
            self.message = "This endpoint needs a signed-in session, not an access token."
            return False
        write = request.method not in permissions.SAFE_METHODS
        return token_allows(request.auth, resource, write)
