"""Publishing a stored model: its Hub repository folder, its model card and the push.

``lineage.trace`` finds a model's ancestors and stored results through the store's manifests,
``facts.gather_facts`` reads what the card states, ``card.build_card`` writes it with
``huggingface_hub.ModelCard``, ``folder.write_repository`` assembles the folder and ``hub.push_folder``
uploads it. No Prefect; the ``publish`` stage (``focusflow.pipeline.publish_stage``) runs them.
"""
