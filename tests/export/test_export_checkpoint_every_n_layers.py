"""``parallel.checkpoint_every_n_layers`` through the exporters: torchtitan writes it as
``activation_checkpoint.selective_ac_option`` n and reads it back; the other targets, which checkpoint every
layer or none, name it among what they lose."""

import tomllib

import pytest
from export_cards import _default, assert_lost_fields_named

from trainfit.errors import TrainfitError
from trainfit.export import TARGETS, export, read_back
from trainfit.export.importers import import_text

FIELD = "parallel.checkpoint_every_n_layers"


def _every(n):
    return _default(parallel__gradient_checkpointing=True, parallel__checkpoint_every_n_layers=n)


@pytest.mark.parametrize("target", TARGETS)
def test_every_target_carries_or_names_the_field(target):
    assert_lost_fields_named(_every(2), target, (FIELD,))


@pytest.mark.parametrize("n", [2, 3])
def test_torchtitan_writes_selective_ac_option_and_reads_it_back(n):
    card = _every(n)
    e = export(card, "torchtitan")
    assert tomllib.loads(e.text)["activation_checkpoint"] == {"mode": "selective", "selective_ac_option": str(n)}
    assert FIELD not in e.lost
    assert read_back(card, e).parallel.checkpoint_every_n_layers == n


def _titan(option, **para):
    card = _every(2)
    cfg = tomllib.loads(export(card, "torchtitan").text)
    cfg["activation_checkpoint"] = {"mode": "selective", "selective_ac_option": option}
    cfg["parallelism"].update(para)
    lines = []
    for section, body in cfg.items():
        lines.append(f"[{section}]")
        lines += [f"{k} = {v!r}".replace("True", "true").replace("False", "false") for k, v in body.items()]
    return import_text("\n".join(lines), "torchtitan")


@pytest.mark.parametrize("option,n", [("2", 2), ("5", 5), ("1", None), ("0", None)])
def test_torchtitan_import_every_nth_layer(option, n):
    par = _titan(option).card["parallel"]
    assert par["gradient_checkpointing"] is True
    assert par.get("checkpoint_every_n_layers") == n  # 0 and 1: every layer (torchtitan: ``not ac_freq or ...``)


def test_torchtitan_import_op_and_bad_options():
    assert _titan("op").card["parallel"]["selective_checkpointing"] == "op"
    with pytest.raises(TrainfitError, match="selective_ac_option"):
        _titan("every2")


def test_torchtitan_import_with_tensor_parallel_reads_every_layer_and_says_so():
    imp = _titan("2", tensor_parallel_degree=2)
    assert "checkpoint_every_n_layers" not in imp.card["parallel"]
    assert any("selective_ac_option 2" in n for n in imp.notes)
