"""Asking people, as the turn context offers it: ``ctx.ask`` and its shortcuts, checked against
the question kinds' one definition (conversations.questions), stored through the questions hook,
and waited for in parking, holding no thread; and what became of a question (``Answer``)."""

import asyncio
import logging
from dataclasses import dataclass
from functools import partial
from typing import Any

from django.conf import settings

from core.dbthreads import run_db, run_db_retrying
from core.errors import ApplicationError
from core.process import process_id

from .. import hooks, selectors
from ..questions import clean_question, new_selection_id
from .parking import parking

logger = logging.getLogger(__name__)

# An Answer's status when the question was refused for the person's question rate.
RATE_LIMITED = "rate_limited"


@dataclass(frozen=True)
class Answer:
    """What became of a question.

    ``status`` is ``answered`` (``value`` holds the answer: a path relative to the question's
    root, an option's value or a list of them, text, true/false, or the form's fields),
    ``dismissed`` (the person closed it), ``declined`` (an explicit no), ``expired``,
    ``cancelled``, ``unavailable`` (a non-interactive turn: nobody can answer),
    ``limit_reached`` (the turn asked as many questions as it may) or ``rate_limited`` (too
    many questions were asked on behalf of the person the turn acts for, of late: see
    ``PARLEY_QUESTION_RATE``; nothing was asked).
    """

    status: str
    value: Any = None
    answered_by: str | None = None
    selection_id: str | None = None

    @property
    def answered(self) -> bool:
        return self.status == "answered"

    @classmethod
    def of(cls, outcome: dict) -> "Answer":
        """From a question's outcome, as parking returns it."""
        return cls(
            status=outcome["status"],
            value=outcome["answer"],
            answered_by=outcome["answered_by"],
            selection_id=outcome["selection"],
        )


