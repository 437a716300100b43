"""How a worker slot is started: a child process on this machine over a socket pair
(:mod:`~rolltap.serve.launch.child_process`), or a Ray actor on any node of a cluster
over TCP back to the driver (:mod:`~rolltap.serve.launch.ray_actor`). The worker and
its protocol are the same whichever launcher starts it.
"""
