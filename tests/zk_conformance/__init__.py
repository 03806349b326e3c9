"""ZooKeeper conformance: one suite of behaviours run against the embedded model and a real server.

Every test takes the `zk` fixture (see conftest.py), parametrized over "embedded"
(`kafkactor.zk_model.EmbeddedZooKeeper`) and "real" (Debian's ZooKeeper 3.8 started once per
session on a free loopback port). Both must give the same paths, stats, errors and watch events.
Where the model is known to differ, the test carries `@pytest.mark.model_differs(reason)`, which
turns only its embedded case into a strict xfail.
"""
