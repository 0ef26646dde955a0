"""Account endpoints: who am I, and my personal access tokens (session only)."""

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from backend.accounts.models import AccessToken
from backend.accounts.serializers import (
    AccessTokenSerializer,
    MeSerializer,
    NewAccessTokenSerializer,
)
from backend.accounts.tokens import issue_token, revoke_token
from backend.errors import DomainError


class MeView(APIView):
    token_resource = "projects"

    @extend_schema(responses=MeSerializer)
    def get(self, request: Request) -> Response:
        return Response(MeSerializer(request.user).data)


class AccessTokenViewSet(
    mixins.ListModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Create, list and revoke your own tokens. Tokens cannot manage tokens: sign in for this."""

    serializer_class = AccessTokenSerializer
    token_resource = None

    def get_queryset(self) -> QuerySet[AccessToken]:
        return AccessToken.objects.filter(user=self.request.user)

    @extend_schema(request=AccessTokenSerializer, responses={201: NewAccessTokenSerializer})
    def create(self, request: Request) -> Response:
        body = AccessTokenSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        try:
            token, clear = issue_token(request.user, data["name"], data["scopes"], data["days"])
        except ValueError as error:
            raise DomainError(str(error)) from error
        out = NewAccessTokenSerializer(token).data
        out["token"] = clear
        return Response(out, status=status.HTTP_201_CREATED)

    def destroy(self, request: Request, pk: str) -> Response:
        token = self.get_object()
        revoke_token(token)
        return Response(AccessTokenSerializer(token).data)
