"""Staff without the permission for it are refused by the admin's question pages with a 403 (not
a server error), and its actions are not offered to them: nothing changes."""

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from conversations import services
from selection.models import Selection
from selection.services import selection_request

QUESTIONS = "/admin/selection/selection/"


@pytest.fixture
def question(people, conversation):
    turn, _ = services.turn_start(conversation=conversation, user=people.bob.user, input="hi")
    return selection_request(
        selection_id="s_perm1perm1perm1pe",
        turn_id=turn.pk,
        ordinal=1,
        fields={"kind": "text", "prompt": "Well?"},
        timeout_seconds=60,
        process=turn.runner,
    )


def staff(client, username: str, *permissions: str):
    """``client`` logged in as a staff member who holds only these permissions."""
    user = get_user_model().objects.create_user(username, password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=permissions))
    client.force_login(user)
    return client


def still_pending(question) -> bool:
    question.refresh_from_db()
    return question.status == Selection.Status.PENDING and question.resolved_seq is None


@pytest.mark.parametrize("permissions", [(), ("view_selection",)], ids=["none", "view-only"])
def test_staff_who_may_not_change_questions_get_403_for_answering_and_removing(
    client, question, permissions
):
    staff(client, "eve", *permissions)
    answer = f"{QUESTIONS}{question.pk}/answer/"
    delete = f"{QUESTIONS}{quote(question.pk)}/delete/"
    assert client.get(answer).status_code == 403
    assert client.post(answer, {"action": "answer", "answer-text": "mine"}).status_code == 403
    assert client.post(answer, {"action": "dismiss"}).status_code == 403
    assert client.get(delete).status_code == 403
    assert client.post(delete, {"post": "yes"}).status_code == 403
    assert still_pending(question)


def test_a_viewer_of_questions_sees_them_without_the_answer_link_or_the_actions(client, question):
    staff(client, "eve", "view_selection")
    page = client.get(f"{QUESTIONS}{quote(question.pk)}/change/").content.decode()
    assert "Well?" in page and "Answer this question" not in page
    listing = client.get(QUESTIONS).content.decode()
    for action in ("expire_selected", "delete_selected", "dismiss_selected"):
        assert f'value="{action}"' not in listing
        done = client.post(QUESTIONS, {"action": action, "_selected_action": [question.pk]})
        assert done.status_code in (200, 302)
    assert still_pending(question)


def test_who_may_change_but_not_delete_answers_and_cannot_cancel(client, question):
    staff(client, "eve", "view_selection", "change_selection")
    delete = f"{QUESTIONS}{quote(question.pk)}/delete/"
    assert client.get(delete).status_code == 403
    listing = client.get(QUESTIONS).content.decode()
    assert 'value="expire_selected"' in listing and 'value="delete_selected"' not in listing
    answer = f"{QUESTIONS}{question.pk}/answer/"
    done = client.post(answer, {"action": "answer", "answer-text": "Mine"})
    assert done.status_code == 302
    question.refresh_from_db()
    assert question.status == Selection.Status.ANSWERED and question.answer == "Mine"
