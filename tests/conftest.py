import os

import pytest

# Tests never reach the Hugging Face hub; resolution must fall back to the catalog and local files.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(autouse=True)
def _no_user_calibration(monkeypatch, tmp_path_factory):
    """Plans in tests never read the user's calibration file (~/.config/trainfit/calibration.json):
    TRAINFIT_CALIBRATION names a file that does not exist."""
    monkeypatch.setenv("TRAINFIT_CALIBRATION", str(tmp_path_factory.getbasetemp() / "no-calibration.json"))
