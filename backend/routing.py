"""WebSocket routes."""

from django.urls import path

from annotation.consumers import NotificationConsumer

websocket_urlpatterns = [
    path("ws/notifications/", NotificationConsumer.as_asgi()),
]
