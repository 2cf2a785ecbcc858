"""The platform's Prometheus metrics (the channel layer's failures), kept per process; the apps
add their own. ``/metrics`` (core.health) serves every metric registered in the process."""

from prometheus_client import Counter

LAYER_ERRORS = Counter(
    "parley_channel_layer_errors",
    "Channel-layer sends and receives that failed",
    ["operation"],  # send, group_send, receive, group_add
)
