"""MkDocs hooks (mkdocs.yml `hooks:`; no plugin to install).

The command-line reference is generated from the argparse parser of nightshift/cli.py each time the site
is built, so it cannot drift from `nightshift --help`: reference/cli.md holds the marker below and this
hook replaces it. tests/test_docs.py calls `cli_reference()` directly.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

MARKER = "<!-- cli-reference: generated from nightshift/cli.py by docs/hooks.py -->"
ROOT = Path(__file__).resolve().parent.parent


def build_parser() -> argparse.ArgumentParser:
    """The CLI's own parser (whatever nightshift/cli.py calls its factory)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from nightshift import cli

    factory = getattr(cli, "build_parser", None) or getattr(cli, "_parser")
    return factory()


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """name -> parser of every `nightshift COMMAND`, in the order --help lists them."""
    out: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:  # argparse keeps subcommands in its _SubParsersAction only
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out.setdefault(name, sub)
    return out


def _cell(text: str) -> str:
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _option(action: argparse.Action) -> str:
    if action.option_strings:
        names = ", ".join(f"`{o}`" for o in action.option_strings)
        if action.nargs == 0:
            return names
        metavar = action.metavar or (action.dest.upper() if not action.choices else "{" + ",".join(action.choices) + "}")
        return f"{names} `{metavar}`"
    return f"`{action.metavar or action.dest}`"


def _default(action: argparse.Action) -> str:
    if action.required:
        return "required"
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS):
        return ""
    return f"`{action.default}`"


def cli_reference(parser: argparse.ArgumentParser | None = None) -> str:
    """Markdown: one section per command with its description, usage and a table of its arguments."""
    parser = parser or build_parser()
    lines = [_cell(parser.description or ""), "", "```text", parser.format_usage().strip(), "```", ""]
    commands = subcommands(parser)
    lines += ["| command | what it does |", "|---|---|"]
    lines += [f"| [`nightshift {n}`](#nightshift-{n}) | {_cell((s.description or '').split('. ')[0])} |"
              for n, s in commands.items()]
    lines.append("")
    shared = [a for a in parser._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]
    if shared:
        lines += ["Options every command takes:", "", "| option | meaning |", "|---|---|"]
        lines += [f"| {_option(a)} | {_cell(a.help or '')} |" for a in shared]
        lines.append("")
    for name, sub in commands.items():
        lines += [f"## nightshift {name}", "", _cell(sub.description or ""), "", "```text",
                  sub.format_usage().strip(), "```", ""]
        actions = [a for a in sub._actions if not isinstance(a, argparse._HelpAction)]
        if actions:
            lines += ["| argument | default | meaning |", "|---|---|---|"]
            for a in actions:
                choices = f" One of {', '.join(f'`{c}`' for c in a.choices)}." if a.choices and a.option_strings else ""
                lines.append(f"| {_option(a)} | {_default(a)} | {_cell(a.help or '')}{choices} |")
            lines.append("")
    return "\n".join(lines)


def on_page_markdown(markdown: str, page, config, files) -> str:
    if MARKER in markdown:
        return markdown.replace(MARKER, cli_reference())
    return markdown
