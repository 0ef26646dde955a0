"""The desktop API: the pool's desktops, each to those who may watch it, and view-only streams.

Who sees which desktop is a rule about projects, of which the pool knows nothing: it is the function
named by ``settings.TANDEM_DESKTOP_VISIBILITY`` (``annotation.projects.access.visible_desktops``:
the desktop a user holds, the desktops of the episodes they may view, every desktop to admins),
loaded once. A desktop outside the rule is "not found", for its stream too. Every stream is
view-only (design §6, §8): a desktop changes only through recorded
decisions.
"""

import functools
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from django.utils.module_loading import import_string
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from vm_pool import streaming
from vm_pool.models import Desktop, DesktopTemplate
from vm_pool.serializers import (
    DesktopSerializer,
    DesktopTemplateSerializer,
    StreamRequestSerializer,
    StreamSerializer,
)

DesktopRule = Callable[[Any], QuerySet[Desktop]]


@functools.cache
def visibility_rule() -> DesktopRule:
    rule: DesktopRule = import_string(settings.TANDEM_DESKTOP_VISIBILITY)
    return rule


class DesktopTemplateViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    """The desktop templates a project may run its tasks on (``GET /api/desktop-templates/``):
    what a manager chooses from when creating or editing a project."""

    serializer_class = DesktopTemplateSerializer
    token_resource = "projects"
    pagination_class = None

    def get_queryset(self) -> QuerySet[DesktopTemplate]:
        return DesktopTemplate.objects.order_by("name")


class DesktopViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    serializer_class = DesktopSerializer
    token_resource = "episodes"
    filterset_fields = ["status", "host", "template__name"]
    ordering_fields = ["id", "state_changed_at"]

    def get_queryset(self) -> QuerySet[Desktop]:
        if getattr(self, "swagger_fake_view", False):  # the schema generator has no user
            return Desktop.objects.none()
        desktops = visibility_rule()(self.request.user)
        return desktops.select_related("template", "leased_by")

    @extend_schema(request=StreamRequestSerializer, responses={201: StreamSerializer})
    @action(detail=True, methods=["post"])
    def stream(self, request: Request, pk: str) -> Response:
        desktop = self.get_object()
        body = StreamRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        if not body.validated_data["view_only"]:
            raise streaming.StreamNotAllowed(
                "Desktops are streamed view-only: every change to a desktop is a recorded decision."
            )
        stream = streaming.open_stream(desktop, request.user)
        return Response(StreamSerializer(stream).data, status=status.HTTP_201_CREATED)
