"""A turn's journal, and its replay: how a turn taken over by another process (or by this one
after a restart) is rebuilt from what is stored, as Temporal and DBOS rebuild a workflow.

The agent's ``run()`` is executed again from the start. Every context call that completed
before returns its recorded outcome at once, emitting nothing: text the agent says is matched
against the turn's stored ``message.delta`` text, and tool calls, questions, steering taken in
and recorded steps against its TurnSteps, in order. Once everything stored is matched, the turn
runs live. A replay that does something else than what is stored has diverged (the agent's code
changed, or it branched on something that is not recorded, such as the clock): it raises
JournalMismatch, and the turn fails without writing anything in the past.
"""

import hashlib
from dataclasses import dataclass, field

import orjson


class JournalMismatch(Exception):
    """A resumed agent did something else than its journal records."""


def digest(arguments) -> str:
    """A short, stable fingerprint of a step's arguments: keys sorted, since what PostgreSQL's
    jsonb gives back to a resumed turn has its keys in another order."""
    return hashlib.sha256(orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS)).hexdigest()[:32]


@dataclass(frozen=True)
class Step:
    index: int
    kind: str
    name: str
    digest: str
    said: int
    outcome: dict

    def describe(self) -> str:
        return f"{self.kind} {self.name!r}" if self.name else self.kind


@dataclass
class Journal:
    """What a turn had done, as stored."""

    steps: list[Step] = field(default_factory=list)
    # Everything it had said, in order (the text of its message.delta events).
    text: str = ""
    # How many messages it had ended (message.completed), and tool calls it had started.
    messages: int = 0
    calls: int = 0
    # Tool calls started but never completed (the process stopped in the middle).
    open_calls: list[dict] = field(default_factory=list)
    # Steering sent to the turn that the agent had not taken in yet: (seq, input).
    steering_waiting: list[tuple[int, str]] = field(default_factory=list)
    steering_taken: set[int] = field(default_factory=set)

    @classmethod
    def from_progress(cls, progress) -> "Journal":
        """From what conversations.selectors.turn_progress read."""
        steps = [Step(**row) for row in progress.steps]
        taken = {seq for s in steps if s.kind == "steering" for seq in s.outcome["seqs"]}
        return cls(
            steps=steps,
            text=progress.text,
            messages=progress.messages,
            calls=progress.calls,
            open_calls=progress.open_calls,
            steering_waiting=[(seq, text) for seq, text in progress.steering if seq not in taken],
            steering_taken=taken,
        )


class Replay:
    """Where a resumed agent stands in its journal. The context consults it before each call;
    ``said`` is how many characters the agent has said so far, and ``messages_ended`` how many
    messages it has ended, as the context counts them."""

    def __init__(self, journal: Journal):
        self.journal = journal
        self.next_step = 0

    def finished(self, said: int, messages_ended: int) -> bool:
        journal = self.journal
        return (
            self.next_step >= len(journal.steps)
            and said >= len(journal.text)
            and messages_ended >= journal.messages
        )

    def _upcoming(self) -> Step | None:
        steps = self.journal.steps
        return steps[self.next_step] if self.next_step < len(steps) else None

    def say(self, text: str, said: int) -> str:
        """Match text the agent says; returns the part of it that was never stored (to emit)."""
        stored = self.journal.text[said : said + len(text)]
        upcoming = self._upcoming()
        if upcoming is not None and said + len(text) > upcoming.said:
            raise JournalMismatch(
                f"it said more before step {upcoming.index + 1} ({upcoming.describe()}) than it had"
            )
        if not text.startswith(stored):
            raise JournalMismatch(f"it said something else after {said} characters")
        return text[len(stored) :]

    def cut_short(self, said: int) -> str:
        """Text stored after the last recorded step, beyond what the agent has said: what a
        streamed step had said when its process stopped ('' if there is none)."""
        if self._upcoming() is not None:
            return ""
        return self.journal.text[said:]

    def step(self, kind: str, name: str, step_digest: str, said: int) -> Step | None:
        """The recorded step the agent takes now, or None when it is a new one (run it live).
        Raises JournalMismatch if the journal records another step (or more text) here."""
        upcoming = self._upcoming()
        if upcoming is None:
            if said < len(self.journal.text):
                raise JournalMismatch(
                    f"it took a {kind} step after {said} characters, where it had said more"
                )
            return None
        if (upcoming.kind, upcoming.name, upcoming.digest, upcoming.said) != (
            kind,
            name,
            step_digest,
            said,
        ):
            doing = f"{kind} {name!r}" if name else kind
            raise JournalMismatch(
                f"step {upcoming.index + 1} was {upcoming.describe()}, not {doing}"
            )
        self.next_step += 1
        return upcoming

    def steering(self, said: int, messages_ended: int) -> list[str] | None:
        """What a call to ``steering()`` returned here before ([] if nothing was taken in), or
        None once the replay is past the journal (take in what has arrived)."""
        upcoming = self._upcoming()
        if upcoming is not None and upcoming.kind == "steering" and upcoming.said == said:
            self.next_step += 1
            return upcoming.outcome["inputs"]
        if self.finished(said, messages_ended):
            return None
        return []
