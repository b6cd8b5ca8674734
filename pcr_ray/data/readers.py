"""Readers for the real data sets in the shared data folder: GSM8K, MATH-500, MATH test, SciBench.

Each reader yields `Problem` records (plain Python, no Ray) and is registered as a data source
(pcr_ray.data.sources). `load_dataset(name)` is the single entry point.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pcr_ray.core.answers import last_boxed, parse_number
from pcr_ray.data.gsm8k_traces import convert_gsm8k
from pcr_ray.data.problem import Problem
from pcr_ray.data.sources import DATA_SOURCES, data_source
from pcr_ray.paths import data_dir as _default_data_dir

# the keys a `file` source takes beside its name (pcr_ray.data.files.iter_file)
FILE_KEYS: tuple[str, ...] = ("path", "format", "fields", "label", "split")


class DataMissingError(FileNotFoundError):
    """A data file is not where it should be; the message says what is missing and where to put it."""


def resolve_data_dir(data_dir: str | Path | None = None) -> Path:
    """The data folder: the argument, else pcr_ray.paths.data_dir() ($PCR_RAY_DATA or the user data folder)."""
    return Path(data_dir).expanduser().resolve() if data_dir else _default_data_dir()


# Where each data set is published (the Hugging Face hub), for the "missing" message and docs/data.md.
HUB_NAMES: dict[str, str] = {
    "gsm8k": "openai/gsm8k (config main; train and test splits, saved as JSON lines)",
    "math500": "HuggingFaceH4/MATH-500 (test split, saved as JSON lines)",
    "math": "the MATH test set (hendrycks/competition_math on the hub; its 12 subject folders as one JSON lines file)",
    "scibench": "the SciBench repository's dataset/original/*.json (xw27/scibench on the hub)",
}


def _expected(name: str) -> str:
    """What data set `name` reads, relative to the data folder ('' for a generated set or an unknown name)."""
    return DATA_SOURCES.get(name).files if name in DATA_SOURCES else ""


def data_files(name: str, data_dir: str | Path | None = None) -> list[Path]:
    """The files of the data folder that data set `name` reads, sorted (none for a generated set or when absent)."""
    pattern = _expected(name)
    return sorted(resolve_data_dir(data_dir).glob(pattern)) if pattern else []


def data_present(name: str, data_dir: str | Path | None = None) -> bool:
    """Whether the data folder holds what data set `name` reads (a generated set always does)."""
    return not _expected(name) or bool(data_files(name, data_dir))


def missing_data_hint(name: str, data_dir: str | Path | None = None) -> str:
    """One line: which file `name` needs, where, and where it is published."""
    root = resolve_data_dir(data_dir)
    rel = _expected(name) or name
    hub = HUB_NAMES.get(rel.split("/")[0], "")
    return (f"no {rel} in the data folder {root} ($PCR_RAY_DATA); put it there to add it"
            + (f" (published as {hub})" if hub else "") + ", docs/data.md")


def _require(path: Path, root: Path, what: str) -> Path:
    if not path.exists():
        rel = path.relative_to(root)
        hub = HUB_NAMES.get(rel.parts[0], "")
        raise DataMissingError(
            f"{what}: {path} is missing. Put the file at <data>/{rel} where <data> is the data folder {root} "
            f"($PCR_RAY_DATA, default ~/.local/share/pcr_ray/data)"
            + (f"; it is published as {hub}" if hub else "") + ". docs/data.md lists every file."
        )
    return path


def _read_jsonl(path: Path) -> Iterator[dict]:
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.strip()
            if not line:
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{lineno}: not valid JSON: {exc}") from None


def gsm8k_final_answer(solution: str) -> str:
    """The text after '####' in a GSM8K solution, commas removed."""
    if "####" not in solution:
        raise ValueError("GSM8K solution has no '####' line")
    return solution.rsplit("####", 1)[1].strip().replace(",", "")


def iter_gsm8k(split: str = "test", data_dir: str | Path | None = None, *, traces: bool = True,
               implicit: bool = True, results: list | None = None) -> Iterator[Problem]:
    """GSM8K train/test; with traces=True the calculator annotations are converted to gold traces.

    `results`, when given, collects each problem's ConversionResult (for conversion statistics).
    """
    if split not in ("train", "test"):
        raise ValueError(f"GSM8K split must be 'train' or 'test', got {split!r}")
    root = resolve_data_dir(data_dir)
    path = _require(root / "gsm8k" / f"{split}.jsonl", root, f"GSM8K {split}")
    convert = convert_gsm8k if traces else None
    for i, row in enumerate(_read_jsonl(path)):
        question, solution = row["question"], row["answer"]
        answer = gsm8k_final_answer(solution)
        trace, steps = None, None
        if convert is not None:
            res = convert(question, solution, implicit=implicit)
            if results is not None:
                results.append(res)
            if res.ok:
                trace, steps = res.trace, res.n_steps
        yield Problem(
            id=f"gsm8k/{split}/{i}", source="gsm8k", text=question, answer=answer,
            answer_value=parse_number(answer), answer_unit="", level=None, subject=split,
            gold_trace=trace, gold_steps=steps,
        )


@data_source("gsm8k_train", files="gsm8k/train.jsonl")
def iter_gsm8k_train(data_dir: str | Path | None = None, **kw: Any) -> Iterator[Problem]:
    """GSM8K train (iter_gsm8k's keyword arguments)."""
    return iter_gsm8k("train", data_dir, **kw)


@data_source("gsm8k_test", files="gsm8k/test.jsonl")
def iter_gsm8k_test(data_dir: str | Path | None = None, **kw: Any) -> Iterator[Problem]:
    """GSM8K test (iter_gsm8k's keyword arguments)."""
    return iter_gsm8k("test", data_dir, **kw)


def _level(x: object) -> int | None:
    if isinstance(x, int):
        return x
    m = re.search(r"\d+", str(x or ""))
    return int(m.group()) if m else None


@data_source("math500", files="math500/test.jsonl")
def iter_math500(data_dir: str | Path | None = None) -> Iterator[Problem]:
    """MATH-500 (PRM800K's test split): answer field as given; id is the MATH unique_id."""
    root = resolve_data_dir(data_dir)
    path = _require(root / "math500" / "test.jsonl", root, "MATH-500")
    for row in _read_jsonl(path):
        answer = str(row["answer"]).strip()
        yield Problem(
            id=f"math500/{row['unique_id']}", source="math500", text=row["problem"], answer=answer,
            answer_value=parse_number(answer), level=_level(row.get("level")), subject=str(row.get("subject", "")),
        )


@data_source("math", files="math/test.jsonl")
def iter_math(data_dir: str | Path | None = None) -> Iterator[Problem]:
    """MATH test (5,000): the answer is the last \\boxed{} of the solution."""
    root = resolve_data_dir(data_dir)
    path = _require(root / "math" / "test.jsonl", root, "MATH test")
    for i, row in enumerate(_read_jsonl(path)):
        answer = last_boxed(row["solution"])
        if answer is None:
            raise ValueError(f"{path}: problem {i} has no \\boxed{{}} answer in its solution")
        answer = answer.strip()
        yield Problem(
            id=f"math/test/{row.get('idx', i)}", source="math", text=row["problem"], answer=answer,
            answer_value=parse_number(answer), level=_level(row.get("level")), subject=str(row.get("type", "")),
        )


_BARE_POWER_RE = re.compile(r"^10\^\{?\s*([-+]?\d+)\s*\}?$")


def clean_scibench_unit(unit: str) -> str:
    """SciBench unit as written, without the $ delimiters and surrounding whitespace ('10^4 N/C' keeps 10^4).

    A bare power of ten ('10^6', '10^{42}': the answer counted in millions, ...) becomes '10^6 dimensionless' and
    a unit vector ('N \\hat{i}': a force along x) loses its direction, so that both parse as units.
    """
    s = unit.replace("\r", " ").replace("\n", " ").strip()
    if s == "$\\$$":
        return "USD"
    s = re.sub(r"^\$\s*(.*?)\s*\$", r"\1", s) if s.count("$") >= 2 else s.strip("$")
    s = re.sub(r"\\hat\s*\{\s*(?:\\mathrm\s*\{\s*)?[ijk]\s*\}?\s*\}", "", s)
    s = re.sub(r"\s+", " ", s).strip()
    m = _BARE_POWER_RE.match(s)
    return f"10^{m.group(1)} dimensionless" if m else s


# SciBench's physics textbooks: Halliday's Fundamentals of Physics, Thornton's Classical Dynamics, Engel's
# Thermodynamics; each has a `<book>_sol.json` beside it, the problems that come with worked solutions.
SCIBENCH_PHYSICS: tuple[str, ...] = ("fund", "class", "thermo")


@data_source("scibench", files="scibench/*.json")
def iter_scibench(data_dir: str | Path | None = None, books: Sequence[str] | None = None) -> Iterator[Problem]:
    """SciBench textbook problems: value from answer_number, unit as written; graded with SciBench's 5% relative
    tolerance (source 'scibench'). `books` picks files by stem (['fund', 'class', 'thermo']: SCIBENCH_PHYSICS;
    'fund_sol' the worked-solution ones); None reads every scibench/*.json present."""
    root = resolve_data_dir(data_dir)
    folder = root / "scibench"
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if not files:
        raise DataMissingError(
            f"SciBench: no *.json files in {folder}. Put SciBench's dataset/original/*.json there "
            f"(or set PCR_RAY_DATA to the folder holding scibench/)."
        )
    if books is not None:
        by_stem = {p.stem: p for p in files}
        missing = [b for b in books if b not in by_stem]
        if missing:
            raise DataMissingError(f"SciBench: no {', '.join(f'{b}.json' for b in missing)} in {folder} (have "
                                   f"{', '.join(sorted(by_stem))})")
        files = [by_stem[b] for b in books]
    seen: set[str] = set()
    for path in files:
        with open(path, encoding="utf-8") as fh:
            rows = json.load(fh)
        for k, row in enumerate(rows):
            pid = re.sub(r"\s+", "_", str(row.get("problemid", "")).strip()) or str(k)
            rid = f"scibench/{path.stem}/{pid}"
            if rid in seen:
                rid = f"{rid}#{k}"
            seen.add(rid)
            number = parse_number(str(row.get("answer_number", "")))
            yield Problem(
                id=rid, source="scibench", text=str(row["problem_text"]).strip(),
                answer=str(row.get("answer_latex", row.get("answer_number", ""))).strip(),
                answer_value=number, answer_unit=clean_scibench_unit(str(row.get("unit", ""))),
                level=None, subject=str(row.get("source", path.stem)).strip(),
            )


def iter_dataset(name: str, data_dir: str | Path | None = None, **kw: Any) -> Iterator[Problem]:
    """Problems of one registered data set (pcr_ray.data.sources.DATA_SOURCES: gsm8k_test, physics, file, ...);
    `kw` go to its reader ('physics' takes n= and seed=; 'file' takes path=, format=, fields=, label=, split=)."""
    return DATA_SOURCES.get(name).read(data_dir=data_dir, **kw)


def load_dataset(name: str, data_dir: str | Path | None = None, limit: int | None = None,
                 **kw: object) -> list[Problem]:
    """A list of the problems of one data set (the first `limit` when given)."""
    out: list[Problem] = []
    for p in iter_dataset(name, data_dir, **kw):
        if limit is not None and len(out) >= limit:
            break
        out.append(p)
    return out
