"""Untied output embeddings follow the input rows' method: one plan (FOCUS weights computed once) for both."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from focusflow.embeddings import initialize_model


def test_untied_output_rows_get_the_same_combination_as_input_rows(tiny_sources, transfer_case, tmp_path) -> None:
    from transformers import AutoModelForCausalLM

    from focusflow.models.loading import load_source

    model, tokenizer, _ = load_source(tiny_sources["llama"])
    assert not model.config.tie_word_embeddings
    inputs = model.get_input_embeddings().weight.detach().clone()
    with torch.no_grad():  # an output matrix that is a known linear map of the input one: W_out = -3 E
        model.get_output_embeddings().weight.copy_(-3.0 * inputs)
    model.save_pretrained(tmp_path / "source")
    tokenizer.save_pretrained(tmp_path / "source")

    initialize_model(tmp_path / "source", transfer_case["target_dir"], tmp_path / "out", "focus",
                     aux_dir=transfer_case["aux_dir"])
    result = AutoModelForCausalLM.from_pretrained(tmp_path / "out")
    report = pd.read_parquet(tmp_path / "out" / "transfer_report.parquet")
    new_inputs = result.get_input_embeddings().weight.detach().numpy()
    new_outputs = result.get_output_embeddings().weight.detach().numpy()
    assert not result.config.tie_word_embeddings and new_outputs.shape == new_inputs.shape

    # every row built from the source (copied, FOCUS-combined, FVT, mean) is the same weighted sum of source rows
    built = report[report["fate"] != "random"]["target_id"].to_numpy()
    assert {"combined", "copied_exact"} <= set(report["fate"]) and len(built) > 0.9 * len(report)
    np.testing.assert_allclose(new_outputs[built], -3.0 * new_inputs[built], rtol=1e-4, atol=1e-5)
    # random rows are drawn from the output matrix's own statistics, not left as resize noise
    drawn = report[report["fate"] == "random"]["target_id"].to_numpy()
    if len(drawn):
        scale = new_outputs[drawn].std() / new_inputs[drawn].std()
        assert 2.0 < scale < 4.5
