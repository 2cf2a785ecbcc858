"""A question's Slack message in Block Kit (built with slack_sdk's models, which check Slack's
limits): what Parley's page says of it (see reach.news), with buttons that answer a choice or a
confirm question, or that give the reader their answer link; once it is settled, the same message
saying who settled it, how and where, without buttons. A button's value names its question and
option, so that a click maps back to them (:func:`read_click`).

What people and agents wrote (the prompt, the input, option labels) goes out as plain text, which
Slack shows as it is: no formatting, no links, no @channel."""

import json
from dataclasses import dataclass

from slack_sdk.models.blocks import (
    ActionsBlock,
    ButtonElement,
    ContextBlock,
    HeaderBlock,
    MarkdownTextObject,
    PlainTextObject,
    SectionBlock,
)

from selection.models import Selection

from .news import News

# Slack's limits: buttons in one actions block, a button's text, a header, a text object.
BUTTONS_PER_BLOCK = 25
BUTTON_CHARS = 75
HEADER_CHARS = 150
TEXT_CHARS = 3000

CHOICE = "choice-"  # + the option's place
CONFIRM = {"confirm-yes": True, "confirm-no": False}
# In a channel, where the message has no one reader: the clicker is told their own link.
LINK = "answer-link"
# URL buttons: Slack opens the address and tells Parley of the click, which answers nothing.
OPENS_LINK = "open-answer-link"


@dataclass(frozen=True)
class Message:
    """A message's plain-text fallback (notifications, screen readers) and its blocks."""

    text: str
    blocks: list[dict]


@dataclass(frozen=True)
class Click:
    """What a button of Parley's asks for: an option of a choice question (by its place), a
    confirm question's yes or no, or (``link``) the clicker's own answer link."""

    selection_id: str
    option: int | None = None
    confirm: bool | None = None
    link: bool = False


def buttons_answer(selection: Selection) -> bool:
    """Whether its buttons answer it: one option of a choice, or yes or no. Other questions
    (several options, an answer of one's own, a path, text, a form) are answered on Parley's
    page, through the reader's answer link."""
    if selection.kind == Selection.Kind.CHOICE:
        return not selection.multiple and not selection.allow_freeform
    return selection.kind == Selection.Kind.CONFIRM


def question_message(news: News, *, direct: bool) -> Message:
    """The message that asks (a direct message to ``news.reader`` if ``direct``, else a post
    to the workspace's channel)."""
    blocks = [
        HeaderBlock(text=_cut(news.headline, HEADER_CHARS)),
        _plain_section(news.prompt),
        _plain_section(_what_to_do(news)),
        ContextBlock(
            elements=[
                PlainTextObject(text=f"Asked by {news.asked_by}, for {news.who_is_asked}."),
                PlainTextObject(
                    text=_cut(
                        f"In “{news.conversation.title}” ({news.workspace_name}).", TEXT_CHARS
                    )
                ),
                PlainTextObject(text=f"It expires {news.expires_text}."),
            ]
        ),
        _plain_section(f"What led to it: “{news.why}”"),
        *_buttons(news, direct=direct),
        _conversation_link(news),
    ]
    return Message(
        text=_cut(escape(f"{news.title}: {news.prompt}"), TEXT_CHARS), blocks=_dicts(blocks)
    )


def outcome_message(news: News) -> Message:
    """The message once its question is settled: who settled it, how and where
    (``news.headline`` for the cause "settled"), the question, and no buttons."""
    headline = news.headline
    blocks = [HeaderBlock(text=_cut(headline, HEADER_CHARS))]
    if len(headline) > HEADER_CHARS:
        blocks.append(_plain_section(headline))
    blocks += [
        _plain_section(news.prompt),
        ContextBlock(
            elements=[
                PlainTextObject(text=f"Asked by {news.asked_by}, for {news.who_is_asked}."),
                PlainTextObject(
                    text=_cut(
                        f"In “{news.conversation.title}” ({news.workspace_name}).", TEXT_CHARS
                    )
                ),
            ]
        ),
        _conversation_link(news),
    ]
    return Message(
        text=_cut(escape(f"{headline}. The question: {news.prompt}"), TEXT_CHARS),
        blocks=_dicts(blocks),
    )


def read_click(action: dict) -> Click | None:
    """What a clicked button of Parley's asks for; None for anything else (a URL button, an
    action Parley never made)."""
    action_id = str(action.get("action_id") or "")
    try:
        value = json.loads(action.get("value") or "")
    except (TypeError, ValueError):
        return None
    if not isinstance(value, dict) or not isinstance(value.get("s"), str):
        return None
    selection_id = value["s"]
    option = value.get("o")
    if action_id.startswith(CHOICE) and isinstance(option, int) and not isinstance(option, bool):
        return Click(selection_id, option=option)
    if action_id in CONFIRM and isinstance(value.get("a"), bool):
        return Click(selection_id, confirm=value["a"])
    if action_id == LINK:
        return Click(selection_id, link=True)
    return None


def escape(text: str) -> str:
    """Text safe in Slack's markup (mrkdwn): its three control characters escaped."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _what_to_do(news: News) -> str:
    if not news.options:
        return f"{news.kind_words}."
    lines = [f"{news.kind_words}:"]
    for option in news.options:
        detail = f": {option['description']}" if option.get("description") else ""
        lines.append(f"• {option['label']}{detail}")
    return "\n".join(lines)


def _buttons(news: News, *, direct: bool) -> list[ActionsBlock]:
    selection = news.selection
    if selection.kind == Selection.Kind.CONFIRM:
        buttons = [
            ButtonElement(
                text=label,
                action_id=action_id,
                value=_value(selection.pk, a=answer),
                style="primary" if answer else None,
            )
            for (action_id, answer), label in zip(CONFIRM.items(), ("Yes", "No"), strict=True)
        ]
    elif buttons_answer(selection):
        buttons = [
            ButtonElement(
                text=_cut(option["label"], BUTTON_CHARS),
                action_id=f"{CHOICE}{place}",
                value=_value(selection.pk, o=place),
            )
            for place, option in enumerate(news.options)
        ]
    elif direct:
        buttons = [
            ButtonElement(
                text="Answer in Parley", action_id=OPENS_LINK, url=news.answer_url, style="primary"
            )
        ]
    else:
        buttons = [
            ButtonElement(
                text="Answer in Parley",
                action_id=LINK,
                value=_value(selection.pk, l=True),
                style="primary",
            )
        ]
    return [
        ActionsBlock(block_id=f"answer-{n}", elements=buttons[start : start + BUTTONS_PER_BLOCK])
        for n, start in enumerate(range(0, len(buttons), BUTTONS_PER_BLOCK))
    ]


def _conversation_link(news: News) -> ContextBlock:
    return ContextBlock(
        elements=[MarkdownTextObject(text=f"<{news.conversation_url}|Open the conversation>")]
    )


def _value(selection_id: str, **what) -> str:
    return json.dumps({"s": selection_id, **what}, separators=(",", ":"))


def _plain_section(text: str) -> SectionBlock:
    return SectionBlock(text=PlainTextObject(text=_cut(text, TEXT_CHARS), emoji=False))


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _dicts(blocks) -> list[dict]:
    # to_dict() checks each block against Slack's limits (SlackObjectFormationError).
    return [block.to_dict() for block in blocks]
