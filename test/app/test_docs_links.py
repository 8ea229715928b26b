"""The README's and docs' relative links reach a file, and their #anchors a heading of it (as GitHub renders them):
a moved file or a renamed heading otherwise leaves a newcomer at a dead link."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def github_anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation but '-' and '_' dropped, spaces to '-'."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set:
    out, in_code = set(), False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            out.add(github_anchor(line.lstrip("#")))
    return out


def test_every_relative_link_and_anchor_of_the_docs_resolves():
    dead = []
    for doc in DOCS:
        text = re.sub(r"```.*?```", "", doc.read_text(), flags=re.S)
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):  # http(s), mailto: not ours to check here
                continue
            file, _, anchor = target.partition("#")
            path = (doc.parent / file).resolve() if file else doc
            if not path.exists():
                dead.append(f"{doc.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and path.suffix == ".md" and anchor not in anchors(path):
                dead.append(f"{doc.relative_to(ROOT)}: {target} (no such heading)")
    assert not dead, "\n".join(dead)


def test_the_anchor_rule_is_githubs():
    assert github_anchor(" 20 Hz on 2 cores (2026-12-03)") == "20-hz-on-2-cores-2026-12-03"
    assert github_anchor(" Any convex object: the quasi-static coarse model for it, and `coarse_model: auto`") == \
        "any-convex-object-the-quasi-static-coarse-model-for-it-and-coarse_model-auto"
