"""SaslHandshake (17) and SaslAuthenticate (36) when they reach KafkaApis.

On a SASL listener both are answered by the connection's `SaslServerAuthenticator` before
any other request; one that reaches KafkaApis comes after authentication, or on a listener
without SASL (PLAINTEXT, SSL). Kafka 2.8's KafkaApis answers both ILLEGAL_SASL_STATE there
(`handleSaslHandshakeRequest`, `handleSaslAuthenticateRequest`), and so does kafkactor.
"""

from __future__ import annotations

from typing import Any

from kafkactor.messages import ErrorCode
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.codec import build, response_type
from kafkactor.network.request_channel import RequestHeader
from kafkactor.network.steps import Answer, Step

__all__ = ["sasl_authenticate", "sasl_handshake"]


def sasl_handshake(header: RequestHeader, body: Any) -> Step:
    """ILLEGAL_SASL_STATE with no mechanisms listed, as Kafka answers."""
    response = response_type(ApiKey.SASL_HANDSHAKE, header.api_version)
    return Answer(response(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=()))


def sasl_authenticate(header: RequestHeader, body: Any) -> Step:
    """ILLEGAL_SASL_STATE with Kafka's message."""
    response = response_type(ApiKey.SASL_AUTHENTICATE, header.api_version)
    return Answer(
        build(
            response,
            error_code=ErrorCode.ILLEGAL_SASL_STATE,
            error_message="SaslAuthenticate request received after successful authentication",
            auth_bytes=b"",
        )
    )
