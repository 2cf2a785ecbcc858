"""API views served from the runtime's database threads: DRF's whole request in one hop."""

from django.http import HttpResponse
from rest_framework.views import APIView

from .dbthreads import run_db


class PooledApiView(APIView):
    """A DRF view that Django awaits, its work done in the runtime's database threads.

    Under ASGI Django runs a sync view in a thread made for the request (which opens a
    database connection of its own, or takes one from the pool), then renders DRF's response
    in that thread in a second hop. A view built on this one is async to Django: DRF's
    dispatch as it is (authentication, permissions, parsing, the handler, its errors, the
    rendering) runs as one call in :mod:`conversations.dbthreads`, whose few threads live as
    long as the process, keep their connections, and bound how much of it requests may take
    at once. Its handlers stay DRF's sync methods, so serializers, authentication and the
    OpenAPI schema are as everywhere else in the API.

    For the requests people and bots make while turns run (answer, start, steer, stop, what is
    in flight, a page of events): what the pool does for them is the same kind of short work
    it does for turns. The rest of the API keeps Django's thread per request.
    """

    # Django marks the view a coroutine function (View.as_view) and awaits it.
    view_is_async = True

    async def dispatch(self, request, *args, **kwargs):
        return await run_db(self._dispatch_rendered, request, args, kwargs)

    def _dispatch_rendered(self, request, args, kwargs) -> HttpResponse:
        response = super().dispatch(request, *args, **kwargs)
        if not callable(getattr(response, "render", None)):
            return response
        # Rendered here, and handed on as the plain response it now is: Django would otherwise
        # render a template response in a thread of its own.
        response.render()
        return HttpResponse(response.content, status=response.status_code, headers=response.headers)
