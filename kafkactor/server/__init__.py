"""Kafka's `kafka.server`: one broker process and what starts it.

- `config`: `KafkaConfig`, a broker's settings read from a Kafka-style properties file
  (`kafkactor broker --config FILE`), and its `ConfigError`
"""

from kafkactor.server.config import ConfigError, EndPoint, KafkaConfig

__all__ = ["ConfigError", "EndPoint", "KafkaConfig"]
