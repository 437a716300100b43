"""A worker's process (``python -m rolltap.serve.worker.process FD``, or a Ray actor):
its own event loop, gateway and model-client pool, the rollouts it runs, its heartbeat,
and where its sessions are written. It speaks :mod:`rolltap.serve.protocol` only.
"""
