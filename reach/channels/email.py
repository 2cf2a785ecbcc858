"""Email, through Django's email framework (SMTP from ``PARLEY_EMAIL_URL``): the question, who
asked and why, its options, when it expires, and the reader's own answer link. The delivery's id
is the message's Message-ID, the same on every attempt, so that a repeat can be told."""

import smtplib
from urllib.parse import urlsplit

from django.conf import settings
from django.core.mail import EmailMultiAlternatives, get_connection
from django.template.loader import render_to_string

from ..models import Delivery
from ..news import News
from .base import Result, Skip, still_wanted

# SMTP replies that no retry will change (RFC 5321's 5yz) fail the delivery at once.
PERMANENT = range(500, 600)


def message_id(delivery_id: str) -> str:
    host = urlsplit(settings.PARLEY_PUBLIC_URL).hostname or "parley"
    return f"<{delivery_id}@{host}>"


class EmailChannel:
    def prepare(self, delivery: Delivery):
        if not settings.PARLEY_EMAIL_URL:
            return Skip("Email is not set up (PARLEY_EMAIL_URL).")
        if skip := still_wanted(delivery):
            return skip
        news = News(cause=delivery.cause, selection=delivery.selection, reader=delivery.recipient)
        context = {"news": news, "public_url": settings.PARLEY_PUBLIC_URL}
        message = EmailMultiAlternatives(
            subject=news.title,
            body=render_to_string("reach/email/question.txt", context),
            from_email=settings.DEFAULT_FROM_EMAIL,
            to=[delivery.address],
            headers={
                "Message-ID": message_id(delivery.pk),
                "X-Parley-Delivery": delivery.pk,
                "X-Parley-Question": delivery.selection_id,
                # Automated: vacation responders stay quiet (RFC 3834).
                "Auto-Submitted": "auto-generated",
            },
        )
        message.attach_alternative(
            render_to_string("reach/email/question.html", context), "text/html"
        )
        return message

    def send(self, message: EmailMultiAlternatives) -> Result:
        try:
            with get_connection(fail_silently=False) as connection:
                connection.send_messages([message])
        except smtplib.SMTPRecipientsRefused as refused:
            code, reply = next(iter(refused.recipients.values()))
            return Result(ok=False, response=_said(code, reply), final=code in PERMANENT)
        except smtplib.SMTPResponseException as error:
            return Result(
                ok=False,
                response=_said(error.smtp_code, error.smtp_error),
                final=error.smtp_code in PERMANENT,
            )
        return Result(
            ok=True, reference=message.extra_headers["Message-ID"], response="250 accepted"
        )

    def remember(self, delivery: Delivery, result) -> None:
        pass


def _said(code: int, reply) -> str:
    text = reply.decode(errors="replace") if isinstance(reply, bytes) else str(reply)
    return f"{code} {text}"
