"""Headless Chromium for the explain page tests: Debian's chromium and chromium-driver, driven by selenium."""
from __future__ import annotations

import shutil
import tempfile
from contextlib import contextmanager

PAGE_LOAD_TIMEOUT = 30
"""Seconds before a page load or a script counts as hung."""

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1400,1000")


def chromium_paths() -> tuple[str | None, str | None]:
    return shutil.which("chromium") or shutil.which("chromium-browser"), shutil.which("chromedriver")


@contextmanager
def headless_chromium():
    """A selenium driver on a fresh profile, closed (and the profile removed) on exit."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, driver_path = chromium_paths()
    with tempfile.TemporaryDirectory(prefix="gradgen-chromium-") as profile:
        options = webdriver.ChromeOptions()
        options.binary_location = browser
        for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
            options.add_argument(flag)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(service=Service(driver_path), options=options)
        try:
            driver.set_page_load_timeout(PAGE_LOAD_TIMEOUT)
            driver.set_script_timeout(PAGE_LOAD_TIMEOUT)
            yield driver
        finally:
            driver.quit()
