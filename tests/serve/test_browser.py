"""The page in headless Chromium (Debian's chromium + chromedriver, driven with selenium):
change the GPU count and the verdict and the chart change; the HTML report renders offline."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
try:
    import selenium  # noqa: F401

    HAVE_SELENIUM = True
except ImportError:
    HAVE_SELENIUM = False

pytestmark = pytest.mark.skipif(
    not (CHROMIUM and DRIVER and HAVE_SELENIUM),
    reason="browser test needs Debian's chromium and chromium-driver (apt-get install -y chromium chromium-driver)"
           " and selenium (the test extra)",
)


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="trainfit-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--window-size=1300,1000"):
        opts.add_argument(flag)
    # the Debian driver by path: selenium-manager never downloads anything
    driver = webdriver.Chrome(options=opts, service=Service(executable_path=DRIVER))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _wait(driver, cond, timeout=30):
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    # the page re-renders the verdict and the chart on every change: an element read mid-update is
    # stale, which only means "not yet"
    waiter = WebDriverWait(driver, timeout, poll_frequency=0.1,
                           ignored_exceptions=(NoSuchElementException, StaleElementReferenceException))
    return waiter.until(cond)


def _state(driver):
    from selenium.webdriver.common.by import By

    verdict = driver.find_element(By.ID, "verdict")
    charts = driver.find_elements(By.CSS_SELECTOR, "#report svg.plan-chart")
    return verdict.get_attribute("data-fits"), verdict.text, charts[0].get_attribute("outerHTML") if charts else ""


def test_gpu_count_changes_verdict_and_chart(browser, server):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    browser.get(server.url)
    _wait(browser, lambda d: _state(d)[0] in ("yes", "no") and _state(d)[2])
    fits, text, chart = _state(browser)
    assert fits == "yes" and text.startswith("FITS") and "8 x" in text  # Qwen3-8B full SFT on 8x A100 40GB
    assert 'data-verdict="fits"' in chart and 'class="capacity"' in chart
    assert not browser.find_element(By.ID, "error").is_displayed()

    count = browser.find_element(By.ID, "count")
    count.send_keys(Keys.CONTROL, "a")
    count.send_keys("1")
    _wait(browser, lambda d: _state(d)[0] == "no" and "1 x" in _state(d)[1] and "over by" in _state(d)[1])
    fits2, text2, chart2 = _wait(browser, lambda d: _state(d))
    assert text2.startswith("DOES NOT FIT") and "over by" in text2
    assert chart2 != chart and 'data-verdict="does-not-fit"' in chart2

    # a bad value shows the CLI's error line, and the page recovers
    count.send_keys(Keys.CONTROL, "a")
    count.send_keys("0")
    _wait(browser, lambda d: d.find_element(By.ID, "error").is_displayed())
    assert "hardware.gpus_per_node" in browser.find_element(By.ID, "error").text
    count.send_keys(Keys.CONTROL, "a")
    count.send_keys("8")
    _wait(browser, lambda d: _state(d)[0] == "yes")
    assert not browser.find_element(By.ID, "error").is_displayed()


def test_html_report_renders_offline(browser, tmp_path):
    from selenium.webdriver.common.by import By

    from trainfit.plan import make_plan
    from trainfit.report.html import write_plan_html
    from trainfit.spec.card import load_card_dict

    card = {"method": "grpo", "scope": "lora", "hardware": {"gpu": "rtx4090", "gpus_per_node": 4},
            "rollout": {"placement": "split", "gpus": 2}}
    path = write_plan_html(make_plan(load_card_dict(card)), tmp_path / "report.html")
    browser.get(path.resolve().as_uri())
    svg = browser.find_element(By.CSS_SELECTOR, "svg.plan-chart")
    assert svg.size["width"] > 400 and svg.size["height"] > 300
    groups = browser.find_elements(By.CSS_SELECTOR, "svg.plan-chart g.group")
    assert [g.get_attribute("data-group") for g in groups] == ["train", "rollout"]
    assert browser.find_elements(By.CSS_SELECTOR, "svg.rollout-chart")
    # every resource is inline: the page made no request
    entries = browser.execute_script("return performance.getEntriesByType('resource').length")
    assert entries == 0
    assert os.path.getsize(path) < 200_000
