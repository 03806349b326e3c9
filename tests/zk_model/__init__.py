"""Tests of the ZooKeeper model, the embedded server and its kazoo-compatible client."""
