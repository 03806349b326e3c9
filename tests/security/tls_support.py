"""Test certificates for the TLS tests: a trustme CA, a broker's PEM key store (chain and key
in one file, as `ssl.keystore.type=PEM`) and a client's, written to a directory."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

import trustme

from kafkactor.security.listener import SslConfig


@dataclass(frozen=True)
class Pki:
    """A CA and two leaf certificates: the broker's (localhost, 127.0.0.1) and a client's
    (`CN=client,OU=clients,O=kafkactor`)."""

    ca: Path
    broker_keystore: Path  # chain + key
    client_keystore: Path  # chain + key
    other_ca: Path  # a CA nobody's certificate comes from

    def server(self, client_auth: str = "none") -> SslConfig:
        return SslConfig(keystore=self.broker_keystore, truststore=self.ca, client_auth=client_auth)  # type: ignore[arg-type]

    def client(self, *, certificate: bool = False, hostname: bool = True) -> SslConfig:
        return SslConfig(
            truststore=self.ca,
            keystore=self.client_keystore if certificate else None,
            endpoint_identification=hostname,
        )


def make_pki(directory: Path) -> Pki:
    ca = trustme.CA(organization_name="kafkactor tests")
    broker = ca.issue_cert("localhost", "127.0.0.1", common_name="broker")
    client = ca.issue_cert(
        "client",
        common_name="client",
        organization_name="kafkactor",
        organization_unit_name="clients",
    )
    paths = {name: directory / f"{name}.pem" for name in ("ca", "broker", "client", "other")}
    ca.cert_pem.write_to_path(str(paths["ca"]))
    trustme.CA().cert_pem.write_to_path(str(paths["other"]))
    for name, leaf in (("broker", broker), ("client", client)):
        leaf.private_key_and_cert_chain_pem.write_to_path(str(paths[name]))
    return Pki(paths["ca"], paths["broker"], paths["client"], paths["other"])


def handshake(
    server: ssl.SSLContext, client: ssl.SSLContext, server_hostname: str = "localhost"
) -> tuple[ssl.SSLObject, ssl.SSLObject]:
    """A TLS handshake in memory (no sockets): the server's and the client's ends, or the
    `ssl.SSLError` of whichever side refused."""
    s_in, s_out, c_in, c_out = (ssl.MemoryBIO() for _ in range(4))
    s = server.wrap_bio(s_in, s_out, server_side=True)
    c = client.wrap_bio(c_in, c_out, server_hostname=server_hostname)
    done = {"s": False, "c": False}
    for _ in range(20):
        for name, end, out, peer_in in (("c", c, c_out, s_in), ("s", s, s_out, c_in)):
            if not done[name]:
                try:
                    end.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
            peer_in.write(out.read())
        if all(done.values()):
            return s, c
    raise AssertionError("the handshake did not finish")
