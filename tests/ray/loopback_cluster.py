"""A two-node Ray cluster on loopback for the tests: `python -m tests.ray.loopback_cluster HEAD_GPUS NODE_GPUS`.

Built with Ray's own test helper (ray.cluster_utils.Cluster, as Ray's tests build multi-node clusters
on one machine): a head and a second raylet, each with its own logical GPUs, every socket on 127.0.0.1
(RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 keeps Ray from replacing loopback by the machine's address; the
`ray start` script refuses a second node in that mode, the helper does not). Prints the head's address
as one line `ADDRESS host:port`, then holds the cluster until its stdin closes or it gets SIGTERM.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"


def main() -> None:
    from ray.cluster_utils import Cluster

    head_gpus, node_gpus = int(sys.argv[1]), int(sys.argv[2])
    common = {
        "node_ip_address": "127.0.0.1",
        "include_dashboard": False,
        "object_store_memory": 80 * 1024 * 1024,
    }
    cluster = Cluster(
        initialize_head=True,
        head_node_args={**common, "num_cpus": 4, "num_gpus": head_gpus, "resources": {"head": 1}},
    )
    cluster.add_node(**common, num_cpus=4, num_gpus=node_gpus, resources={"second": 1})
    cluster.wait_for_nodes()
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    print(f"ADDRESS {cluster.address}", flush=True)
    done.wait()
    cluster.shutdown()


if __name__ == "__main__":
    main()
