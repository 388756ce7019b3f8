"""Many Panewatch nodes, one view: state in NATS key-value buckets, actions as NATS requests.

``link.py`` is one node's connection (buckets, heartbeat, requests); ``federation.py`` wraps the
local engine in the same façade, adding the other nodes' sessions and forwarding actions on them
to their owner, where the usual guards apply.
"""
