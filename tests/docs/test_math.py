"""The equations of the docs site: LaTeX display math (``$$`` blocks, read by ``pymdownx.arithmatex`` in
generic mode), rendered in the browser by the KaTeX vendored in ``docs/vendor/katex/`` (no CDN) through
``docs/javascripts/katex.js``.

The first tests read the sources only. The last two (slow tier) build the site and open its pages that hold
equations in headless Chromium with the fixtures of ``test_site.py`` (skipped as it skips, without the
docs extra or without Chromium): every equation rendered by KaTeX, none a KaTeX error, the vendored
files and fonts served from the site itself.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.docs.test_site import browser, served, site  # noqa: F401  (pytest fixtures, used by name)

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
KATEX = DOCS / "vendor" / "katex"
ALGORITHMS = DOCS / "algorithms.md"
VENDORED = ("katex.min.js", "katex.min.css", "contrib/auto-render.min.js", "LICENSE")
FENCE = re.compile(r"^\s*(```|~~~)")


def pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.md") if not {"hooks", "vendor"} & set(p.relative_to(DOCS).parts))


def math_blocks(text: str) -> list[str]:
    """The bodies of the ``$$`` blocks (a ``$$`` line opens, the next one closes), fenced code left out."""
    blocks, body, fenced = [], None, False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and line.strip() == "$$":
            if body is None:
                body = []
            else:
                blocks.append("\n".join(body))
                body = None
        elif body is not None:
            body.append(line)
    assert body is None, "a $$ block that never closes"
    return blocks


def indented_code_blocks(text: str) -> list[str]:
    """Lines that Markdown reads as an indented code block: four spaces after a blank line (fences and
    list items' continuation lines, indented two, are not)."""
    lines, found, fenced = text.splitlines(), [], False
    for before, line in zip([""] + lines, lines, strict=False):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and line.startswith("    ") and line.strip() and not before.strip():
            found.append(line)
    return found


def built(page: Path) -> str:
    """The folder of ``page`` in the built site, relative to its root (MkDocs' directory URLs)."""
    path = page.relative_to(DOCS)
    return (path.parent if path.stem == "index" else path.with_suffix("")).as_posix()


def config() -> dict:
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))


def test_the_equations_are_latex_blocks_not_indented_code():
    text = ALGORITHMS.read_text(encoding="utf-8")
    assert not indented_code_blocks(text), "an equation left as an indented code block: write it as $$ ... $$"
    assert sum(line.strip() == "$$" for line in text.splitlines()) % 2 == 0
    assert len(math_blocks(text)) >= 17
    lines = text.splitlines() + [""]
    marks = [i for i, line in enumerate(lines) if line.strip() == "$$"]
    for opens, closes in zip(marks[::2], marks[1::2], strict=True):  # arithmatex reads a block between blank lines
        assert not lines[opens - 1].strip() and not lines[closes + 1].strip(), f"line {opens + 1}: a blank line around"
    gpu = (DOCS / "how-to" / "gpu.md").read_text(encoding="utf-8")
    assert any("vllm" in block for block in math_blocks(gpu)) and "w_t = min(" not in gpu
    for page in pages():  # every page's blocks open and close
        math_blocks(page.read_text(encoding="utf-8"))


def test_mkdocs_enables_arithmatex_and_loads_the_vendored_katex():
    cfg = config()
    extensions = [e if isinstance(e, dict) else {e: None} for e in cfg["markdown_extensions"]]
    assert {"pymdownx.arithmatex": {"generic": True}} in extensions
    assert cfg["extra_css"][:2] == ["stylesheets/extra.css", "vendor/katex/katex.min.css"]
    scripts = cfg["extra_javascript"]
    assert scripts == ["vendor/katex/katex.min.js", "vendor/katex/contrib/auto-render.min.js", "javascripts/katex.js"]
    for path in cfg["extra_css"] + scripts:
        assert (DOCS / path).is_file(), path
        assert not path.startswith(("http:", "https:", "//")), f"{path}: the site loads nothing from a CDN"
    assert "vendor/katex/README.md" in cfg["exclude_docs"]  # a note for maintainers, not a page
    script = (DOCS / "javascripts" / "katex.js").read_text(encoding="utf-8")
    assert "renderMathInElement" in script and ".arithmatex" in script and "throwOnError: false" in script


def test_the_vendored_katex_is_whole_and_its_fonts_resolve():
    for name in VENDORED:
        assert (KATEX / name).is_file(), name
    assert "MIT" in (KATEX / "LICENSE").read_text(encoding="utf-8")
    version = re.search(r'version:"([0-9.]+)"', (KATEX / "katex.min.js").read_text(encoding="utf-8"))
    assert version and f"katex@{version[1]}" in (KATEX / "README.md").read_text(encoding="utf-8")  # noted
    css = (KATEX / "katex.min.css").read_text(encoding="utf-8")
    faces = re.findall(r"@font-face\{[^}]*\}", css)
    assert len(faces) >= 20
    for face in faces:  # the first source of each face is a woff2 file that is here
        first = re.search(r"src:url\(([^)]+)\)", face)
        assert first and first[1].endswith(".woff2") and (KATEX / first[1]).is_file(), face


@pytest.mark.slow  # slow tier (issue 54's 10-minute default tier); CI runs it in full
def test_the_built_site_has_one_math_element_per_block(site):  # noqa: F811
    for page in pages():
        html = site / built(page) / "index.html"
        expected = len(math_blocks(page.read_text(encoding="utf-8")))
        # no other math: a stray "$...$" in prose or a docstring is not turned into an equation
        assert html.read_text(encoding="utf-8").count('class="arithmatex"') == expected, page
    for name in VENDORED[:3]:
        assert (site / "vendor" / "katex" / name).is_file(), name
    assert len(list((site / "vendor" / "katex" / "fonts").glob("*.woff2"))) == 20


@pytest.mark.slow  # slow tier (issue 54's 10-minute default tier); CI runs it in full
def test_katex_renders_every_equation_in_chromium(served, browser):  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    with_math = [p for p in pages() if math_blocks(p.read_text(encoding="utf-8"))]
    assert {"algorithms.md", "gpu.md"} <= {p.name for p in with_math}
    for page in with_math:
        url = f"{served}/{built(page)}/".replace("/./", "/")
        browser.get(url)
        blocks = len(math_blocks(page.read_text(encoding="utf-8")))

        def rendered(drv, blocks=blocks) -> bool:
            return len(drv.find_elements(By.CSS_SELECTOR, "div.arithmatex .katex-display .katex")) == blocks

        WebDriverWait(browser, 20).until(rendered, f"{url}: KaTeX did not render its {blocks} equations")
        assert len(browser.find_elements(By.CSS_SELECTOR, "div.arithmatex")) == blocks
        assert not browser.find_elements(By.CSS_SELECTOR, ".katex-error"), url
        loaded = browser.execute_async_script(
            "const done = arguments[0]; document.fonts.ready.then(() => done(["
            "performance.getEntriesByType('resource').filter(e => e.name.includes('/vendor/katex/'))"
            ".map(e => [e.name, e.responseStatus]), document.fonts.check('16px KaTeX_Main')]))"
        )
        resources, main_font = loaded
        assert main_font, url
        assert any(name.endswith(".woff2") for name, _ in resources), resources
        assert all(name.startswith(served) and status == 200 for name, status in resources), resources
