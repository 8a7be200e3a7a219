"""trace: a QLoRA card pinning bitsandbytes before 0.43.2 gets a note that the plan counts the MatMul4Bit inputs the
installed bitsandbytes (which the trace runs) does not keep."""

from __future__ import annotations

import pytest

from trainfit.cli.trace_cmd import bnb_kept_input_note
from trainfit.spec.card import load_card_dict


def _card(scope: str, pin: str | None) -> dict:
    card = {"model": "meta-llama/Llama-2-7b-hf", "scope": scope,
            "lora": {"rank": 8, "alpha": 16, "targets": ["q_proj", "v_proj"]},
            "precision": {"weights": "nf4" if scope == "qlora" else "bf16", "compute": "bf16"},
            "parallel": {"strategy": "single"}, "batch": {"micro_batch_size": 1, "seq_len": 512}}
    if pin:
        card["software"] = {"bitsandbytes": pin}
    return card


@pytest.mark.parametrize(("scope", "pin", "noted"), [("qlora", "0.41.1", True), ("qlora", "<0.43.2", True),
                                                     ("qlora", "0.45.0", False), ("qlora", None, False),
                                                     ("lora", "0.41.1", False)])
def test_note_only_for_an_old_bitsandbytes_qlora_card(scope: str, pin: str | None, noted: bool) -> None:
    note = bnb_kept_input_note(load_card_dict(_card(scope, pin)))
    assert (note is not None) is noted
    if noted:
        assert "plan counts those inputs" in note and "trace cannot show them" in note
