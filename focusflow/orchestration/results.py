"""Where Prefect's persisted task results live: ``prefect-results/`` of the artifact store, beside the stages.

The store knows no orchestrator: this module names the folder and registers it as records a layer keeps
(``storage.keep_records``), so listings, ``gc`` and ``rm`` pass over it. It imports only the store (no
Prefect), so the command line registers it in every command; the folder keeps its name, so existing stores
stay valid.
"""

from __future__ import annotations

from focusflow.storage import keep_records

RESULTS_FOLDER = keep_records("prefect-results")
