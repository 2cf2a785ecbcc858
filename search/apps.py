"""The search app: full-text search of what was said in conversations (above conversations and
selection, which never import it)."""

from django.apps import AppConfig


class SearchConfig(AppConfig):
    name = "search"
    verbose_name = "Search"

    def ready(self):
        # The event log indexes what it stores through this hook: conversations never imports
        # search.
        from conversations import hooks

        from .indexing import EventIndex
        from .models import SearchEntry

        hooks.index.register(EventIndex())
        # Its entries go with their conversation: the admin deletes them with it.
        hooks.record_parts.add(SearchEntry)
