"""WebSocket routes of the selection app: a person's own socket (see selection.people)."""

from django.urls import path

from .people import PersonConsumer

websocket_urlpatterns = [
    path("ws/me/", PersonConsumer.as_asgi()),
]
