"""What `fit` holds (``fit_search.fit_pins``): model, method and scope with or without a card file; a card file's
other fields but its hardware and its accumulation (chosen per row to hold the global batch)."""

from trainfit.cli.common import default_card_dict
from trainfit.fit_search import BatchBasis, batch_basis, fit_pins, fit_start


def test_the_default_card_holds_what_to_train_only():
    assert fit_pins(default_card_dict(), card_file=False) == {"model", "method", "scope"}


def test_the_same_card_as_a_file_holds_what_it_writes_but_hardware_and_accumulation():
    held = fit_pins(default_card_dict(), card_file=True)
    assert {"model", "method", "scope", "batch.micro_batch_size", "batch.seq_len", "parallel.strategy"} <= held
    assert not {k for k in held if k.startswith("hardware")}
    assert "batch.grad_accum" not in held and "batch" not in held


def test_search_scope_leaves_scope_open_on_both_paths():
    for card_file in (False, True):
        assert "scope" not in fit_pins(default_card_dict(), card_file=card_file, search_scope=True)


def test_the_basis_is_per_token_only_with_both_batch_sizes_pinned_and_no_global_batch():
    both = frozenset({"batch.micro_batch_size", "batch.grad_accum"})
    assert batch_basis(rl=False, pinned=both, global_batch=None) is BatchBasis.PER_TOKEN
    assert batch_basis(rl=False, pinned=both, global_batch=16) is BatchBasis.GLOBAL_BATCH
    assert batch_basis(rl=False, pinned=frozenset({"batch.micro_batch_size"}), global_batch=None) is BatchBasis.GLOBAL_BATCH
    assert batch_basis(rl=True, pinned=both, global_batch=None) is BatchBasis.ROLLOUT_BATCH


def test_a_section_given_whole_pins_each_field_it_writes():
    """``--set 'batch={micro_batch_size: 1, grad_accum: 4, seq_len: 1024}'`` (or ``overrides={"batch": {...}}``) holds
    the micro-batch and the accumulation as the two single-field ``--set``s do: before, only the key ``batch`` was
    added, which no rule reads, so the rows trained micro-batch 8 on a global-batch basis."""
    section = {"micro_batch_size": 1, "grad_accum": 4, "seq_len": 1024}
    for kwargs in ({"sets": (("batch", section),)}, {"overrides": {"batch": section}}):
        data, pinned = fit_start(default_card_dict(), card_file=False, **kwargs)
        assert {"batch.micro_batch_size", "batch.grad_accum", "batch.seq_len"} <= pinned
        assert data["batch"]["micro_batch_size"] == 1
        assert batch_basis(rl=False, pinned=pinned, global_batch=None) is BatchBasis.PER_TOKEN
