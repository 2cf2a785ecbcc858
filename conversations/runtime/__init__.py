"""The turn runtime: how turns run inside a server process.

- ``runner``: the turn runner (a task per turn, its lease, its one terminal event);
- ``context``: the turn context, all an agent may call (``asking``: its questions);
- ``parking``: turns parked on a question, woken through their inbox or by the poller;
- ``writer``: the event writer (a turn's events written in batches, in order);
- ``inbox``: control inboxes (Stop, steering, wake-ups, from any process);
- ``journal``: a turn's journal and its replay, from which a resumed turn is rebuilt;
- ``upkeep``: process upkeep (leases renewed, turns nobody holds taken over, questions
  expired, dead processes' watchers forgotten).

Services never import this package: they reach it through ``conversations.hooks.turns``, which
the conversations app fills at start-up.
"""
