"""Reads of selections (the questions an agent asks mid-turn)."""


def pending_selection_payloads(*, conversation_id: str) -> list[dict]:
    """The questions still waiting for an answer in a conversation (none until agents ask)."""
    return []
