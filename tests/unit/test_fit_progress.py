"""`fit`'s progress bar moves on a large search: ``fit_search._over_workers`` reports after chunks of at most
``PROGRESS_CHUNK`` items, over forked workers and in one process alike, and the result does not depend on the split.

Before, a large space was cut into four chunks a worker: the open GRPO search of Qwen3.5-27B on RTX 4090s
(150,912 plans, about 14 CPU-minutes) moved the bar eight times, and one worker moved it once, at the end."""

import multiprocessing

import pytest

from trainfit import fit_search

N = 150_912  # the open GRPO search's plans (fit_search.PROGRESS_CHUNK's docstring)


def _items(lo, hi):
    return list(range(lo, hi))


@pytest.mark.parametrize("workers", [1, 2])
def test_progress_is_reported_every_chunk_and_the_items_are_unchanged(workers):
    if workers > 1 and "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("no fork on this platform")
    seen = []
    parts = fit_search._over_workers(_items, N, workers, seen.append)
    assert [x for part in parts for x in part] == list(range(N))
    assert len(seen) >= N // fit_search.PROGRESS_CHUNK
    assert seen == sorted(seen) and seen[-1] == pytest.approx(1.0)
    assert max(len(part) for part in parts) <= fit_search.PROGRESS_CHUNK


def test_small_spaces_stay_in_one_piece():
    seen = []
    assert fit_search._over_workers(_items, 10, 1, seen.append) == [list(range(10))]
    assert seen == [1.0]
