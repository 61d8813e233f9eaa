"""Reporting beyond one machine, through the engines that run the cluster.

- ``gpuscout.cluster.ray``: every node's discovery in a Ray cluster (extra ``ray``).
- ``gpuscout.cluster.nfd``: Kubernetes Node Feature Discovery labels for this node.

Neither module is imported by ``import gpuscout``; Ray is imported only when an inventory runs.
"""
