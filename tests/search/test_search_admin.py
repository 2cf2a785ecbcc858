"""The search index in the Django admin: listed and shown, never added, changed or removed."""

from django.contrib.admin.utils import quote

from search.models import SearchEntry
from tests.helpers import started, store, stored_turn

ENTRIES = "/admin/search/searchentry/"


def test_the_admin_shows_search_entries_read_only(admin_client, people, conversation):
    turn = stored_turn(conversation, people.alice.user, "Deploy <b>friday</b>?")
    store(turn, [started(turn), ("message.completed", {"text": "Deployed."})])
    asked, replied = SearchEntry.objects.order_by("id")
    listing = admin_client.get(ENTRIES)
    assert listing.status_code == 200
    html = listing.content.decode()
    assert "Deploy &lt;b&gt;friday&lt;/b&gt;?" in html and "<b>friday" not in html  # escaped
    # Newest first, as search finds them, each linking to its place in its conversation.
    assert html.index("Deployed.") < html.index("Deploy &lt;b&gt;")
    assert f'href="/conversations/{conversation.pk}/?seq={asked.seq}"' in html
    page = admin_client.get(f"{ENTRIES}{quote(asked.pk)}/change/")
    assert page.status_code == 200
    shown = page.content.decode()
    assert "deploy b friday b" in shown and 'name="_save"' not in shown and "<textarea" not in shown
    assert admin_client.get(f"{ENTRIES}add/").status_code == 403
    assert admin_client.get(f"{ENTRIES}{asked.pk}/delete/").status_code == 403
    changed = admin_client.post(f"{ENTRIES}{asked.pk}/change/", {"words": "nothing", "seq": 9})
    assert changed.status_code == 403
    removed = admin_client.post(
        ENTRIES, {"action": "delete_selected", "_selected_action": [asked.pk, replied.pk]}
    )
    assert removed.status_code in (200, 302)
    assert SearchEntry.objects.filter(words="deploy b friday b").count() == 1
    assert SearchEntry.objects.count() == 2
