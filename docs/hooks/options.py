"""MkDocs hook: the tables of request options, made from the families' own schemas.

A page holding ``<!-- options:FAMILY -->`` (a family's name, e.g. ``pocket-tts``) gets that
family's request options there: name, accepted values, help and where the bounds come from,
read from ``ModelFamily.options`` (the one place every front end checks them), so the
documentation cannot drift from the code.
"""

from __future__ import annotations

import re

MARK = re.compile(r"<!-- options:([a-z0-9-]+) -->")


def table(family_name: str) -> str:
    from vocalis import families

    family = next(f for f in families.all_families() if f.name == family_name)
    rows = ["| option | accepts | what it does | bounds |", "|---|---|---|---|"]
    for opt in family.options:
        why = opt.range.why if opt.range is not None else ""
        rows.append(f"| `{opt.name}` | {opt.describe()} | {opt.help} | {why} |")
    return "\n".join(rows)


def on_page_markdown(markdown, page, config, files):
    return MARK.sub(lambda m: table(m.group(1)), markdown)
