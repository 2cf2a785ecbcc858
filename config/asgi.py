"""ASGI entry point: HTTP through Django, WebSockets through Channels, one server loop for both."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from conversations.auth import BrowserOriginValidator, WebSocketAuthMiddleware  # noqa: E402
from conversations.process import server_loop  # noqa: E402
from conversations.routing import websocket_urlpatterns  # noqa: E402

router = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": BrowserOriginValidator(
            WebSocketAuthMiddleware(URLRouter(websocket_urlpatterns))
        ),
    }
)


async def application(scope, receive, send):
    # The first connection of any kind adopts the server loop for turns and their upkeep
    # (Daphne has no lifespan events to do it at start-up).
    server_loop.bind()
    return await router(scope, receive, send)
