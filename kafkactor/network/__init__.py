"""Kafka's wire protocol: the socket server, the codec adapter and the KafkaApis role.

`SocketServer` frames and decodes requests on an asyncio loop, `KafkaApisActor` turns each into
messages to the broker's actors (through the pure `KafkaApis`), and the answers are encoded and
written back in request order per connection (docs/network.md).
"""
