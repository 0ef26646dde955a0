"""WebSocket routes."""

from django.urls import path

from annotation.episodes.consumers import EpisodeConsumer, NotificationConsumer

websocket_urlpatterns = [
    path("ws/notifications/", NotificationConsumer.as_asgi()),
    path("ws/episodes/<int:episode_id>/", EpisodeConsumer.as_asgi()),
]
