"""The scripted OpenAI stand-in (tests/llm_server.py), driven by the official SDK, unmodified."""

import asyncio
import json

import httpx
import openai
import pytest

from tests.llm_server import (
    ModelServer,
    error,
    gated,
    held,
    malformed,
    text,
    tool_calls,
)

# The test server alone, no database: run once, in the SQLite pass.
pytestmark = pytest.mark.once

KEY = "sk-test-secret"
MESSAGES = [{"role": "user", "content": "Hello"}]


@pytest.fixture
def model_server():
    with ModelServer(api_key=KEY) as server:
        yield server
    assert server.errors == []


def client_for(server: ModelServer, api_key: str = KEY) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=server.base_url, api_key=api_key, max_retries=0, timeout=10)


async def create(client: openai.AsyncOpenAI, model: str = "gpt-test", **kwargs):
    return await client.chat.completions.create(
        model=model,
        messages=MESSAGES,
        stream=True,
        stream_options={"include_usage": True},
        **kwargs,
    )


async def collect(stream) -> list:
    async with asyncio.timeout(10):
        return [chunk async for chunk in stream]


async def wait_event(event, timeout: float = 10) -> bool:
    return await asyncio.to_thread(event.wait, timeout)


async def test_text_streams_in_several_deltas(model_server):
    model_server.script(text("The plan is ready for review.", usage=(12, 7)))
    async with client_for(model_server) as client:
        chunks = await collect(await create(client, temperature=0.2))

    with_choices = [c for c in chunks if c.choices]
    deltas = [c.choices[0].delta.content for c in with_choices if c.choices[0].delta.content]
    assert len(deltas) >= 4
    assert "".join(deltas) == "The plan is ready for review."
    assert with_choices[0].choices[0].delta.role == "assistant"
    assert with_choices[-1].choices[0].finish_reason == "stop"
    assert all(c.object == "chat.completion.chunk" and c.model == "gpt-test" for c in chunks)
    assert len({c.id for c in chunks}) == 1
    # The usage rides on a last chunk without choices; the others carry "usage": null.
    assert chunks[-1].choices == []
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (12, 7)
    assert chunks[-1].usage.total_tokens == 19
    assert all(c.usage is None for c in chunks[:-1])

    [body] = model_server.requests
    assert body["model"] == "gpt-test"
    assert body["messages"] == MESSAGES
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["temperature"] == 0.2
    assert model_server.headers[0]["authorization"] == f"Bearer {KEY}"
    assert model_server.remaining() == 0


async def test_wire_format_is_chunked_sse(model_server):
    """What the SDK reads, byte for byte: chunked SSE, ``data:`` lines, ``[DONE]``."""
    model_server.script(text("Hi there", pieces=2))
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.post(
            f"{model_server.base_url}/chat/completions",
            headers={"Authorization": f"Bearer {KEY}"},
            json={"model": "gpt-test", "messages": MESSAGES, "stream": True},
        )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["transfer-encoding"] == "chunked"
    events = response.text.split("\n\n")
    assert events[-2:] == ["data: [DONE]", ""]
    chunks = [json.loads(e.removeprefix("data: ")) for e in events[:-2]]
    assert [c["choices"][0]["delta"] for c in chunks] == [
        {"role": "assistant", "content": "", "refusal": None},
        {"content": "Hi t"},
        {"content": "here"},
        {},
    ]
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert chunks[0]["id"] == "chatcmpl-1"
    assert chunks[0]["system_fingerprint"] == "fp_test"
    assert chunks[0]["choices"][0]["logprobs"] is None
    assert all("usage" not in c for c in chunks)  # no include_usage: no usage field at all


