"""The one schedule builder gives every loop the learning rates it trained its stored results with."""

from __future__ import annotations

import math

import pytest
import torch

from focusflow.training.schedules import WarmupSchedule


def _rates(schedule: WarmupSchedule, steps: int) -> list[float]:
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    scheduler = schedule.build(optimizer)
    rates = []
    for _ in range(steps):
        rates.append(scheduler.get_last_lr()[0])
        optimizer.step()
        scheduler.step()
    return rates


@pytest.mark.parametrize(("shape", "hf_name"), [("constant", "constant_with_warmup"), ("linear", "linear"),
                                                ("cosine", "cosine")])
@pytest.mark.parametrize(("warmup", "total"), [(0, 7), (3, 20), (10, 10), (1, 1)])
def test_lapt_and_align_schedules_are_transformers_own_to_the_bit(shape, hf_name, warmup, total):
    from transformers import get_scheduler

    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    hf = get_scheduler(hf_name, optimizer, num_warmup_steps=warmup, num_training_steps=total)
    expected = []
    for _ in range(total + 2):
        expected.append(hf.get_last_lr()[0])
        optimizer.step()
        hf.step()
    assert _rates(WarmupSchedule(shape, warmup, total), total + 2) == expected


def test_fine_tuning_warms_up_from_its_first_step_then_decays_linearly():
    warmup, total = 4, 30
    expected = [(s + 1) / (warmup + 1) if s < warmup else max(0.0, (total - s) / max(1, total - warmup))
                for s in range(total + 1)]
    assert _rates(WarmupSchedule("linear", warmup, total, ramp="first"), total + 1) == expected
    assert expected[0] > 0 and expected[-1] == 0.0


def test_the_mlm_heads_warm_up_is_a_ceiling_under_a_cosine_over_every_step():
    warmup, total = 5, 40
    expected = [min((s + 1) / warmup, 0.5 * (1 + math.cos(math.pi * min(s, total) / total))) for s in range(total + 3)]
    assert _rates(WarmupSchedule("cosine", warmup, total, ramp="under"), total + 3) == expected
