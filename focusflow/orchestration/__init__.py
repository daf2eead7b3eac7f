"""Prefect orchestration over the flows: the language registry, deployment plans, applying or serving
them, the local server, and the checkpoint event that connects LAPT to re-evaluation.

Modules: ``registry`` (schema of ``deployments/languages.yaml``), ``plans`` (registry → deployments,
``prefect.yaml``), ``apply`` (create/update/serve them on a Prefect API), ``server`` (a local Prefect
server) and ``events`` (the ``focusflow.checkpoint.updated`` event). Nothing here is imported by the
core, tasks or flows, except ``events`` by the LAPT task: ``events`` imports no other module of this
package, and this ``__init__`` imports none, so that importing ``events`` stays light.
"""
