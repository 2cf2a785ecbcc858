"""Parley's platform: what any Django + Channels service of this kind needs and that names no
conversation, question or turn (errors and ids, the DRF glue, the server process and its loop,
the database threads, the decoding gate, middleware, the guarded socket and its flow control,
socket auth and origins, health, the process metrics, the error pages). It imports no app."""
