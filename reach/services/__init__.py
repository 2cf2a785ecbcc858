"""The reach app's writes, one module per topic: a workspace's webhook endpoints
(``webhooks``) and its channels (``channels``)."""
