"""The REST API for workspaces, conversations, turns and events (thin: parse, call, answer):
``conversations`` (workspaces and conversations), ``turns`` (start, steer, Stop, what is in
flight) and ``events`` (a page of events, a turn-by-turn history, the tail), with what they
share in ``common``."""