class Asking:
    """The turn context's questions (a part of TurnContext, which provides the journal, the
    writer and the turn's attributes this uses)."""

    __slots__ = ()

    async def ask(
        self,
        kind: str,
        prompt: str,
        *,
        addressee: str | None = None,
        timeout: float | None = None,
        escalate: bool | None = None,
        selection_id: str | None = None,
        **fields,
    ) -> Answer:
        """Ask a person something and wait for the answer, holding no thread.

        ``kind`` and ``fields`` are as conversations.questions defines them: ``path``
        (``mode`` file, folder or any, inside ``root``), ``choice`` (``options``: labels, or
        label, value (the label if omitted) and description; ``multiple``;
        ``allow_freeform``; ``min_choices``, ``max_choices``), ``text``, ``confirm`` or
        ``form`` (a flat JSON ``schema``). ``addressee`` (a username) lets only that person,
        or an owner, answer. ``timeout`` overrides the default expiry. ``escalate`` says
        whether the workspace's owners are called on if it is still waiting near its end
        (None: ``PARLEY_ESCALATE_QUESTIONS`` decides). ``selection_id`` stores the question
        under an id the caller made beforehand (with ``questions.new_selection_id``), to find
        it again from elsewhere.
        Returns an Answer; only Stop interrupts the wait (by cancelling the agent).
        Raises ValueError for a malformed question.
        """
        self._check()
        if not self.interactive:
            return Answer(status="unavailable")
        if self._questions >= settings.PARLEY_MAX_QUESTIONS_PER_TURN:
            return Answer(status="limit_reached")
        said, asked = self._said, {"prompt": prompt}
        recorded = self._replay_step("ask", kind, asked)
        if recorded is not None and "error" in recorded.outcome:
            raise ValueError(recorded.outcome["error"])
        if recorded is not None and "refused" in recorded.outcome:
            return Answer(status=recorded.outcome["refused"])
        if recorded is not None:
            # Asked before the turn was resumed: its answer is stored, or is still to come.
            await self.end_message()
            self._questions += 1
            outcome = await parking.wait_again(
                recorded.outcome["selection"], turn_id=self.turn_id, releasable=self._releasable
            )
        else:
            common = {"addressee": addressee, "timeout": timeout, "escalate": escalate}
            try:
                question, person = await self._prepare(kind, prompt, fields, common)
            except ValueError as exc:
                # Refused before it was asked: journaled too, so a resumed turn is refused again.
                self._writer.emit_step(
                    self._new_step("ask", kind, asked, said, {"error": str(exc)})
                )
                raise
            # Everything said so far is stored before the question, so it reads in order.
            await self.end_message()
            await self._writer.drain()
            self._questions += 1
            selection_id = selection_id or new_selection_id()
            step = self._new_step("ask", kind, asked, said, {})
            # Ready for the wake-up before the question is stored: someone may answer the
            # moment selection.requested is published.
            with parking.expecting(selection_id):
                try:
                    await run_db_retrying(
                        partial(
                            hooks.questions.get().store,
                            selection_id=selection_id,
                            turn_id=self.turn_id,
                            ordinal=self._questions,
                            fields=question,
                            addressee=person,
                            timeout_seconds=timeout or settings.PARLEY_SELECTION_TIMEOUT_SECONDS,
                            process=process_id(),
                            step=step,
                            escalate=escalate,
                        )
                    )
                except ApplicationError as exc:
                    if exc.status != 429:
                        raise
                    outcome = None
                else:
                    # What the question was made of is stored: a parked turn keeps none of it.
                    del fields, common, question, person
                    outcome = await parking.wait(
                        selection_id, turn_id=self.turn_id, releasable=self._releasable
                    )
            if outcome is None:
                # Too many questions asked for the person of late (PARLEY_QUESTION_RATE):
                # nothing was stored; journaled, so that a resumed turn is told the same.
                self._questions -= 1
                self._writer.emit_step({**step, "outcome": {"refused": RATE_LIMITED}})
                return Answer(status=RATE_LIMITED)
            outcome = {"selection": selection_id, **outcome}
        self._catch_up_on_steering()
        return Answer.of(outcome)

    async def _prepare(self, kind: str, prompt: str, fields: dict, common: dict):
        """The question's fields and its addressee (a user, or None). Raises ValueError for a
        malformed question or an addressee who may not answer."""
        given = {name: value for name, value in common.items() if value is not None}
        question = clean_question(
            kind=kind, prompt=prompt, files_root=self.files_root, **fields, **given
        )
        addressee = common["addressee"]
        if addressee is None:
            return question, None
        person = await run_db(
            selectors.acting_member, workspace_id=self._workspace_id, username=addressee
        )
        if person is None:
            raise ValueError(f"{addressee!r} cannot answer questions in this workspace.")
        return question, person

    async def settle_outstanding(self) -> list[Answer]:
        """For an agent driven from outside its process (see external.agent), which cannot run
        again what it had done when its turn is resumed: stop replaying where the turn stands,
        and wait (holding no thread) until every question it had asked is settled. Returns
        what became of each, in the order they were asked."""
        journal = self._journal
        if self._replay is not None:
            self._go_live()
        if journal is None:
            return []
        answers = []
        for step in journal.steps:
            if step.kind != "ask" or "selection" not in step.outcome:
                continue
            outcome = await parking.wait_again(
                step.outcome["selection"], turn_id=self.turn_id, releasable=False
            )
            answers.append(Answer.of(outcome))
        return answers

    def _catch_up_on_steering(self) -> None:
        """Read steering sent while the turn waited, in case a wake-up was lost on the way;
        beside the agent, which goes on at once (what is read reaches it at a later step)."""

        async def read():
            try:
                rows = await run_db(selectors.steering_after, turn_id=self.turn_id, after_seq=0)
            except Exception:
                # The runner's periodic catch-up reads it later.
                logger.warning("Could not read the steering of turn %s", self.turn_id)
                return
            for seq, text in rows:
                self._receive_steering(seq, text)

        task = asyncio.get_running_loop().create_task(read())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def select_path(self, prompt: str, *, mode: str = "file", root: str = "", **kw) -> Answer:
        """Ask for a file (or a ``folder``, or ``any``) inside ``root``."""
        return await self.ask("path", prompt, mode=mode, root=root, **kw)

    async def choose(self, prompt: str, options: list, **kw) -> Answer:
        """Ask to choose among ``options`` (``multiple=True`` for several)."""
        return await self.ask("choice", prompt, options=options, **kw)

    async def text(self, prompt: str, **kw) -> Answer:
        """Ask for a typed answer."""
        return await self.ask("text", prompt, **kw)

    async def confirm(self, prompt: str, **kw) -> Answer:
        """Ask yes or no; the answer's value is True or False."""
        return await self.ask("confirm", prompt, **kw)

    async def form(self, prompt: str, schema: dict, **kw) -> Answer:
        """Ask for a small form described by a flat JSON schema."""
        return await self.ask("form", prompt, schema=schema, **kw)
