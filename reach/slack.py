"""Slack's interactions endpoint (``/integrations/slack/interactions/``): a click on a question's
button arrives here, signed with the Slack app's signing secret. A missing, wrong or old signature
(over five minutes: a replay) is 401 and changes nothing, and counts as a failed sign-in from its
address (core.lockout). A click is answered as the person the Slack user is (matched by email),
with their rights (see reach.slack_answers); what the clicker is to be told goes back through the
payload's ``response_url`` as an ephemeral message, which only they see. Slack wants the request
answered within 3 s: it is, with an empty 200, and the reply is posted after."""

import asyncio
import json
import logging
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from urllib.parse import parse_qs

from django.conf import settings
from django.http import HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from slack_sdk.errors import SlackClientError
from slack_sdk.signature import SignatureVerifier
from slack_sdk.webhook import WebhookClient

from core.dbthreads import run_db
from core.lockout import LockedOut, attempt_from_request, checked

from .slack_answers import UNKNOWN_PERSON, slack_click_answer
from .slack_messages import read_click
from .slack_people import person_of_slack_id, person_with_email, slack_email_of

logger = logging.getLogger(__name__)

SLACK_UNREACHABLE = "Parley could not ask Slack who you are just now: try again. Nothing changed."

# Ephemeral replies go out here, after the request is answered.
REPLY_TIMEOUT_SECONDS = 10
_replies = ThreadPoolExecutor(max_workers=4, thread_name_prefix="parley-slack-reply")


def _error(status: int, code: str, message: str) -> JsonResponse:
    return JsonResponse({"error": {"code": code, "message": message}}, status=status)


@csrf_exempt
@require_POST
async def slack_interactions(request):
    """A Slack interaction: 200 with an empty body once handled (whatever the clicker is told
    goes to ``response_url``); 401 for a bad signature, 429 for an address locked out, 400 for
    a body that is no interaction, 404 while Slack is not set up."""
    secret = settings.PARLEY_SLACK_SIGNING_SECRET
    if not (secret.strip() and settings.PARLEY_SLACK_BOT_TOKEN):
        return _error(404, "not_found", "Slack is not set up here.")
    verify = partial(_signed, secret, request.body, dict(request.headers))
    try:
        signed = await run_db(checked, attempt_from_request(request), verify)
    except LockedOut as locked:
        response = _error(429, locked.code, locked.message)
        response["Retry-After"] = str(locked.retry_after)
        return response
    if not signed:
        return _error(
            401,
            "authentication_failed",
            "The request's Slack signature is missing, wrong, or too old to be accepted.",
        )
    try:
        payload = json.loads(parse_qs(request.body.decode())["payload"][0])
        slack_id = str(payload["user"]["id"])
        actions = list(payload.get("actions") or [])
    except (UnicodeDecodeError, KeyError, IndexError, TypeError, ValueError):
        return _error(400, "invalid", "Send a Slack interaction: a form with its JSON payload.")
    if payload.get("type") != "block_actions":
        return HttpResponse(status=200)  # nothing of Parley's: acknowledged
    for click in filter(None, map(read_click, actions)):
        tell = await _answer(slack_id, click)
        if tell and payload.get("response_url"):
            asyncio.get_running_loop().run_in_executor(
                _replies, _tell, str(payload["response_url"]), tell
            )
    return HttpResponse(status=200)


def _signed(secret: str, body: bytes, headers: dict) -> bool:
    """Whether Slack signed this body, lately (within five minutes)."""
    try:
        return SignatureVerifier(secret).is_valid_request(body, headers)
    except (UnicodeDecodeError, ValueError):  # a body, or a timestamp, that Slack never sends
        return False


async def _answer(slack_id: str, click) -> str | None:
    """Answer ``click`` as the person ``slack_id`` is; returns what to tell them."""
    user = await run_db(person_of_slack_id, slack_id)
    if user is None:
        try:
            email = await asyncio.to_thread(slack_email_of, slack_id)
        except (SlackClientError, OSError) as error:
            logger.warning("users.info for a click failed: %s", type(error).__name__)
            return SLACK_UNREACHABLE
        user = await run_db(person_with_email, email=email, slack_id=slack_id)
    if user is None:
        logger.info("A Slack click by %s, whom nobody in Parley matches, refused", slack_id)
        return UNKNOWN_PERSON
    return await run_db(slack_click_answer, user=user, click=click)


def _tell(response_url: str, text: str) -> None:
    """Post an ephemeral reply (only the clicker sees it), leaving the message as it is."""
    try:
        sent = WebhookClient(response_url, timeout=REPLY_TIMEOUT_SECONDS).send(
            text=text, response_type="ephemeral", replace_original=False
        )
    except Exception as error:  # a reply lost is logged, never raised into the loop
        logger.warning("An ephemeral reply to Slack failed: %s", type(error).__name__)
        return
    if sent.status_code != 200:
        logger.warning("An ephemeral reply to Slack was refused: HTTP %s", sent.status_code)
