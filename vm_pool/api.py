"""The desktop API: the pool as staff watch it, and stream tokens for the browser.

Who sees which desktop: staff (``is_staff``) and admins see every desktop; anyone else sees
only the desktop they hold a lease on, and "not found" for the others. Every stream is
view-only (design §6, §8): a desktop changes only through recorded decisions.
"""

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from vm_pool import streaming
from vm_pool.models import Desktop, DesktopStatus
from vm_pool.serializers import DesktopSerializer, StreamRequestSerializer, StreamSerializer


class DesktopViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    serializer_class = DesktopSerializer
    token_resource = "episodes"
    filterset_fields = ["status", "host", "template__name"]
    ordering_fields = ["id", "state_changed_at"]

    def get_queryset(self) -> QuerySet[Desktop]:
        user = self.request.user
        desktops = Desktop.objects.select_related("template", "leased_by")
        if user.is_staff or user.is_superuser:
            return desktops
        return desktops.filter(status=DesktopStatus.LEASED, leased_by_id=user.pk)

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
