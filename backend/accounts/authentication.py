"""DRF authentication by personal access token: ``Authorization: Bearer tdm_…``."""

from rest_framework import authentication, exceptions
from rest_framework.request import Request

from backend.accounts.models import AccessToken, User
from backend.accounts.tokens import TokenError, authenticate_token


class AccessTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[User, AccessToken] | None:
        header = authentication.get_authorization_header(request).decode(errors="replace")
        if not header:
            return None
        keyword, _, value = header.partition(" ")
        if keyword.lower() not in {"bearer", "token"}:
            return None
        try:
            token = authenticate_token(value.strip())
        except TokenError as error:
            raise exceptions.AuthenticationFailed(str(error)) from error
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword
