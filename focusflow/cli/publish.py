"""``focusflow publish``: a stored model's Hub repository (model card from stored results), pushed or exported.

The repository folder is the ``publish`` stage's artifact; ``--out`` writes it to a folder without
pushing, otherwise it is uploaded to the Hub (``HF_TOKEN`` or the saved login, ``HF_ENDPOINT``) and
committed to the store only once the push succeeded.
"""

from __future__ import annotations

from pathlib import Path

import typer

from focusflow.cli.app import app
from focusflow.cli.stage_io import StoreOption, check_out, echo_result, export, stage_input
from focusflow.publish.record import PublishRecord
from focusflow.storage import ArtifactStore


@app.command("publish")
def publish_command(
    model: str = typer.Argument(..., help="A stored model (init, align, lapt or lapt-checkpoint artifact): its URI "
                                          "(a unique key prefix is enough), <stage>/<key-prefix> in --store (as the "
                                          "stage lines print it, e.g. lapt/e1010c07ec69), its folder, or an "
                                          "exported copy of one."),
    repo_id: str = typer.Option(..., "--repo-id", help="Hub repository, e.g. user/e5-small-sw-focus."),
    out: Path = typer.Option(None, "--out", "-o", help="Write the repository folder here instead of pushing."),
    private: bool = typer.Option(None, "--private/--public", help="Create the repository private (or public); without "
                                                                   "either, as the Hub's default makes it (an "
                                                                   "organization's may be private). --private also "
                                                                   "makes an existing repository private; --public "
                                                                   "leaves an existing one as it is."),
    revision: str = typer.Option(None, "--revision", "--branch", help="Branch to push to (created if missing)."),
    commit_message: str = typer.Option(None, "--commit-message", "-m", help="Commit message of the upload."),
    language: str = typer.Option(None, "--language", "-l",
                                 help="ISO 639 code of the model's language, for a model whose lineage records none "
                                      "(built by the stage commands, e.g. transfer and lapt); a recorded language "
                                      "is used as it is, and --language must agree with it."),
    force: bool = typer.Option(False, "--force", help="Publish a model that failed focusflow's weight check (its "
                                                       "card then says so in its first warning)."),
    store: str = StoreOption,
) -> None:
    """Write the model card from the stored results and push the repository (or export it with --out)."""
    from focusflow.pipeline import run_stage
    from focusflow.pipeline.publish_stage import PublishSettings, publish_inputs
    from focusflow.publish.lineage import model_language, recorded_language, trace

    given = _language_option(language)
    settings = PublishSettings.for_repo(repo_id, private=private, revision=revision, commit_message=commit_message,
                                        push=out is None, force=force)
    artifact_store = ArtifactStore(store)
    check_out(artifact_store, out)
    model_artifact = stage_input(artifact_store, model, "model")
    lineage = trace(artifact_store, model_artifact)
    chosen = model_language(lineage, given)  # the recorded language, else --language; neither: one error line
    if recorded_language(lineage) is None:  # only then is the language a parameter of the stage (its key)
        settings = settings.model_copy(update={"language": chosen})
    inputs = publish_inputs(artifact_store, model_artifact, lineage)
    artifact = run_stage(artifact_store, "publish", settings.to_params(), inputs)
    export(artifact_store, artifact, out)
    echo_result(artifact)
    pushed = PublishRecord.of(artifact).push
    if pushed:
        typer.echo(f"published: {pushed['url']}" + (f" (commit {pushed['commit']})" if pushed.get("commit") else ""))
    elif out is not None:
        typer.echo(f"repository folder: {out}")


def _language_option(language: str | None) -> str | None:
    """``--language`` checked like a run configuration's language (a known ISO 639 code), lower case as typed."""
    if language is None:
        return None
    from focusflow.errors import InputError
    from focusflow.languages import LanguageError, normalize_language

    code = language.strip().lower().replace("_", "-")
    try:
        normalize_language(code)
    except LanguageError as exc:
        raise InputError(f"--language: {exc}") from None
    return code
