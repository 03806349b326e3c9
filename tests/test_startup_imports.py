"""`kafkactor serve` loads what a broker needs to serve, and the rest when it is first used.

Each check imports in a fresh interpreter and reads `sys.modules`, so a later eager import
anywhere on serve's import path (a command's module in the parser, the analytics extra, the
authorizer, the transcribed entities of APIs not yet spoken, kio's entities of any API) fails
here rather than slowing every broker's start unseen (docs/processes.md "Start-up").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from kafkactor.network import codec, inter_broker_schemas, removed_versions

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[1]

#: Loaded by `kafkactor serve` before it answers: never (the analytics extra, the other
#: commands' work, clients, admin tools) or only when first used (the rest).
DEFERRED = (
    "pyspark",
    "matplotlib",
    "jsonschema",
    "kafkactor.analytics",
    "kafkactor.trace",
    "kafkactor.demo",
    "kafkactor.testing.nemesis",
    "kafkactor.testing.schedule",
    "kafkactor.admin.admin_client",
    "kafkactor.server.launcher",
    "kafkactor.clients",
    "kazoo.client",  # a real ZooKeeper's client
    # scramp stays imported with the SASL authenticator: loaded at a first SCRAM handshake, the
    # server closed that handshake in whole-suite runs (cause not yet found)
    "msgpack",  # the messages' codec: actors pass messages as they are
    "kafkactor.security.authorizer",  # a broker with an authorizer
    "kafkactor.network.authorization_checks",
    "kafkactor.network.acl_apis",
    "kafkactor.network.inter_broker_schemas",  # LeaderAndIsr ... over the wire
    "kafkactor.network.removed_versions",  # OffsetCommit v0-1, OffsetFetch v0, ...
)

#: kio's modules that hold no API's entities: its machinery, the headers, the consumer
#: protocol structs the group coordinator reads.
KIO_SHARED = ("kio.schema.request_header", "kio.schema.response_header", "kio.schema.consumer_")


def loaded_after(program: str) -> dict[str, Any]:
    """Run `program` in a fresh interpreter; it prints a JSON object (`sys.modules` snapshots
    and whatever it measured)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(program)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def kio_entities(modules: list[str]) -> list[str]:
    """The modules of kio's generated entities of an API (kio.schema.<api>.v<N>...)."""
    return sorted(
        name
        for name in modules
        if name.startswith("kio.schema.") and ".v" in name and not name.startswith(KIO_SHARED)
    )


@pytest.fixture(scope="module")
def snapshots() -> dict[str, Any]:
    """`sys.modules` after each step of a broker's start and first requests, in one fresh
    interpreter: the parser built, serve imported, an ApiVersions request answered by the
    broker's KafkaApis, a LeaderAndIsr entity asked of the codec."""
    return loaded_after(
        """
        import json, sys
        import kafkactor.cli

        kafkactor.cli.build_parser()
        parser = sorted(sys.modules)
        import kafkactor.serve

        serve = sorted(sys.modules)
        from kafkactor.network import codec
        from kafkactor.network.api_versions import SUPPORTED
        from kafkactor.network.kafka_apis import KafkaApis
        from kafkactor.network.request_channel import RequestHeader

        request = codec.request_type(18, 3)(
            client_software_name="probe", client_software_version="1"
        )
        header = RequestHeader(api_key=18, api_version=3, correlation_id=7, client_id="probe")
        answer = KafkaApis(1).handle(header, request)
        listed = {
            int(k.api_key): [int(k.min_version), int(k.max_version)]
            for k in answer.body.api_keys
        }
        api_versions = sorted(sys.modules)
        codec.request_type(4, 0)  # LeaderAndIsr v0: a transcribed entity
        print(json.dumps({
            "parser": parser,
            "serve": serve,
            "api_versions": api_versions,
            "leader_and_isr": sorted(sys.modules),
            "listed": listed,
            "supported": {int(k): list(v) for k, v in SUPPORTED.items()},
        }))
        """
    )


def test_the_parser_loads_no_command_and_serve_loads_only_the_broker(
    snapshots: dict[str, Any],
) -> None:
    parser, serve = snapshots["parser"], snapshots["serve"]
    # every command is in the parser, none of their work: not even the broker
    assert "kafkactor.testing.cluster" not in parser
    assert "kafkactor.actors.broker" not in parser
    assert "kafkactor.network.codec" not in parser
    # serve loads the broker, and nothing it does not need to start serving
    assert "kafkactor.actors.broker" in serve
    assert [name for name in DEFERRED if name in serve] == []
    assert kio_entities(serve) == []


def test_the_codec_loads_each_api_on_first_use_and_api_versions_names_every_api(
    snapshots: dict[str, Any],
) -> None:
    # ApiVersions names every API served, loading only its own entities
    assert snapshots["listed"] == snapshots["supported"]
    assert {name.split(".")[2] for name in kio_entities(snapshots["api_versions"])} == {
        "api_versions"
    }
    assert "kafkactor.network.inter_broker_schemas" not in snapshots["api_versions"]
    assert "kafkactor.network.inter_broker_schemas" in snapshots["leader_and_isr"]
    assert "kafkactor.network.removed_versions" not in snapshots["leader_and_isr"]


@pytest.mark.parametrize("module", [removed_versions, inter_broker_schemas])
def test_the_codec_knows_which_versions_each_transcribed_module_holds(module: Any) -> None:
    name = module.__name__.rpartition(".")[2]
    named = {
        (api_key, version)
        for api_key, (home, versions) in codec._TRANSCRIBED_VERSIONS.items()
        if home == name
        for version in versions
    }
    assert named == set(module.REQUESTS) == set(module.RESPONSES)
    for api_key, version in named:
        assert codec.request_type(api_key, version) is module.REQUESTS[(api_key, version)]
        assert codec.response_type(api_key, version) is module.RESPONSES[(api_key, version)]
