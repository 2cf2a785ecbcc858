"""Top-level URLs: pages, the admin, the REST API and its documentation, and the endpoints for
the load balancer and Prometheus."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.shortcuts import redirect
from django.templatetags.static import static
from django.urls import include, path
from django.views.decorators.http import require_safe

from accounts import sso_pages
from conversations import pages
from core import health
from core.api import DocsView, SchemaView
from search.pages import search_page
from selection.pages import answer_link_page, waiting_page


@require_safe
def favicon(request):
    """Parley's icon, for the pages that name none (the admin's, the API's browsable pages):
    browsers ask for /favicon.ico then."""
    return redirect(static("parley/favicon.svg"))


urlpatterns = [
    path("", pages.home, name="home"),
    path("conversations/new/", pages.conversation_new, name="conversation-new"),
    path("conversations/<str:conversation_id>/", pages.conversation_page, name="conversation"),
    path("waiting/", waiting_page, name="waiting"),
    path("search/", search_page, name="search"),
    path("answer/<str:selection_id>/", answer_link_page, name="answer-link"),
    # The login pages, the site's and the admin's, with single sign-on and the password switch.
    path("login/", sso_pages.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/login/", sso_pages.admin_login),
    path("admin/", admin.site.urls),
    path("api/", include("conversations.urls")),
    path("api/", include("selection.urls")),
    path("api/", include("activity.urls")),
    path("api/", include("search.urls")),
    path("", include("reach.urls")),
    path("", include("accounts.urls")),
    path("api/schema/", SchemaView.as_view(), name="api-schema"),
    # Swagger UI with its start-up script at ?script (a file, not inline: see api_docs.html).
    path(
        "api/docs/",
        DocsView.as_view(url_name="api-schema", template_name="api_docs.html"),
        name="api-docs",
    ),
    path("favicon.ico", favicon, name="favicon"),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", health.metrics, name="metrics"),
]

handler400 = "core.error_pages.invalid_request"
handler403 = "core.error_pages.forbidden"
handler404 = "core.error_pages.not_found"
handler500 = "core.error_pages.internal_error"
