"""The broker's actors, one subpackage per Kafka subsystem (docs/architecture.md).

- `runtime`: the actor system (traced actors, addresses, the directory, the blocking client)
- `purgatory`: Kafka's delayed-operation purgatory and the Reaper that drives the timer
- `replication`: ReplicaManager, Partition, ReplicaFetcher, DelayedProduce, DelayedFetch
- `controller`: the controller, its pure state, Kafka's znodes and the broker's ZooKeeper session
- `broker`: one broker's actors assembled

Nothing is imported here: import from the subpackage (`kafkactor.actors.replication`).
"""
