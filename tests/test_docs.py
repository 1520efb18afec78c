"""The documentation as a specification of the product: every nightshift.toml key the code accepts is
documented (and nothing else), the command-line reference is generated from the parser, the pages speak
the product's language, and the site builds offline with mkdocs --strict."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lattice.ir import MAINTAIN
from nightshift.config import AGGREGATE_KEYS, CAPTURE_KEYS, KNOWN_KEYS, NAMED

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
CONFIG_MD = DOCS / "reference" / "configuration.md"
PRODUCT = ("nightshift", "runtime", "warehouse", "spark_jobs", "dags", "lattice", "bin")


def _hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _documented_keys() -> dict[str, set[str]]:
    """section -> keys of the `## [section]` tables of configuration.md (first column, `key`)."""
    out: dict[str, set[str]] = {}
    section, in_keys = None, False
    for line in CONFIG_MD.read_text().splitlines():
        m = re.match(r"^## \[([a-z_]+)(?:\.&lt;table&gt;)?\]", line)
        if m:
            section = m.group(1)
            out[section] = set()
            continue
        if line.startswith("## "):
            section = None
        if not line.startswith("|"):
            in_keys = False
        elif line.startswith("| key |"):
            in_keys = True  # a table of keys (the [views] table of values is not one)
        m = re.match(r"^\| `([^`]+)` \|", line)
        if section and in_keys and m:
            out[section].add(m.group(1))
    return out


def test_every_config_key_is_documented_and_every_documented_key_is_accepted():
    documented = _documented_keys()
    assert set(documented) == set(KNOWN_KEYS), "configuration.md has one `## [section]` per section config.py knows"
    for section, keys in KNOWN_KEYS.items():
        if NAMED in keys and section != "capture":  # [capture.<table>]'s own keys are checked below
            names = documented[section]
            assert names and all(k.startswith("<") for k in names if "." not in k), (section, names)
            continue
        if NAMED not in keys:
            assert documented[section] == set(keys), f"[{section}]: documented {documented[section]}, accepted {keys}"
    assert documented["capture"] == set(CAPTURE_KEYS)
    assert {k.split(".", 1)[1] for k in documented["aggregates"] if "." in k} == set(AGGREGATE_KEYS)
    text = CONFIG_MD.read_text()
    views = text.split("## [views]", 1)[1].split("\n## ", 1)[0]
    assert set(re.findall(r"^\| `([a-z]+)` \| ", views, re.M)) - {"<view>"} == set(MAINTAIN)


def test_config_refuses_what_is_not_documented(tmp_path):
    from nightshift.config import load_project
    from runtime.errors import ConfigError

    (tmp_path / "nightshift.toml").write_text('[warehouse]\nurl = "duckdb:///w.duckdb"\nurls = "x"\n')
    with pytest.raises(ConfigError, match=r"\[warehouse\] unknown key\(s\) urls"):
        load_project(tmp_path)
    (tmp_path / "nightshift.toml").write_text('[warehous]\nurl = "duckdb:///w.duckdb"\n')
    with pytest.raises(ConfigError, match=r"unknown section\(s\) \[warehous\]"):
        load_project(tmp_path)


def test_every_environment_variable_is_documented():
    used = set()
    for folder in PRODUCT:
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and path.suffix in ("", ".py") and "__pycache__" not in path.parts:
                used |= set(re.findall(r"\bNIGHTSHIFT_[A-Z][A-Z_]*[A-Z]\b", path.read_text(errors="ignore")))
    used |= set(re.findall(r"\bNIGHTSHIFT_[A-Z][A-Z_]*[A-Z]\b", (ROOT / "Makefile").read_text()))
    missing = sorted(v for v in used if v not in CONFIG_MD.read_text())
    assert not missing, f"environment variables missing from docs/reference/configuration.md: {missing}"


def test_the_cli_reference_is_generated_from_the_parser():
    hooks = _hooks()
    parser = hooks.build_parser()
    commands = hooks.subcommands(parser)
    assert {"init", "plan", "run", "status"} <= set(commands)
    page = (DOCS / "reference" / "cli.md").read_text()
    assert hooks.MARKER in page, "reference/cli.md holds the marker the hook replaces"
    generated = hooks.on_page_markdown(page, None, None, None)
    for name, sub in commands.items():
        assert f"## nightshift {name}" in generated
        for action in sub._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert f"`{option}`" in generated, (name, option)
    assert "## nightshift" not in page, "the page itself holds no hand-written command sections"


def test_the_generated_cli_reference_speaks_product():
    assert not re.search(r"paper 00\d|Section \d|Figure \d", _hooks().cli_reference())


FORBIDDEN = [
    (re.compile(r"\bissues? #?\d+", re.I), "an issue number"),
    (re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b"), "a commit-like hash"),
    (re.compile(r"load average|\bload \d\.\d", re.I), "a machine load"),
    (re.compile(r"\bthis session\b|\bthe team\b|DESIGN\.md|ARCHITECTURE\.md|RUNBOOK\.md|docs/research", re.I),
     "team-process words or a missing file"),
    (re.compile(r"\d+ passed|\bpassed in \d|\d+:\d\d wall|suite took", re.I), "a test-suite timing"),
]
PAPERS = re.compile(r"\bpapers? 00\d|\b00[0-4] ?§|\bFigure \d|\bAppendix [AB]\b|\bTable [12]\b|§ ?\d")


def _user_pages():
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


@pytest.mark.parametrize("page", _user_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_docs_speak_product(page):
    text = page.read_text()
    prose = re.sub(r"https?://\S+", "", text)
    for pattern, what in FORBIDDEN:
        m = pattern.search(prose)
        assert not m, f"{page.relative_to(ROOT)}: {what}: {m.group(0)!r}"
    if page.name != "how-it-works.md":
        m = PAPERS.search(prose)
        assert not m, f"{page.relative_to(ROOT)}: research references belong on how-it-works.md: {m.group(0)!r}"


def test_the_readme_is_short_and_links_every_page():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 90
    for page in sorted(DOCS.rglob("*.md")):
        assert f"docs/{page.relative_to(DOCS)}" in readme, page


def test_the_site_builds_offline_with_strict(tmp_path):
    mkdocs = Path(sys.executable).parent / "mkdocs"
    r = subprocess.run([str(mkdocs), "build", "--strict", "-q", "-d", str(tmp_path / "site")], cwd=ROOT,
                       capture_output=True, text=True, timeout=120, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert r.returncode == 0, r.stderr[-3000:]
    cli = (tmp_path / "site" / "reference" / "cli.html").read_text()
    assert "nightshift run" in cli and "nightshift status" in cli
    for html in (tmp_path / "site").rglob("*.html"):
        assets = re.findall(r"""(?:src|href)=["'](https?://[^"']+\.(?:css|js|woff2?))""", html.read_text())
        assert not assets, f"{html.name} loads {assets} from the network"
