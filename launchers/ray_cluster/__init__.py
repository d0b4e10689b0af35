"""Servers placed on a Ray cluster: the `ray` executor (launchers/executors.py).

    session.py    connect to a cluster (or start a local head for the run), loopback-safe settings
    placement.py  what a profile asks of the cluster: GPUs per node, node count, the placement group
    actor.py      ServerActor: runs on its node and starts the server there with launchers.lifecycle
    remote.py     RayServer: the driver's handle of a placed server (ServerHandle), its logs and records
    status.py     what the cluster offers against what profiles need (`recall-eval ray-status`)

Ray is imported inside functions only: `recall-eval --help` and every run without --ray never load it.
"""
