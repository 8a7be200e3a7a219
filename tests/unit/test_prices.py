"""The catalog's price table: dated, sourced, per GPU kind; a user's own table; a price applies only to its GPU kind."""

import re

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.prices import catalog_price_table, exchange_rates, load_price_table
from trainfit.compute.cost import for_gpu, parse_price, price_preset
from trainfit.errors import CardError
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict


def test_every_catalog_price_is_dated_sourced_and_for_a_catalog_gpu():
    table = catalog_price_table()
    assert len(table.entries) >= 10
    for p in table.entries:
        assert resolve_gpu(p.gpu).id == p.gpu
        assert re.fullmatch(r"20\d\d-\d\d-\d\d", p.as_of), p.id
        assert p.source.startswith(("https://", "seed 000")), p.id
        assert p.currency in ("CNY", "USD") and p.per_gpu_hour > 0 and p.market in ("cn-rental", "cloud-on-demand")
    ids = {p.id: p for p in table.entries}
    # seed 000, section 八: 专业版 1.98 元/卡时, 青春版 1.24 元/卡时 (as of 2026-10-02)
    assert (ids["rtx4090-pro"].per_gpu_hour, ids["rtx4090-pro"].currency, ids["rtx4090-pro"].as_of) == (1.98, "CNY", "2026-10-02")
    assert (ids["rtx4090-youth"].per_gpu_hour, ids["rtx4090-youth"].gpu) == (1.24, "rtx4090")


def test_cheapest_entry_per_gpu_and_market():
    table = catalog_price_table()
    assert table.for_gpu("rtx4090").id == "rtx4090-youth"
    assert table.for_gpu("rtx4090", market="cloud-on-demand") is None
    h100 = table.for_gpu("h100-sxm", market="cloud-on-demand")
    assert h100.per_gpu_hour == min(p.per_gpu_hour for p in table.entries if p.gpu == "h100-sxm")


def test_a_price_applies_only_to_its_gpu_kind():
    pro = price_preset("rtx4090-pro")
    assert for_gpu(pro, "rtx4090") is pro
    with pytest.raises(CardError, match="is for rtx4090, not a100-40gb"):
        for_gpu(pro, "a100-40gb")
    assert for_gpu(parse_price("2USD"), "a100-40gb").gpu == "a100-40gb"
    with pytest.raises(CardError, match="hardware.price_preset: price 'rtx4090-pro' is for rtx4090, not a100-40gb"):
        make_plan(load_card_dict({"hardware": {"gpu": "a100-40gb", "price_preset": "rtx4090-pro"}}))
    plan = make_plan(load_card_dict({"scope": "qlora", "hardware": {"gpu": "4090", "gpus_per_node": 4, "price_preset": "rtx4090-pro"}}))
    assert plan.cost_per_hour == pytest.approx(7.92)  # seed 000, section 八: 4 cards, 7.92 元/小时


def test_user_price_table(tmp_path):
    path = tmp_path / "p.json"
    path.write_text('{"entries": [{"gpu": "h100", "per_gpu_hour": 2.5, "currency": "usd", "as_of": "2026-11-30"}]}')
    table = load_price_table(path)
    assert table.entries[0].gpu == resolve_gpu("h100").id and table.entries[0].currency == "USD"
    bad = [
        ('{"entries": []}', "non-empty list"),
        ('{"entries": [{"gpu": "h100", "per_gpu_hour": 2.5}]}', "'currency' is required"),
        ('{"entries": [{"gpu": "h100", "per_gpu_hour": "cheap", "currency": "USD"}]}', "must be a number"),
        ('{"entries": [{"gpu": "nvidia-9000", "per_gpu_hour": 1, "currency": "USD"}]}', "nvidia-9000"),
        ('{"entries": [{"gpu": "h100", "per_gpu_hour": 1, "currency": "USD", "colour": "red"}]}', "unknown field 'colour'"),
        ("{not json", "not valid JSON/YAML"),
    ]
    for text, words in bad:
        path.write_text(text)
        with pytest.raises(CardError, match=re.escape(words)) as err:
            load_price_table(path)
        assert "\n" not in str(err.value)


def test_exchange_rates():
    fx = exchange_rates(["USD:CNY=7.2"])
    assert fx[("USD", "CNY")] == 7.2 and fx[("CNY", "USD")] == pytest.approx(1 / 7.2)
    for item in ("USD=7", "USD:CNY=0", "USD:CNY=x", "US:CNY=7"):
        with pytest.raises(CardError):
            exchange_rates([item])


def test_plan_cost_line_reads_as_a_sentence(capsys):
    from trainfit.cli.main import main

    assert main(["plan", "--gpu", "rtx4090", "--scope", "qlora", "--set", "hardware.price_preset=rtx4090-pro"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("cost:"))
    assert "excludes Compute rental only" not in out
    assert line.startswith("cost: 15.84 CNY/h for 8 GPUs at 1.98 CNY per GPU-hour (rtx4090-pro, suanjiayun.com, as of 2026-10-02).")
    assert "Compute rental only. Not included:" in out.replace("\n", " ")
