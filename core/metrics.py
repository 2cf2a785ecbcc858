"""The platform's Prometheus metrics (the channel layer's failures, people's limits reached), kept
per process; the apps add their own. ``/metrics`` (core.health) serves every metric registered in
the process."""

from prometheus_client import Counter

LAYER_ERRORS = Counter(
    "parley_channel_layer_errors",
    "Channel-layer sends and receives that failed",
    ["operation"],  # send, group_send, receive, group_add
)
LIMIT_REFUSALS = Counter(
    "parley_limit_refusals",
    "Requests and connections refused because their person reached a limit",
    # sockets, tails, mcp_sessions (open at once); turns, conversations, questions (rates)
    ["limit"],
)
