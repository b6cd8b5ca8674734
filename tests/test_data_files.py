"""Your own problems by config (pcr_ray.data.files): field mapping, answers as numbers, quantities or LaTeX, bad
rows reported and skipped, clear errors; and a small file evaluated through every search method."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pcr_ray.data.files import DataFileError, iter_file
from pcr_ray.data.readers import load_dataset
from pcr_ray.grading import grade_problem

ROWS = [
    {"q": "A car goes 30 m in 6 s at a steady speed. What is its speed?", "a": "5 m/s", "key": "car"},
    {"q": "Tom has 3 bags of 12 apples. How many apples has he?", "a": "36", "key": "apples"},
    {"q": "A 2 kg block is pushed with a net force of 10 N. What is its acceleration?", "a": "5", "u": "m/s^2"},
    {"q": "Simplify sqrt(8).", "a": "2\\sqrt{2}"},
    {"q": "", "a": "1"},                      # no question: reported, skipped
    {"q": "What is six times seven?"},        # no answer: reported, skipped
]


def _jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_jsonl_file_by_field_mapping(tmp_path, caplog):
    f = _jsonl(tmp_path / "mine.jsonl", ROWS)
    probs = list(iter_file(str(f), fields={"question": "q", "answer": "a", "unit": "u", "id": "key"}))
    assert [p.id for p in probs] == ["mine/car", "mine/apples", "mine/2", "mine/3"]
    car, apples, block, sqrt = probs
    assert (car.answer_value, car.answer_unit) == (5.0, "m/s") and car.source == "mine"
    assert (apples.answer_value, apples.answer_unit) == (36.0, "")
    assert (block.answer_value, block.answer_unit) == (5.0, "m/s^2")
    assert sqrt.answer_value is None and sqrt.answer == "2\\sqrt{2}"
    err = caplog.text  # the skipped rows, each a warning of the library's log
    assert "row 4: no question in field 'q'" in err and "row 5: no answer in field 'a'" in err
    # graded as their answers are: numbers with units converted, LaTeX with math-verify
    assert grade_problem(18.0, car, pred_unit="km/h").correct and not grade_problem(5.0, car, pred_unit="s").correct
    assert grade_problem(36, apples).correct and not grade_problem(35, apples).correct
    assert grade_problem("2*sqrt(2)", sqrt).correct and not grade_problem("sqrt(2)", sqrt).correct


def test_parquet_json_and_answers_from_solutions(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"problem": "What is 2+3?", "solution": "2+3=5, so \\boxed{5}."},
            {"problem": "What is 4*4?", "solution": "4*4 = 16\n#### 16"}]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "p.parquet")
    (tmp_path / "p.json").write_text(json.dumps({"data": rows}))
    fields = {"question": "problem", "solution": "solution"}
    for name in ("p.parquet", "p.json"):
        probs = load_dataset("file", tmp_path, path=name, fields=fields, label="sums")  # relative to the data folder
        assert [(p.id, p.answer_value) for p in probs] == [("sums/0", 5.0), ("sums/1", 16.0)]


def test_clear_errors(tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(DataFileError, match="is empty"):
        list(iter_file(str(tmp_path / "empty.jsonl")))
    with pytest.raises(DataFileError, match="does not exist"):
        list(iter_file(str(tmp_path / "nope.jsonl")))
    with pytest.raises(DataFileError, match=r"fields \['prompt'\] are not Problem fields"):
        list(iter_file(str(_jsonl(tmp_path / "x.jsonl", ROWS)), fields={"prompt": "q"}))
    with pytest.raises(DataFileError, match="no row of .* could be read"):
        list(iter_file(str(tmp_path / "x.jsonl")))  # default fields: question/answer, which these rows lack
    (tmp_path / "bad.jsonl").write_text('{"question": "a"}\nnot json\n')
    with pytest.raises(DataFileError, match=r"bad.jsonl:2: not valid JSON"):
        list(iter_file(str(tmp_path / "bad.jsonl")))
    with pytest.raises(DataFileError, match="cannot tell the format"):
        list(iter_file(str(_jsonl(tmp_path / "x.txt", ROWS))))
    with pytest.raises(ValueError, match="needs a path"):
        load_dataset("file")


@pytest.mark.slow
@pytest.mark.ray
def test_a_small_file_runs_through_every_search_method(ray_session, tmp_path):
    """`dataset.sources=[{name: file, ...}]` through evaluate: every search method, the enumerator, a PRM."""
    from pcr_ray.evaluate import compose_config, evaluate
    from tests.pipeline_util import read_rows, tiny_checkpoint

    f = _jsonl(tmp_path / "mine.jsonl", ROWS[:3])
    ckpt = tiny_checkpoint(tmp_path / "prm")
    from pcr_ray.search import METHODS

    methods = list(METHODS)  # nsprm, prm_only, verifier_only, greedy, best_of_n, dvts
    cfg = compose_config(["experiment=smoke", f"methods=[{','.join(methods)}]", f"prm.checkpoint={ckpt}",
                          "dataset.name=mine", "dataset.limit=null",
                          f"dataset.sources=[{{name: file, path: {f}, fields: {{question: q, answer: a, unit: u, "
                          f"id: key}}}}]", "search.max_steps=2", "search.max_backtracks=0", "generator.cap=16"])
    out = evaluate(cfg, tmp_path / "run", progress=False)
    rows = read_rows(out)
    assert {(r["problem_id"], r["method"]) for r in rows} == {
        (pid, m) for pid in ("mine/car", "mine/apples", "mine/2") for m in methods}
    assert not [r["error"] for r in rows if r.get("error")]
    car = [r for r in rows if r["problem_id"] == "mine/car" and r["method"] == "verifier_only"][0]
    assert car["gold_unit"] == "m/s" and car["gold_value"] == 5.0


def test_the_demo_runs_on_what_needs_no_download_when_the_data_folder_is_empty(tmp_path, monkeypatch, caplog):
    """`make demo` on a fresh machine: the generated physics, and one line on what was left out and how to add it."""
    from pcr_ray.configs import to_plain
    from pcr_ray.evaluate import compose_config, load_problems

    monkeypatch.setenv("PCR_RAY_DATA", str(tmp_path / "empty"))
    dataset = to_plain(compose_config(["experiment=demo"]))["dataset"]
    probs = load_problems(dataset)
    assert len(probs) == 30 and {p.source for p in probs} == {"physics"}
    err = caplog.text  # a warning of the library's log (pcr-ray shows it on stderr)
    assert "left out gsm8k_test" in err and "gsm8k/test.jsonl" in err and "openai/gsm8k" in err
    # with the file, the demo has its 20 GSM8K problems again (the data folder beside this checkout)
    monkeypatch.setenv("PCR_RAY_DATA", str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    if (Path(__file__).resolve().parents[2] / "shared" / "data" / "gsm8k" / "test.jsonl").exists():
        assert len(load_problems(dataset)) == 50
