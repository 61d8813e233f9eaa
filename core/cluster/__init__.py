"""Reporting beyond one machine, through the engines that run the cluster.

- ``gpuscout.cluster.nfd``: Kubernetes Node Feature Discovery labels for this node.
"""
