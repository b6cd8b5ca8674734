"""The docs say true things about the tree: every Hydra-app command line shown in docs/*.md and the READMEs composes
with its config (a renamed key fails here, not on a user's cluster; the commands are composed, not run: most take
hours), every repository path and relative link they cite exists, and benchmarks/results/ holds exactly the JSONs
the docs cite, each with its command, machine and git revision."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from pcr_ray.commands.hydra_app import compose_config, positional_override

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").glob("*.md"))
READMES = [ROOT / "README.md", ROOT / "cluster" / "README.md"]
RESULTS = ROOT / "benchmarks" / "results"
CONFIGS = {"make-pairs": "make_pairs", "train-prm": "train_prm", "mine-pairs": "mine_pairs", "eval-prm": "eval_prm",
           "evaluate": "evaluate", "serve": "serve", "data": "data", "solve": "solve", "sft": "sft",
           "demo": "evaluate", "reproduce": "reproduce", "listwise-rounds": "listwise_rounds",
           "summarize": "summarize", "average-prm": "average_prm", "verify": "verify", "schema": "schema",
           "primitives": "primitives"}
MODULE_APPS = {"pcr_ray.evaluate": "evaluate"}  # `python -m pcr_ray.evaluate ...` (as in `ray job submit ... --`)
PATH_ROOTS = ("pcr_ray/", "benchmarks/", "tests/", "cluster/", "docs/")


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _bash_lines(text: str) -> list[str]:
    """The lines of the ```bash blocks, continuation backslashes joined."""
    return [line for block in re.findall(r"```bash\n(.*?)```", text, re.S)
            for line in re.sub(r"\\\n\s*", " ", block).splitlines()]


def _app_args(words: list[str]) -> tuple[str, list[str]] | None:
    """(app, overrides) of one shell line that runs a Hydra app, else None."""
    if len(words) >= 2 and words[0] == "pcr-ray" and words[1] in CONFIGS:
        app, args = words[1], words[2:]
        if app == "data":
            args = args[1:] if args[:1] == ["build"] else args
        if app == "solve":
            args = args[1:]  # the problem text
        if app == "verify":
            args = positional_override("traces", args)
        if app == "demo":
            args = ["experiment=demo", *args]
        return app, args
    for i in range(len(words) - 2):
        if words[i : i + 2] == ["python", "-m"] and words[i + 2] in MODULE_APPS:
            return MODULE_APPS[words[i + 2]], words[i + 3 :]
    return None


def doc_commands(paths: list[Path]) -> list[tuple[str, str, list[str]]]:
    """(file, app, overrides) of each Hydra-app command in a bash block of `paths`; a sweep (`-m`, `key=a,b`) is
    composed at its first point."""
    found = []
    for path in paths:
        if not path.exists():
            continue
        for line in _bash_lines(path.read_text()):
            found_app = _app_args(shlex.split(line, comments=True))
            if found_app is None:
                continue
            app, args = found_app
            if "-m" in args:
                args = [re.sub(r"^([^=]+=)([^,\[{]+),.*$", r"\1\2", a) for a in args if a != "-m"]
            found.append((_rel(path), app, args))
    return found


COMMANDS = doc_commands(DOCS + READMES)


def test_the_docs_show_the_commands_this_test_checks() -> None:
    shown = {c for _, c, _ in COMMANDS}
    assert shown == set(CONFIGS), f"no docs line for {set(CONFIGS) - shown}"
    in_docs = doc_commands(DOCS)
    assert len(in_docs) >= 40, f"docs/*.md show {len(in_docs)} Hydra-app commands; this test expects 40 or more"


@pytest.mark.parametrize(("doc", "command", "overrides"), COMMANDS,
                         ids=[f"{d}:{c}:{' '.join(o)[:60]}" for d, c, o in COMMANDS])
def test_doc_command_composes(doc, command, overrides) -> None:
    try:
        compose_config(CONFIGS[command], overrides)
    except Exception as exc:  # noqa: BLE001  (hydra's override and composition errors)
        pytest.fail(f"{doc}: `pcr-ray {command} {shlex.join(overrides)}` does not compose: {exc}")


def _expand_braces(token: str) -> list[str]:
    """`a{,_b}.json` -> [a.json, a_b.json] (nested and repeated groups too)."""
    m = re.search(r"\{([^{}]*)\}", token)
    if m is None:
        return [token]
    return [t for alt in m.group(1).split(",") for t in _expand_braces(token[: m.start()] + alt + token[m.end() :])]


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub renders it."""
    s = re.sub(r"[`*_]", "", heading.strip().lower())
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return {_slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}


