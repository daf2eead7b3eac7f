"""Prefect orchestration over the flows: the language registry, deployment plans, applying or serving
them, the local server, and the checkpoint event that connects LAPT to re-evaluation.

Modules: ``registry`` (schema of ``deployments/languages.yaml``), ``plans`` (registry → deployments,
``prefect.yaml``), ``apply`` (create/update/serve them on a Prefect API), ``server`` (a local Prefect
server), ``events`` (the ``focusflow.checkpoint.updated`` event) and ``results`` (the store's folder of Prefect's
persisted task results, registered so the store passes over it). It sits below the tasks and reads only
the configuration and the store; ``events`` is imported by the tasks' checkpoint hook (``tasks/checkpoints.py``)
and imports no other module of this package (nor does ``results``, which the command line imports), and this
``__init__`` imports none, so importing it stays light.
"""
