"""Your own problems: a JSON lines, JSON, parquet or Hugging Face `datasets` file read by a field mapping.

    dataset.sources=[{name: file, path: my_problems.jsonl, fields: {question: q, answer: a}}]

`fields` maps the Problem's fields to your column names: `question` (required), `answer`, `unit`, `solution`
(the answer is taken from its last \\boxed{} or its `#### n` line when there is no answer column) and `id`. An
answer that is a number (`12`, `1,000`, `\\frac{3}{4}`) or a number with a unit (`12 m/s`, or a number and a
`unit` column) is graded numerically, with units converted; any other answer (`\\sqrt{2}`, `x^2+1`) with
math-verify, as MATH is. A row without a question or an answer is reported with its number and skipped; the rest
run. Paths are absolute or relative to the data folder. `format` is taken from the file's suffix unless given;
`hf` reads a folder `datasets.save_to_disk` wrote, or a hub name where the hub is reachable (`split` picks one).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pcr_ray.core.answers import last_boxed, parse_number, parse_quantity
from pcr_ray.data.problem import Problem
from pcr_ray.data.readers import resolve_data_dir
from pcr_ray.data.sources import data_source

log = logging.getLogger(__name__)

FORMATS = ("jsonl", "json", "parquet", "hf")
FIELDS = ("question", "answer", "unit", "solution", "id")


class DataFileError(ValueError):
    """A problems file that cannot be read as configured; the message names the file and what to change."""


def _format_of(path: Path, fmt: str | None) -> str:
    if fmt:
        if fmt not in FORMATS:
            raise DataFileError(f"format {fmt!r} of {path} is not one of {FORMATS}")
        return fmt
    if path.is_dir():
        return "hf"
    suffix = path.suffix.lower().lstrip(".")
    if suffix in ("jsonl", "ndjson"):
        return "jsonl"
    if suffix in ("json", "parquet"):
        return suffix
    raise DataFileError(f"cannot tell the format of {path} from its suffix: give format: jsonl|json|parquet|hf")


def _rows(location: str, path: Path, fmt: str, split: str | None) -> Iterator[dict[str, Any]]:
    if fmt == "jsonl":
        with open(path, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if line.strip():
                    try:
                        yield json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise DataFileError(f"{path}:{lineno}: not valid JSON: {exc}") from None
    elif fmt == "json":
        data = json.loads(path.read_text(encoding="utf-8"))
        rows = data.get("data", data.get("rows")) if isinstance(data, dict) else data
        if not isinstance(rows, list):
            raise DataFileError(f"{path}: a JSON file of problems is a list of objects (or {{'data': [...]}})")
        yield from rows
    elif fmt == "parquet":
        import pyarrow.parquet as pq  # heavy: pyarrow

        yield from pq.read_table(path).to_pylist()
    else:
        try:
            import datasets  # heavy: datasets
        except ImportError:
            raise DataFileError(f"format hf ({location}) needs the `datasets` package: pip install datasets") from None
        ds = datasets.load_from_disk(str(path)) if path.exists() else datasets.load_dataset(location, split=split)
        if isinstance(ds, datasets.DatasetDict):
            if split is None:
                raise DataFileError(f"{location} has splits {list(ds)}: give split: NAME")
            ds = ds[split]
        yield from ds


def _answer(row: Mapping[str, Any], fields: Mapping[str, str]) -> str:
    raw = row.get(fields["answer"]) if fields.get("answer") else None
    if raw is not None and str(raw).strip():
        return str(raw).strip()
    sol = row.get(fields["solution"]) if fields.get("solution") else None
    if sol:
        boxed = last_boxed(str(sol))
        if boxed:
            return boxed.strip()
        if "####" in str(sol):
            return str(sol).rsplit("####", 1)[1].strip()
    return ""


def problem_of(row: Mapping[str, Any], fields: Mapping[str, str], label: str, index: int) -> Problem:
    """One Problem from a row; DataFileError naming the row and the field when it cannot be made."""
    qkey = fields.get("question", "question")
    question = row.get(qkey)
    if question is None or not str(question).strip():
        raise DataFileError(f"row {index}: no question in field {qkey!r} (fields.question; the row has "
                            f"{sorted(row)[:8]})")
    answer = _answer(row, fields)
    if not answer:
        raise DataFileError(f"row {index}: no answer in field {fields.get('answer')!r}"
                            + (" nor in the solution's \\boxed{} or ####" if fields.get("solution") else ""))
    unit = str(row.get(fields["unit"]) or "").strip() if fields.get("unit") else ""
    value = parse_number(answer)
    if value is None and not re.search(r"\\[a-zA-Z]|[a-zA-Z]\s*[\^_(]", answer):
        q = parse_quantity(answer)  # '12 m/s', '3.5 kg'
        if q is not None:
            value, unit = q[0], unit or q[1]
    pid = str(row.get(fields["id"])) if fields.get("id") and row.get(fields["id"]) is not None else str(index)
    return Problem(id=f"{label}/{pid}", source=label, text=str(question).strip(), answer=answer,
                   answer_value=value, answer_unit=unit)


def iter_file(path: str, data_dir: str | Path | None = None, *, format: str | None = None,  # noqa: A002
              fields: Mapping[str, str] | None = None, label: str | None = None, split: str | None = None
              ) -> Iterator[Problem]:
    """The problems of one file; rows that cannot be read are reported on stderr and skipped."""
    fields = {"question": "question", "answer": "answer", **dict(fields or {})}
    unknown = sorted(set(fields) - set(FIELDS))
    if unknown:
        raise DataFileError(f"fields {unknown} are not Problem fields; map some of {FIELDS} to your columns")
    p = Path(path).expanduser()
    if not p.is_absolute():
        p = resolve_data_dir(data_dir) / p
    fmt = _format_of(p, format) if (p.exists() or format != "hf") else "hf"
    if fmt != "hf" and not p.exists():
        raise DataFileError(f"problems file {p} does not exist (a relative path is read from the data folder "
                            f"{resolve_data_dir(data_dir)})")
    name = label or (p.stem if p.exists() else str(path).replace("/", "_"))
    skipped, n = [], 0
    for i, row in enumerate(_rows(str(path), p, fmt, split)):
        n += 1
        try:
            yield problem_of(row, fields, name, i)
        except DataFileError as exc:
            skipped.append(str(exc))
    for msg in skipped[:20]:
        log.warning("[data] %s: %s; skipped", p, msg)
    if n == 0:
        raise DataFileError(f"problems file {p} is empty")
    if skipped and len(skipped) == n:
        raise DataFileError(f"no row of {p} could be read ({len(skipped)} skipped; the first: {skipped[0]})")


@data_source("file")
def iter_file_source(data_dir: str | Path | None = None, **kw: Any) -> Iterator[Problem]:
    """The `file` data source: {name: file, path: FILE, format, fields, label, split} (iter_file's arguments)."""
    if "path" not in kw:
        raise ValueError("a `file` data source needs a path: {name: file, path: FILE, fields: {...}}")
    return iter_file(data_dir=data_dir, **kw)
