"""The web API's ``gpus`` is searched whatever GPU kind the card names, as ``trainfit fit CARD --gpu`` searches its
kinds over a card file's ``hardware.gpu``. Before, ``fit_payload`` pinned the card's whole hardware section
(``fit_start(pin_hardware=True)``), ``hardware.gpu`` with it, and ``fit`` then searched that one kind: this body
answered a100-40gb rows only, with no warning."""

from trainfit.fit_search import fit_start
from trainfit.search import fit
from trainfit.serve.worker import fit_payload

CARD = {"model": "Qwen/Qwen3-0.6B",
        "hardware": {"gpu": "a100-40gb", "price_per_gpu_hour": 1.98, "currency": "CNY"}}


def test_gpus_in_the_body_are_the_kinds_searched():
    out = fit_payload({"card": CARD, "gpus": ["rtx4090", "h100-sxm"], "max_gpus": 2})
    assert {r["gpu"] for r in out["rows"]} == {"rtx4090", "h100-sxm"}
    # the rows `trainfit fit CARD --gpu rtx4090,h100-sxm --max-gpus 2` ranks (a card file: hardware not pinned)
    data, pinned = fit_start(CARD, card_file=True)
    cli = fit(data, gpus=["rtx4090", "h100-sxm"], max_gpus=2, pinned=pinned)
    assert [(r["gpu"], r["gpus"], r["step_seconds"]) for r in out["rows"]] == [
        (r.gpu, r.gpus, r.step_seconds) for r in cli.rows]


def test_without_gpus_the_cards_own_kind_is_held():
    out = fit_payload({"card": CARD, "max_gpus": 1})
    assert {r["gpu"] for r in out["rows"]} == {"a100-40gb"}


def test_a_stated_link_describes_the_cards_own_kind_as_on_the_command_line():
    # a card file's hardware.interconnect is its own kind's nodes (fit_search.link_on_kind): with gpus given the API
    # searches the other kinds on their catalog's link, as `trainfit fit CARD --gpu` does
    card = {"model": "Qwen/Qwen3-0.6B", "hardware": {"gpu": "rtx4090", "interconnect": "pcie_no_p2p"}}
    out = fit_payload({"card": card, "gpus": ["rtx4090", "h100-sxm"], "max_gpus": 2})
    data, pinned = fit_start(card, card_file=True)
    cli = fit(data, gpus=["rtx4090", "h100-sxm"], max_gpus=2, pinned=pinned)
    assert [(r["gpu"], r["gpus"], r["step_seconds"]) for r in out["rows"]] == [
        (r.gpu, r.gpus, r.step_seconds) for r in cli.rows]
    assert any("describes the card's own rtx4090 nodes" in w for w in cli.warnings)
