"""Slack, through the official ``slack_sdk``: a question for a person is a direct message to the
Slack user with their email (``users.lookupByEmail``, kept in ``SlackUser``), one for anyone a
post to the workspace's channel (its address ``#<channel id>``); once the question is settled,
each message it made is updated (``chat.update``) to say who settled it, how and where, without
its buttons. A message's "channel:ts" is its delivery's reference, which the update edits."""

from dataclasses import dataclass

from django.conf import settings
from django.utils import timezone
from slack_sdk.errors import SlackApiError, SlackClientError

from conversations.access import membership_of

from ..models import Delivery
from ..news import News, name_of
from ..slack_api import error_code, is_final, retry_after, said, slack_client
from ..slack_messages import Message, outcome_message, question_message
from ..slack_people import known_slack_id, normal_email, slack_user_remember
from .base import Defer, Result, Skip, still_wanted

# How long an update waits, at most, before looking again at the message it edits.
DEFER_SECONDS = 30.0


@dataclass(frozen=True)
class Post:
    """A message to post: to ``channel`` (a channel's or a Slack user's id), or, with no id
    known yet, to the Slack user with ``email``, looked up first."""

    message: Message
    channel: str | None = None
    email: str = ""
    who: str = ""


@dataclass(frozen=True)
class Update:
    """A posted message to edit."""

    message: Message
    channel: str
    ts: str


@dataclass(frozen=True)
class Found:
    """What a send learned: the Slack user with ``email`` ("" for nobody)."""

    email: str
    slack_id: str


@dataclass(frozen=True)
class NoSlackUser(Skip):
    """Slack knows nobody with the person's email: nothing to send (remembered, so that the
    next question does not ask again at once)."""

    email: str


class SlackChannel:
    def prepare(self, delivery: Delivery):
        if not (settings.PARLEY_SLACK_BOT_TOKEN and settings.PARLEY_SLACK_SIGNING_SECRET):
            return Skip(
                "Slack is not set up (PARLEY_SLACK_BOT_TOKEN, PARLEY_SLACK_SIGNING_SECRET)."
            )
        if delivery.cause == Delivery.Cause.SETTLED:
            return _update(delivery)
        if skip := still_wanted(delivery):
            return skip
        if delivery.address.startswith("#"):
            news = News(cause=delivery.cause, selection=delivery.selection)
            return Post(message=question_message(news, direct=False), channel=delivery.address[1:])
        recipient = delivery.recipient
        if recipient is None:
            return Skip("Its person no longer exists.")
        who, email = name_of(recipient), normal_email(recipient.email)
        if not email:
            return Skip(f"{who} has no email to be found on Slack by.")
        slack_id = known_slack_id(recipient)
        if slack_id == "":
            return Skip(f"{who} has no Slack user with their email.")
        news = News(cause=delivery.cause, selection=delivery.selection, reader=recipient)
        return Post(
            message=question_message(news, direct=True),
            channel=slack_id,
            email=email if slack_id is None else "",
            who=who,
        )

    def send(self, outgoing: Post | Update) -> Result | Skip:
        client = slack_client()
        if isinstance(outgoing, Update):
            try:
                client.chat_update(
                    channel=outgoing.channel,
                    ts=outgoing.ts,
                    text=outgoing.message.text,
                    blocks=outgoing.message.blocks,
                )
            except SlackApiError as error:
                return _failed(error)
            except (SlackClientError, OSError) as error:
                return _unreachable(error)
            return Result(ok=True, reference=f"{outgoing.channel}:{outgoing.ts}", response="ok")

        found = None
        channel = outgoing.channel
        if channel is None:
            try:
                user = client.users_lookupByEmail(email=outgoing.email)["user"]
            except SlackApiError as error:
                if error_code(error) == "users_not_found":
                    return NoSlackUser(
                        reason=f"{outgoing.who} has no Slack user with their email.",
                        email=outgoing.email,
                    )
                return _failed(error)
            except (SlackClientError, OSError) as error:
                return _unreachable(error)
            channel = user["id"]
            found = Found(email=outgoing.email, slack_id=channel)
        try:
            posted = client.chat_postMessage(
                channel=channel,
                text=outgoing.message.text,
                blocks=outgoing.message.blocks,
                unfurl_links=False,
                unfurl_media=False,
            )
        except SlackApiError as error:
            return _failed(error, learned=found)
        except (SlackClientError, OSError) as error:
            return _unreachable(error, learned=found)
        return Result(
            ok=True, reference=f"{posted['channel']}:{posted['ts']}", response="ok", learned=found
        )

    def remember(self, delivery: Delivery, result) -> None:
        if delivery.recipient_id is None:
            return
        if isinstance(result, NoSlackUser):
            slack_user_remember(user=delivery.recipient, email=result.email, slack_id="")
        elif isinstance(result, Result) and isinstance(result.learned, Found):
            learned = result.learned
            slack_user_remember(
                user=delivery.recipient, email=learned.email, slack_id=learned.slack_id
            )


def _update(delivery: Delivery) -> Update | Skip | Defer:
    """The edit a settled question makes to a message it posted: once that message is sent
    (deferred while it is pending; skipped if it never was)."""
    original = delivery.updates
    if original is None:
        return Skip("It has no message to update.")
    if original.status == Delivery.Status.PENDING:
        wait = (original.next_attempt_at - timezone.now()).total_seconds()
        return Defer(min(max(wait, 1.0), DEFER_SECONDS))
    if original.status != Delivery.Status.SENT or ":" not in original.reference:
        return Skip("Its message was never posted.")
    reader = original.recipient
    if reader is not None and not _may_see(reader, delivery.selection):
        # Nothing reaches a person who may no longer see the conversation.
        return Skip(f"{name_of(reader)} may no longer see it.")
    channel, ts = original.reference.split(":", 1)
    news = News(cause=delivery.cause, selection=delivery.selection, reader=reader)
    return Update(message=outcome_message(news), channel=channel, ts=ts)


def _may_see(user, selection) -> bool:
    workspace_id = selection.conversation.workspace_id
    return user.is_active and membership_of(user=user, workspace_id=workspace_id) is not None


def _failed(error: SlackApiError, *, learned=None) -> Result:
    return Result(
        ok=False,
        response=said(error),
        final=is_final(error),
        retry_after=retry_after(error),
        learned=learned,
    )


def _unreachable(error: Exception, *, learned=None) -> Result:
    return Result(ok=False, response=f"Slack unreachable: {type(error).__name__}", learned=learned)
