"""WebSocket routes of the selection app: a person's own socket (see selection.consumers)."""

from django.urls import path

from .consumers import PersonConsumer

websocket_urlpatterns = [
    path("ws/me/", PersonConsumer.as_asgi()),
]
