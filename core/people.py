"""How a person (a Django user) appears in events and payloads."""


def person(user) -> dict | None:
    """How a person appears in events and payloads: who started, steered, stopped, answered."""
    if user is None or not getattr(user, "is_authenticated", False):
        return None
    return {
        "id": user.pk,
        "username": user.get_username(),
        "name": user.get_full_name() or user.get_username(),
    }