def test_doc_paths_and_links_exist() -> None:
    """Every repository path a docs page names in backticks, and every relative link with its anchor, exists."""
    missing = []
    for doc in DOCS:
        text = doc.read_text()
        for token in re.findall(r"`([^`\s]+)`", text):
            token = token.rstrip(".,:;)")
            if not token.startswith(PATH_ROOTS) or re.search(r"[<*]|NAME|\bCK\b", token):
                continue
            for path in _expand_braces(token.split("#")[0].split("::")[0]):
                if not (ROOT / path).exists():
                    missing.append(f"{_rel(doc)}: `{token}` ({path} does not exist)")
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                missing.append(f"{_rel(doc)}: link outside the repository: {target}")
                continue
            file, _, anchor = target.partition("#")
            dest = (doc.parent / file).resolve() if file else doc
            if not dest.exists():
                missing.append(f"{_rel(doc)}: link to {target}: {dest} does not exist")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                missing.append(f"{_rel(doc)}: link to {target}: no heading #{anchor} in {_rel(dest)}")
    assert not missing, "\n".join(missing)


def _committed_results() -> list[str]:
    """The result files under benchmarks/results/ (git's list when this is a checkout, else the folder's)."""
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "benchmarks/results"], capture_output=True,
                             text=True, check=True, timeout=30).stdout.split()
        if out:
            return [str(Path(p).relative_to("benchmarks/results")) for p in out]
    except (OSError, subprocess.SubprocessError):
        pass
    return [str(p.relative_to(RESULTS)) for p in RESULTS.rglob("*") if p.is_file()]


def test_every_committed_result_is_cited_and_has_its_provenance() -> None:
    """benchmarks/results/ keeps only JSON the docs cite, each with its command, machine and git revision."""
    text = "\n".join(p.read_text() for p in [*DOCS, *READMES])  # benchmarks/README.md lists scripts, cites nothing
    cited = {name for token in re.findall(r"`([^`\s]+\.json)`", text) for name in _expand_braces(token)}
    cited_names = {Path(c).name for c in cited}
    problems = []
    for rel in _committed_results():
        if not rel.endswith(".json"):
            problems.append(f"{rel}: not a JSON summary (records go to the cache)")
            continue
        if rel not in cited and Path(rel).name not in cited_names:
            problems.append(f"{rel}: cited by no docs page")
        data = json.loads((RESULTS / rel).read_text())
        lacking = [k for k in ("command", "machine", "git_revision") if not data.get(k)]
        if lacking:
            problems.append(f"{rel}: no {', '.join(lacking)}")
    assert not problems, "\n".join(problems)


def test_cited_results_exist() -> None:
    """Every result JSON a docs page names is in benchmarks/results/."""
    present = {Path(p).name for p in _committed_results()}
    missing = []
    for doc in DOCS:
        for token in re.findall(r"`([^`\s]+\.json)`", doc.read_text()):
            for name in _expand_braces(token):
                base = Path(name).name
                if re.match(r"(bench_|bsm_|eval_prm_|seed\d+_|gsm\d+_|data_build)", base) and base not in present:
                    missing.append(f"{_rel(doc)}: {name}")
    assert not missing, "cited but not in benchmarks/results/:\n" + "\n".join(missing)
