"""Mined answer-timing negatives: the gold answer against the PRM's top-scored wrong candidates at a trace's end."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from pcr_ray.core.trace import parse_trace
from pcr_ray.core.verifier import VerifierState
from pcr_ray.data.physics import generate_problems
from pcr_ray.negatives.mined import (
    MINED_ALTERNATIVE_STEP,
    MINED_ANSWER_TIMING,
    MINED_COLUMNS,
    MineConfig,
    final_state,
    gold_state,
    mine_rows,
    select_negatives,
)
from pcr_ray.negatives.pairs import PAIR_COLUMNS, split_of
from pcr_ray.search import SearchProblem
from pcr_ray.search.candidates import check_step_candidate, parse_candidate
from tests.prm_helpers import small_prm_checkpoint, small_prm_scorer


@pytest.fixture(scope="module")
def prm():
    # the test-size PRM of the shipped kind; ONNX Runtime int8, one pair per forward pass (the default): a score
    # depends on the pair alone, as in fp32
    return small_prm_scorer(max_batch=64, max_length=160)


def _rows(n: int, seed: int = 5) -> list[dict]:
    """Problem rows as make-pairs reads them (gold_trace as a JSON string)."""
    return [p.to_dict() for p in generate_problems(n, seed=seed)]


def _trace_dict(row: dict) -> dict:
    gt = row["gold_trace"]
    return json.loads(gt) if isinstance(gt, str) else gt


def test_final_state_offers_the_gold_answer_and_only_valid_wrong_candidates() -> None:
    cfg = MineConfig()
    for row in _rows(12):
        st, why = final_state(row, cfg)
        assert why == "ok" and st is not None, why
        gold = row["answer_value"]
        assert st.pairs[0][1].startswith("answer: ") and abs(st.values[0] - gold) <= 1e-6 * abs(gold)
        assert len(st.pairs) > 5 and len({t for _, t in st.pairs}) == len(st.pairs)
        assert all(c == st.row["context"] for c, _ in st.pairs)
        trace = parse_trace(_trace_dict(row))[0]
        state, _ = VerifierState.from_givens(SearchProblem.from_problem(row, givens="gold").givens)
        for s in trace.steps:
            state = check_step_candidate(state, s, strict=True).state
        for text, raw, v in zip([t for _, t in st.pairs[1:]], st.jsons[1:], st.values[1:], strict=True):
            parsed = parse_candidate(raw, len(trace.steps))
            if parsed.answer is not None:  # another quantity declared as the answer: never the gold value
                assert text.startswith("answer: ") and abs(v - gold) > 1e-3 * abs(gold)
            else:  # going on: a step the verifier accepts
                assert check_step_candidate(state, parsed.step, strict=True).ok
        assert st.row["split"] == split_of(row["id"]) and st.row["t"] == len(trace.steps)


def test_gold_state_before_the_end_sets_the_gold_step_against_other_values_and_early_answers() -> None:
    cfg = MineConfig()
    seen_early_answer = False
    for row in _rows(24, seed=21):
        trace = parse_trace(_trace_dict(row))[0]
        for t in range(len(trace.steps)):
            st, why = gold_state(row, cfg, t)
            assert st is not None, why
            gold = trace.steps[t]
            assert st.pairs[0][1].split(" = ")[1].startswith(f"{gold.op}(") and st.row["t"] == t
            for note, v in zip(st.notes[1:], st.values[1:], strict=True):
                seen_early_answer |= note.endswith("too early")
                assert note.endswith("too early") or note.startswith("another step")
                assert v == v  # every candidate carries its value
            # the gold step's own quantity computed another way is not a negative
            assert not any(abs(v - st.values[0]) <= 1e-3 * abs(st.values[0]) and n.startswith("another step")
                           and j.count('"unit"') and json.loads(j).get("out", {}).get("unit") == gold.out.unit
                           for v, n, j in zip(st.values[1:], st.notes[1:], st.jsons[1:], strict=True))
    assert seen_early_answer
    with pytest.raises(ValueError, match="t must be in"):
        gold_state(_rows(1)[0], cfg, 99)


def test_gold_state_says_whether_the_enumerator_offered_the_gold_action() -> None:
    rows = _rows(16, seed=21)
    wide, narrow = MineConfig(cap=10**6), MineConfig(cap=2)
    offered_wide, offered_narrow = [], []
    for row in rows:
        trace = parse_trace(_trace_dict(row))[0]
        assert final_state(row, narrow)[0].offered  # answers are never capped: the gold answer is always offered
        for t in range(len(trace.steps)):
            st_wide, st_narrow = gold_state(row, wide, t)[0], gold_state(row, narrow, t)[0]
            gold = json.loads(st_wide.jsons[0])
            exact = any(json.loads(raw).get("op") == gold["op"] and json.loads(raw).get("args") == gold["args"]
                        for raw in narrow.generator_for("physics").propose([_request(row, trace, t, cap=2)])[0])
            assert st_narrow.offered or not exact  # the gold step itself among the candidates: offered
            offered_wide.append(st_wide.offered)
            offered_narrow.append(st_narrow.offered)
    assert all(w or not n for w, n in zip(offered_wide, offered_narrow, strict=True))  # a wider cap offers more
    assert sum(offered_narrow) < sum(offered_wide) and sum(offered_wide) >= 0.9 * len(offered_wide)


def _request(row: dict, trace, t: int, cap: int):
    from pcr_ray.generators.base import ProposalRequest

    sp = SearchProblem.from_problem(row, givens="gold")
    return ProposalRequest(sp.id, sp.text, sp.givens, tuple(trace.steps[:t]), k=cap, mode="step",
                           target_unit=sp.target_unit, seed=0)


def test_final_state_reports_unusable_problems() -> None:
    row = _rows(1)[0]
    assert final_state({**row, "gold_trace": None}, MineConfig())[1] == "no_trace"
    bad = _trace_dict(row)
    first = next(iter(bad["steps"][0]["args"]))
    bad["steps"][0]["args"][first] = "undefined_name"  # parses, but the verifier rejects it
    st, why = final_state({**row, "gold_trace": bad}, MineConfig())
    assert st is None and why.startswith("invalid: gold step")


def test_select_negatives_keeps_the_highest_scored_wrong_candidates() -> None:
    st, _ = final_state(_rows(1, seed=9)[0], MineConfig())
    scores = [0.5] + [0.01 * i for i in range(len(st.pairs) - 1)]
    rows = select_negatives(st, scores, 3)
    top = sorted(range(1, len(st.pairs)), key=lambda i: -scores[i])[:3]
    assert [r["neg_step"] for r in rows] == [st.pairs[i][1] for i in top]
    assert all(r["pos_step"] == st.pairs[0][1] and r["kind"] == MINED_ANSWER_TIMING for r in rows)


def test_mine_rows_with_a_real_prm_is_deterministic_and_picks_its_top_scores(prm) -> None:
    problems = _rows(6, seed=13)
    rows, status = mine_rows(problems, prm, MineConfig(per_problem=2))
    assert status == {"ok": 6} and len(rows) == 12 and all(list(r) == list(MINED_COLUMNS) for r in rows)
    assert mine_rows(problems, prm, MineConfig(per_problem=2))[0] == rows
    for a, b in zip(rows[::2], rows[1::2], strict=True):  # per problem, hardest first: margin = r- minus r+
        assert a["problem_id"] == b["problem_id"] and a["margin"] >= b["margin"]
    for pid in {r["problem_id"] for r in rows}:
        st, _ = final_state(next(p for p in problems if p["id"] == pid), MineConfig())
        scores = prm.score(st.pairs)
        chosen = {r["neg_step"] for r in rows if r["problem_id"] == pid}
        worst_chosen = min(s for (_, t), s in zip(st.pairs, scores, strict=True) if t in chosen)
        best_other = max(s for (_, t), s in zip(st.pairs[1:], scores[1:], strict=True) if t not in chosen)
        assert worst_chosen >= best_other - 1e-4


def test_early_positions_mine_answers_against_gold_steps(prm) -> None:
    # answers before the end need 2+ steps; two problems whose earlier prefixes offer answers to mine, two without
    kept = {"collision_energy_loss", "lens_image_height", "recoil", "mixing_water"}
    problems = [r for r in _rows(20, seed=21) if r["id"].rsplit("/", 1)[1] in kept]
    assert len(problems) == 4 and min(p["gold_steps"] for p in problems) >= 2
    rows, _ = mine_rows(problems, prm, MineConfig(per_problem=2, positions="early"))
    assert rows and all(0 < r["t"] < r["gold_steps"] for r in rows)
    assert all(r["neg_step"].startswith("answer: ") and not r["pos_step"].startswith("answer: ") for r in rows)
    assert all(r["note"].split(" (mined")[0].endswith("too early") for r in rows)
    all_, _ = mine_rows(problems, prm, MineConfig(per_problem=2, positions="all"))
    end, _ = mine_rows(problems, prm, MineConfig(per_problem=2))
    steps, _ = mine_rows(problems, prm, MineConfig(per_problem=2, positions="steps"))
    def key(rs: list[dict]) -> list[tuple]:  # scores in the notes may differ in the last digit between batches
        return sorted((r["problem_id"], r["kind"], r["t"], r["pos_step"], r["neg_step"]) for r in rs)

    assert key(all_) == key(rows + end + steps)
    with pytest.raises(ValueError, match="positions"):
        MineConfig(positions="middle")


def test_steps_positions_mine_wrong_steps_against_gold_steps_at_every_earlier_prefix(prm) -> None:
    problems = [r for r in _rows(8, seed=23) if r["gold_steps"] >= 2]
    rows, _ = mine_rows(problems, prm, MineConfig(per_problem=3, positions="steps"))
    assert rows and all(r["kind"] == MINED_ALTERNATIVE_STEP for r in rows)
    assert all(0 <= r["t"] < r["gold_steps"] for r in rows)
    assert all(not r["neg_step"].startswith("answer: ") and not r["pos_step"].startswith("answer: ") for r in rows)
    # every prefix of every trace is mined (0..n-1), and each negative is valid and none of the later gold values
    assert {(r["problem_id"], r["t"]) for r in rows} == {(p["id"], t) for p in problems for t in range(p["gold_steps"])}
    for r in rows:
        p = next(q for q in problems if q["id"] == r["problem_id"])
        trace = parse_trace(_trace_dict(p))[0]
        state, _ = VerifierState.from_givens(SearchProblem.from_problem(p, givens="gold").givens)
        later = []
        for i, s in enumerate(trace.steps):
            out = check_step_candidate(state, s, strict=True)
            state = out.state
            if i >= r["t"]:
                later.append(float(out.step.value))
        assert r["pos_value"] == pytest.approx(later[0])
        assert all(abs(r["neg_value"] - v) > 1e-3 * abs(v) for v in later)
    # prefixes_per_problem samples that many prefixes per trace, deterministically
    one, _ = mine_rows(problems, prm, MineConfig(per_problem=3, positions="steps", prefixes_per_problem=1))
    assert len({(r["problem_id"], r["t"]) for r in one}) == len(problems)
    assert one == mine_rows(problems, prm, MineConfig(per_problem=3, positions="steps", prefixes_per_problem=1))[0]
    with pytest.raises(ValueError, match="prefixes_per_problem"):
        MineConfig(prefixes_per_problem=-1)


@pytest.mark.ray
def test_mine_pairs_command_adds_a_split_file_train_prm_reads(ray_session, tmp_path, capsys) -> None:
    from pcr_ray.pipeline.mine_pairs import main
    from pcr_ray.pipeline.train_prm import default_kinds, load_pairs_dataset

    pairs = tmp_path / "pairs"
    assert main([f"pairs_dir={pairs}", f"prm.checkpoint={small_prm_checkpoint()}",
                 "sources=[{name: physics, kwargs: {n: 5, seed: 3}}]"]) == 1
    assert "run `pcr-ray make-pairs` first" in capsys.readouterr().err
    (pairs / "train").mkdir(parents=True)
    assert main([f"pairs_dir={pairs}", f"prm.checkpoint={small_prm_checkpoint()}", "per_problem=2",
                 "sources=[{name: physics, kwargs: {n: 30, seed: 3}}]", "limit_per_split={train: 6, test: 2}",
                 "splits=[train,test]", "batch_size=4"]) == 0
    summary = json.loads((pairs / f"{MINED_ANSWER_TIMING}_summary.json").read_text())
    train = pd.read_parquet(pairs / "train" / f"{MINED_ANSWER_TIMING}.parquet")
    test = pd.read_parquet(pairs / "test" / f"{MINED_ANSWER_TIMING}.parquet")
    assert list(train.columns) == list(PAIR_COLUMNS)  # make-pairs' schema: the mining margin is not written
    assert train["problem_id"].nunique() == 6 and test["problem_id"].nunique() == 2
    assert summary["pairs"] == len(train) + len(test) == 16 and not (pairs / "validation").exists()
    assert set(train["problem_id"].map(split_of)) == {"train"} and set(test["problem_id"].map(split_of)) == {"test"}
    assert MINED_ANSWER_TIMING in default_kinds("csp") and MINED_ANSWER_TIMING not in default_kinds("random")
    ds = load_pairs_dataset(pairs, "train", default_kinds("csp"))
    assert ds.count() == len(train)
    # positions=steps writes its own file and kind, which train-prm reads beside the first
    assert main([f"pairs_dir={pairs}", f"prm.checkpoint={small_prm_checkpoint()}", "per_problem=2",
                 "sources=[{name: physics, kwargs: {n: 30, seed: 3}}]", "limit_per_split={train: 6}",
                 "splits=[train]", "positions=steps", "prefixes_per_problem=1", "use_ray=false"]) == 0
    steps = pd.read_parquet(pairs / "train" / f"{MINED_ALTERNATIVE_STEP}.parquet")
    assert set(steps["kind"]) == {MINED_ALTERNATIVE_STEP} and steps["problem_id"].nunique() == 6
    summary = json.loads((pairs / f"{MINED_ALTERNATIVE_STEP}_summary.json").read_text())
    assert summary["pairs_by_kind"] == {MINED_ALTERNATIVE_STEP: len(steps)}
    assert MINED_ALTERNATIVE_STEP in default_kinds("csp")
    assert load_pairs_dataset(pairs, "train", default_kinds("csp")).count() == len(train) + len(steps)
    # through Ray with nothing to mine (one-step traces have no earlier prefix with an answer): an empty summary
    assert main([f"pairs_dir={pairs}", f"prm.checkpoint={small_prm_checkpoint()}", "positions=early",
                 "sources=[{name: physics, kwargs: {n: 3, seed: 12}}]", "limit_per_split={train: 2}",
                 "splits=[train]"]) == 0
    summary = json.loads((pairs / "mined_answer_timing_early_summary.json").read_text())
    assert summary["problems"] == 2 and summary["pairs"] == 0 and summary["by_split"] == {}
    assert summary["pairs_by_kind"] == {} and "0 pairs (no) from 2 problems" in capsys.readouterr().out
