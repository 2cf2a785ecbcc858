"""Public ids: a short type prefix and 16 random hex digits, e.g. ``c_9f2c4e1a7b3d5c60``."""

import secrets


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(8)}"
