"""The server loop's handler of exceptions nobody retrieved."""

import asyncio
import logging

from django.core.exceptions import RequestAborted

from core import process


def test_a_request_dropped_by_a_stopping_server_is_no_error_but_anything_else_is(caplog):
    loop = asyncio.new_event_loop()
    try:
        loop.set_exception_handler(process._unless_a_dropped_request)
        with caplog.at_level(logging.ERROR, logger="asyncio"):
            # What Django's ASGI handler leaves when the server cancels it mid-request.
            loop.call_exception_handler(
                {"message": "Task exception was never retrieved", "exception": RequestAborted()}
            )
            assert caplog.records == []
            loop.call_exception_handler(
                {"message": "Task exception was never retrieved", "exception": ValueError("x")}
            )
    finally:
        loop.close()
    assert [record.getMessage() for record in caplog.records] == [
        "Task exception was never retrieved"
    ]
