"""``loss.compiled`` through the exporters: torchtitan writes it as ``compile.components`` (torchtitan 0.2.2 compiles
["model", "loss"] by default: torchtitan/config/job_config.py l.721-727) and reads it back; the other targets name
it among what they lose."""

import tomllib

import pytest
from export_cards import _default, assert_lost_fields_named

from trainfit.export import TARGETS, export, read_back
from trainfit.export.importers import import_text

FIELD = "loss.compiled"


def _card(*, model: bool, loss: bool):
    return _default(parallel__compile=model, loss__compiled=loss)


@pytest.mark.parametrize("target", [t for t in TARGETS if t != "torchtitan"])
def test_other_targets_name_the_field(target):
    assert_lost_fields_named(_card(model=False, loss=True), target, (FIELD,))


@pytest.mark.parametrize(("model", "loss", "section"), [
    (True, True, {"enable": True}),
    (True, False, {"enable": True, "components": ["model"]}),
    (False, True, {"enable": True, "components": ["loss"]}),
    (False, False, {"enable": False}),
])
def test_torchtitan_writes_the_components_and_reads_them_back(model, loss, section):
    card = _card(model=model, loss=loss)
    e = export(card, "torchtitan")
    assert tomllib.loads(e.text)["compile"] == section
    assert FIELD not in e.lost and "parallel.compile" not in e.lost
    back = read_back(card, e)
    assert (back.parallel.compile, back.loss.compiled) == (model, loss)


def _titan(compile_section, **para):
    cfg = tomllib.loads(export(_card(model=True, loss=True), "torchtitan").text)
    cfg["compile"] = compile_section
    cfg["parallelism"].update(para)
    lines = []
    for section, body in cfg.items():
        lines.append(f"[{section}]")
        lines += [f"{k} = {v!r}".replace("True", "true").replace("False", "false").replace("'", '"')
                  for k, v in body.items()]
    return import_text("\n".join(lines), "torchtitan")


def test_torchtitan_import_default_components_compile_the_loss():
    imp = _titan({"enable": True})
    assert imp.card["parallel"]["compile"] is True and imp.card["loss"]["compiled"] is True


def test_torchtitan_import_under_tensor_parallel_plans_the_eager_loss_and_says_so():
    imp = _titan({"enable": True}, tensor_parallel_degree=2)
    assert "compiled" not in (imp.card.get("loss") or {})
    assert any("compile.components loss" in n for n in imp.notes)


def test_torchtitan_import_without_components_names_the_assumption():
    """torchtitan configs before bbb1b616 (2025-04-02) had no compile.components and compiled the model alone: the
    importer reads the 0.2.2 default and says so; an explicit components list needs no such note."""
    assert any("compile.components absent" in n for n in _titan({"enable": True}).notes)
    assert not any("compile.components absent" in n
                   for n in _titan({"enable": True, "components": ["model", "loss"]}).notes)
    assert not any("compile.components absent" in n for n in _titan({"enable": False}).notes)
