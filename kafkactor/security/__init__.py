"""Who may connect and what they may do: Kafka 0.9's security, rebuilt.

- `principal`: `KafkaPrincipal` (`User:alice`), what every authenticated connection carries.
- `listener`: `SecurityProtocol` and `ListenerConfig` (a listener's name, protocol, address,
  TLS settings and SASL mechanisms), as `listeners` / `listener.security.protocol.map` name them.
- `acl`: Kafka's ACL vocabulary (operations, resource types, pattern types, permissions) with
  their wire codes, and the `Authorizer` protocol KafkaApis asks for every request.
- the SASL server side (PLAIN, SCRAM-SHA-256/512), SCRAM credentials in `/config/users`, the ACL
  store in `/kafka-acl`, the pure authorizer, client quotas, the request memory pool and the
  connection quotas each have a module of their own here (docs/security.md).
"""
