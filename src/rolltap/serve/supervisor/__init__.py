"""The supervisor's process: admission, placement, the workers' slots, results, and the
HTTP service (``rolltap serve``) or the eval driver (``rolltap eval --workers/--ray``)
in front of it. Its modules import :mod:`rolltap.serve.launch` and
:mod:`rolltap.serve.protocol`, never :mod:`rolltap.serve.worker`'s code.
"""