async def test_parallel_tool_calls_stream_split_arguments(model_server):
    weather = {"city": "Paris", "unit": "celsius"}
    reply = tool_calls(("get_weather", weather), ("read_file", '{"path": "notes/plan.md"}'))
    model_server.script(reply)
    async with client_for(model_server) as client:
        chunks = await collect(await create(client))

    calls: dict[int, dict] = {}
    argument_pieces = 0
    for chunk in chunks:
        for choice in chunk.choices:
            for delta in choice.delta.tool_calls or []:
                call = calls.setdefault(delta.index, {"id": None, "name": "", "arguments": ""})
                if delta.id:
                    call["id"] = delta.id
                if delta.function and delta.function.name:
                    call["name"] += delta.function.name
                if delta.function and delta.function.arguments:
                    call["arguments"] += delta.function.arguments
                    argument_pieces += 1

    assert sorted(calls) == [0, 1]
    assert calls[0]["name"] == "get_weather"
    assert json.loads(calls[0]["arguments"]) == weather
    assert calls[1]["name"] == "read_file"
    assert calls[1]["arguments"] == '{"path": "notes/plan.md"}'
    assert calls[0]["id"].startswith("call_") and calls[1]["id"].startswith("call_")
    assert calls[0]["id"] != calls[1]["id"]
    assert [calls[0]["id"], calls[1]["id"]] == [c.id for c in reply.calls]
    assert argument_pieces > 6  # split over several chunks each
    first = chunks[0].choices[0].delta
    assert first.role == "assistant" and first.content is None  # no text: role + first call
    finishing = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishing[-1] == "tool_calls" and set(finishing[:-1]) == {None}
    assert chunks[-1].usage.total_tokens == 15


async def test_text_then_tool_call(model_server):
    model_server.script(tool_calls(("search", {"q": "x"}), content="Let me look."))
    async with client_for(model_server) as client:
        chunks = await collect(await create(client))
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == "Let me look."
    heads = [d for c in chunks if c.choices for d in c.choices[0].delta.tool_calls or [] if d.id]
    assert [h.function.name for h in heads] == ["search"]


async def test_errors_are_the_sdks_exceptions(model_server):
    model_server.script(
        error(
            429,
            "Rate limit reached for requests",
            type="requests",
            code="rate_limit_exceeded",
            headers={"retry-after": "1"},
        )
    )
    async with client_for(model_server) as client:
        with pytest.raises(openai.RateLimitError) as limited:
            await create(client)
        assert limited.value.response.headers["retry-after"] == "1"
        assert limited.value.code == "rate_limit_exceeded"
        assert limited.value.body == {
            "message": "Rate limit reached for requests",
            "type": "requests",
            "param": None,
            "code": "rate_limit_exceeded",
        }

    async with client_for(model_server, api_key="sk-wrong") as client:
        with pytest.raises(openai.AuthenticationError) as refused:
            await create(client)
    assert refused.value.status_code == 401
    assert refused.value.code == "invalid_api_key"
    assert refused.value.body["message"] == (
        "Incorrect API key provided: sk-wr****ng. "
        "You can find your API key at https://platform.openai.com/account/api-keys."
    )

    async with client_for(model_server) as client:
        with pytest.raises(openai.NotFoundError) as missing:
            await create(client, model="gpt-nope")
    assert missing.value.code == "model_not_found"
    assert "`gpt-nope` does not exist" in missing.value.body["message"]

    # All three were recorded; only the 429 took a scripted reply.
    assert [r["model"] for r in model_server.requests] == ["gpt-test", "gpt-test", "gpt-nope"]
    assert model_server.headers[1]["authorization"] == "Bearer sk-wrong"
    assert model_server.remaining() == 0


async def test_no_reply_left_fails_clearly(model_server):
    async with client_for(model_server) as client:
        with pytest.raises(openai.InternalServerError) as failed:
            await create(client)
    assert "the test scripted no reply for request 1" in failed.value.body["message"]


