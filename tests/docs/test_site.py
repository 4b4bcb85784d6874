"""The documentation site: built with warnings as errors (broken links, missing references, public API
without a docstring fail), then opened in headless Chromium (Debian's chromium and chromium-driver):
the start page, the Python API reference and the search work, and a screenshot is saved.

Needs the docs extra (``pip install -e ".[docs]"``) and, for the browser, ``apt-get install chromium
chromium-driver``; skipped without them outside CI (CI installs both, and skips nothing).
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CI = bool(os.environ.get("CI"))


def _needs(module: str, why: str) -> None:
    import importlib.util

    if importlib.util.find_spec(module) is None and not CI:
        pytest.skip(f"{why}: pip install -e '.[docs]'")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    _needs("mkdocs", "the docs site needs mkdocs")
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "NO_MKDOCS_2_WARNING": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out


def test_the_site_builds_strict_with_every_reference_page(site):
    for page in ("index.html", "algorithms/index.html", "reference/api/index.html", "reference/options/index.html",
                 "reference/cli/index.html", "reference/tasks/index.html",
                 "reference/rewards-and-metrics/index.html"):  # fmt: skip
        assert (site / page).is_file(), page
    # one page per family, trainers and configs first (PPO's page opens the trainers' page)
    pages = {page.parent.name: page.read_text() for page in (site / "reference/api").glob("*/index.html")}
    assert {"trainers", "tasks", "rewards", "metrics", "runs", "core", "cards", "utils", "testing"} <= set(pages)
    where = {"PPOTrainer": "trainers", "PPOConfig": "trainers", "RewardTrainer": "trainers", "load_task": "tasks",
             "load_reward": "rewards", "MetricReward": "rewards", "open_run": "runs", "push_run": "runs",
             "gae": "core", "generate_completions": "core", "UpdateLoss": "core"}  # fmt: skip
    for name, page in where.items():
        assert f'id="{name}' in pages[page] or f'.{name}"' in pages[page], (name, page)
    trainers = pages["trainers"]
    assert trainers.index("ppo_config.PPOConfig") < trainers.index("card_and_push")
    assert "PPOConfig fields" in trainers and "<code>kl_coef</code>" in trainers
    # each trainer's constructor with its own config and every parameter described (docs/hooks/docstrings.py)
    ppo = trainers[trainers.index('id="hfrl.trainers.online.ppo_trainer.PPOTrainer"') :]
    ppo = ppo[: ppo.index('class="doc doc-heading"', 100)]
    assert "PPOConfig" in _text(ppo[: ppo.index("Bases")]) and "OnlineConfig" not in _text(ppo[: ppo.index("Bases")])
    for name in ("model", "args", "reward_funcs", "train_dataset", "peft_config", "ref_model", "metrics"):
        assert f"<code>{name}</code>" in ppo, name
    assert "frozen copy of the starting" in _text(ppo)  # ref_model's description, merged from OnlineTrainer
    # the right-hand table of contents lists public names only (vllm_generation_factory, not _trl_vllm_generation)
    for name, page in pages.items():
        toc = page[page.index("md-sidebar--secondary") :]
        entries = [_text(e).strip() for e in re.findall(r'<span class="md-ellipsis">(.*?)</span>', toc, re.S)]
        assert entries and not [e for e in entries if e.startswith("_")], (name, [e for e in entries if e[:1] == "_"])
    # nothing is fetched from elsewhere: no web fonts, no CDN (KaTeX is vendored)
    fetched = [
        p for p in site.rglob("*.html") if "fonts.googleapis.com" in p.read_text() or "cdn.jsdelivr" in p.read_text()
    ]
    assert not fetched, fetched[:3]


def _text(html: str) -> str:
    import html as html_module

    return html_module.unescape(re.sub(r"<[^>]+>", "", html))


def test_the_figures_the_pages_quote_are_the_codes(site):
    """Counts written into the pages at build time ({{ n_rewards }}...: docs/hooks/generate.py) equal
    the registries' and the error's own; no placeholder is left."""
    from hfrl.rewards import catalogue

    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    try:
        from generate import unknown_key_count
    finally:
        sys.path.remove(str(ROOT / "docs" / "hooks"))
    index = _text((site / "index.html").read_text())
    assert f"{len(catalogue.rewards())} rewards and {len(catalogue.metrics())} metrics" in index
    own_reward = _text((site / "how-to/own-reward/index.html").read_text())
    assert f"# {len(catalogue.rewards())} rewards:" in own_reward
    assert f"# {len(catalogue.metrics())} metrics" in own_reward
    first_run = _text((site / "get-started/first-run/index.html").read_text())
    assert f"({unknown_key_count()} known, nearest: learning_rate" in first_run
    left = [p.relative_to(site) for p in site.rglob("*.html") if "{{ n_" in p.read_text()]
    assert not left, left


@pytest.fixture(scope="module")
def served(site):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(scope="module")
def browser():
    _needs("selenium", "the browser test needs selenium")
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if (chromium is None or driver is None) and not CI:
        pytest.skip(
            "the browser test needs Debian's chromium and chromium-driver: apt-get install chromium chromium-driver"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1280,900"):  # fmt: skip
        options.add_argument(flag)
    drv = webdriver.Chrome(service=Service(driver), options=options)
    yield drv
    drv.quit()


def wait_for(browser, css: str, timeout: float = 20.0):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(browser, timeout).until(
        expected_conditions.visibility_of_element_located((By.CSS_SELECTOR, css))
    )


@pytest.mark.slow  # slow tier (issue 54's 10-minute default tier); CI runs it in full
def test_the_start_page_the_api_reference_and_search_work_in_chromium(served, browser, tmp_path):
    from selenium.webdriver.common.by import By

    browser.get(served + "/")
    assert "hfrl" in browser.title
    wait_for(browser, "nav.md-nav")
    browser.save_screenshot(str(ROOT / "build" / "docs-screenshot.png") if (ROOT / "build").is_dir()
                            else str(tmp_path / "docs-screenshot.png"))  # fmt: skip

    browser.get(served + "/reference/api/trainers/")
    heading = wait_for(browser, "h2#hfrl\\.trainers\\.online\\.ppo_trainer\\.PPOTrainer, [id$='PPOTrainer']")
    assert "PPOTrainer" in heading.text

    browser.get(served + "/")
    box = wait_for(browser, "input.md-search__input")
    box.click()
    box.send_keys("advantage estimator")
    from selenium.webdriver.support.ui import WebDriverWait

    def searched(drv) -> str | None:  # "Initializing search" shows until the index has loaded
        text = drv.find_element(By.CSS_SELECTOR, ".md-search-result__meta").text
        return text if "matching" in text.lower() else None

    meta = WebDriverWait(browser, 30).until(searched)
    assert not meta.lower().startswith("no"), meta
    assert browser.find_element(By.CSS_SELECTOR, "li.md-search-result__item").text.strip()


# Every table's right edge, against its article's (px): none may run under the right-hand table of
# contents (at 1280 px the reference tables did, by about 170 px, their help cut mid-word).
TABLE_OVERFLOW_JS = """
const out = [];
for (const table of document.querySelectorAll('article table')) {
  const article = table.closest('article').getBoundingClientRect();
  const over = table.getBoundingClientRect().right - article.right;
  if (over > 1) out.push([Math.round(over), table.rows[0].textContent.trim().slice(0, 60)]);
}
return out;
"""


@pytest.mark.slow  # slow tier (issue 54's 10-minute default tier); CI runs it in full
def test_no_table_runs_past_its_article_at_1280_px(site, served, browser):
    assert browser.get_window_size()["width"] == 1280
    pages = sorted(p.parent.relative_to(site).as_posix() for p in site.rglob("index.html"))
    assert len(pages) >= 30 and "reference/options" in pages
    wide = {}
    for page in pages:
        browser.get(f"{served}/{page}/" if page != "." else f"{served}/")
        wait_for(browser, "article")
        over = browser.execute_script(TABLE_OVERFLOW_JS)
        if over:
            wide[page] = over
    assert not wide, wide
