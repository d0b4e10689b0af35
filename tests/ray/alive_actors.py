"""`python -m tests.ray.alive_actors ADDRESS`: prints the number of ServerActors alive on the cluster
(read from Ray's GCS; a driver of its own, so the test process never joins the cluster)."""

from __future__ import annotations

import os
import sys

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")


def main() -> None:
    import ray
    from ray._private.state import state

    ray.init(address=sys.argv[1], _node_ip_address="127.0.0.1", log_to_driver=False, configure_logging=False)
    table = state.actor_table(None)
    alive = [
        a for a in table.values() if a.get("ActorClassName") == "ServerActor" and a.get("State") != "DEAD"
    ]
    print(len(alive), flush=True)
    ray.shutdown()


if __name__ == "__main__":
    main()