async def test_held_reply_sees_the_client_close(model_server):
    reply = held("Thinking about it")
    model_server.script(reply)
    async with client_for(model_server) as client:
        stream = await create(client)
        seen = ""
        async with asyncio.timeout(10):
            async for chunk in stream:
                seen += chunk.choices[0].delta.content or ""
                if seen == "Thinking about it":
                    break
        assert await wait_event(reply.started)
        assert not reply.closed_by_client.is_set()
        await stream.close()
        assert await wait_event(reply.closed_by_client), "the server never saw the close"
    assert reply.closed_at is not None


async def test_gated_reply_goes_on_when_released(model_server):
    reply = gated("Checking", tool_calls(("get_weather", {"city": "Oslo"})))
    model_server.script(reply)
    async with client_for(model_server) as client:
        stream = await create(client)
        async with asyncio.timeout(10):
            first = [await anext(stream), await anext(stream)]
            assert first[1].choices[0].delta.content == "Checking"
            assert await wait_event(reply.started)
            pending = asyncio.ensure_future(anext(stream))
            await asyncio.sleep(0.3)  # keep-alive comments flow, but no chunk
            assert not pending.done()
            reply.release()
            rest = [await pending, *[chunk async for chunk in stream]]
    arguments = "".join(
        d.function.arguments or ""
        for c in rest
        if c.choices
        for d in c.choices[0].delta.tool_calls or []
    )
    assert json.loads(arguments) == {"city": "Oslo"}
    assert [c.choices[0].finish_reason for c in rest if c.choices][-1] == "tool_calls"
    assert not reply.closed_by_client.is_set()


async def test_malformed_stream_raises_while_iterating(model_server):
    model_server.script(malformed())
    async with client_for(model_server) as client:
        stream = await create(client)
        # The SDK hands the data line to json.loads: a JSONDecodeError (a ValueError).
        with pytest.raises(json.JSONDecodeError):
            await collect(stream)


async def test_not_streamed_and_models(model_server):
    model_server.script(text("Whole answer"), tool_calls(("f", {"a": 1})))
    async with client_for(model_server) as client:
        completion = await client.chat.completions.create(model="gpt-test", messages=MESSAGES)
        assert completion.object == "chat.completion"
        assert completion.choices[0].message.content == "Whole answer"
        assert completion.choices[0].finish_reason == "stop"
        assert completion.usage.total_tokens == 15
        called = await client.chat.completions.create(model="gpt-test", messages=MESSAGES)
        assert called.choices[0].message.content is None
        assert called.choices[0].message.tool_calls[0].function.arguments == '{"a": 1}'
        assert called.choices[0].finish_reason == "tool_calls"
        models = await client.models.list()
    assert [(m.id, m.object, m.owned_by) for m in models.data] == [
        ("gpt-test", "model", "parley-tests")
    ]


def test_wait_requests_is_bounded():
    with ModelServer() as server:
        server.script(text("ok"))
        response = httpx.post(
            f"{server.base_url}/chat/completions",
            headers={"Authorization": "Bearer sk-test-secret"},
            json={"model": "gpt-test", "messages": MESSAGES},
            timeout=10,
        )
        assert response.json()["choices"][0]["message"]["content"] == "ok"
        assert server.wait_requests(1, timeout=1)[0]["model"] == "gpt-test"
        with pytest.raises(AssertionError, match="got 1 chat-completions request"):
            server.wait_requests(2, timeout=0.2)


def test_stop_releases_held_replies():
    server = ModelServer().start()
    reply = held("wait")
    server.script(reply)
    with httpx.Client(timeout=10) as http:
        with http.stream(
            "POST",
            f"{server.base_url}/chat/completions",
            headers={"Authorization": "Bearer sk-test-secret"},
            json={"model": "gpt-test", "messages": MESSAGES, "stream": True},
        ) as response:
            assert reply.started.wait(10)
            server.stop()  # must not hang on the held reply
            body = response.read().decode()
    assert body.endswith("data: [DONE]\n\n")
    assert not reply.closed_by_client.is_set()
    assert server.errors == []
