"""bias_audit: the audit pipeline end to end (judge -> rows -> statistics -> report files, W&B, CLI)."""

import json
from collections import Counter

import numpy as np
import pytest
from typer.testing import CliRunner

from judge_reward.bias_audit import AuditConfig, run_audit
from judge_reward.bias_audit.data import Study, Judgement, load_zhang2023, n_words
from wandb_offline import find_offline_runs, wait_for_offline_run
from judge_reward import Judge, JudgeConfig, Score, load_aspects
from tiny_models import make_backend


pytestmark = pytest.mark.usefixtures("one_torch_thread")


class CountingLengthJudge:
    """A judge whose score is the summary's length in words, counting how often it sees each text.

    With it every number of the audit has a closed form: the LLM-minus-human difference is the
    length gap, the difference at equal length is 0 and the slope is 10 per 10 words.
    """

    def __init__(self):
        self.aspects = load_aspects("summeval").select(["coherence"])
        self.config = JudgeConfig(aspects=["coherence"], method="geval")
        self.seen = Counter()

    def score(self, items, aspects=None, method=None):
        out = []
        for it in items:
            self.seen[(it.source, it.output)] += 1
            out.append({"coherence": Score(float(n_words(it.output)))})
        return out


def test_audit_on_all_599_judgements_has_closed_form_answers(shared_data):
    judge = CountingLengthJudge()
    study = load_zhang2023(shared_data / "zhang2023")
    report = run_audit(AuditConfig(name="length", stats={"n_resamples": 200, "n_permutations": 200}),
                       judge=judge, study=study, progress=False)
    # Every distinct summary is scored exactly once: 76 GPT-3.5 + 112 writer summaries.
    assert len(judge.seen) == 188 and set(judge.seen.values()) == {1}
    assert report["runtime"]["texts_scored"] == 188
    res = report["results"]["judgement"]["mean"]
    cats = res["categories"]
    assert [cats[c]["n"] for c in ("human_better", "llm_better", "equally_good")] == [243, 239, 117]
    assert res["n"] == 599 and res["n_articles"] == 76
    for c in cats.values():
        assert c["difference"]["value"] == pytest.approx(c["length"]["gap_words"]["value"])
        assert c["length_controlled_difference"]["value"] == pytest.approx(0.0, abs=1e-6)
        assert c["length_slope_per_10_words"]["value"] == pytest.approx(10.0)
    # The judgement-level length gap, recomputed by hand from the data.
    gaps = [n_words(study.llm_summaries[j.article_id]) - n_words(study.writer_summaries[(j.article_id, j.writer_id)])
            for j in study.judgements if j.preference == "human"]
    assert cats["human_better"]["length"]["gap_words"]["value"] == pytest.approx(np.mean(gaps))
    pair = report["results"]["pair"]["mean"]
    assert pair["n"] == 112 - report["exclusions"]["pair"]["without_majority"]
    assert report["human_agreement"]["n"] > 300 and 0.5 < report["human_agreement"]["value"] < 1
    assert report["failures"] == {} and report["exclusions"]["judgement"]["excluded_by_failure"] == 0


def _small_study(bad_summary: str | None = None) -> Study:
    """Six short articles, one or two writers each, judged by three evaluators per pair."""
    rng = np.random.default_rng(0)
    topics = ["council budget", "river flood", "school strike", "film festival", "rail fares", "harbour fire"]
    articles, llm, writers, judgements = {}, {}, {}, []
    for k, topic in enumerate(topics):
        a = f"a{k}"
        articles[a] = f"The {topic} was reported on Tuesday. Officials said the {topic} would be discussed next week."
        llm[a] = f"Officials will discuss the {topic} next week."
        for w in range(1 + k % 2):
            writers[(a, f"w{w}")] = f"A report on the {topic}, to be discussed by officials{'.' * (w + 1)}"
            for e in range(3):
                judgements.append(Judgement(a, f"w{w}", f"e{e}", str(rng.choice(["human", "llm", "tie"])), "tie"))
    if bad_summary is not None:
        writers[("a0", "w0")] = bad_summary
    return Study(judgements, articles, llm, writers, "in-memory")


def test_audit_writes_report_files_and_scores_each_text_once_with_a_real_judge(tmp_path):
    judge = Judge(JudgeConfig(aspects_file="summeval", aspects=["coherence", "fluency"], method="geval"),
                  backend=make_backend("char"))
    cfg = AuditConfig(name="tiny", stats={"n_resamples": 200, "n_permutations": 200})
    report = run_audit(cfg, judge=judge, study=_small_study(), out_dir=tmp_path / "r", progress=False)
    n_texts = 6 + 9  # 6 GPT-3.5 summaries, 9 writer summaries
    assert report["runtime"]["texts_scored"] == n_texts
    assert judge.stats()["cache_misses"] == n_texts * 2  # two aspects, each text once
    files = {k: tmp_path / "r" / name for k, name in
             (("json", "audit.json"), ("markdown", "summary.md"), ("figure", "figure.png"))}
    assert all(p.exists() for p in files.values())
    assert files["figure"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and files["figure"].stat().st_size < 200_000
    data = json.loads(files["json"].read_text())
    assert set(data["results"]) == {"judgement", "pair"}
    assert set(data["results"]["judgement"]) == {"mean", "coherence", "fluency"}
    mean = data["results"]["judgement"]["mean"]
    per_text = {(t["article_id"], t["writer_id"], t["kind"]): t for t in data["texts"]}
    # The headline score is the mean of the two aspects, text by text.
    for t in per_text.values():
        assert t["score"] == pytest.approx((t["aspects"]["coherence"] + t["aspects"]["fluency"]) / 2)
    assert mean["categories"]["human_better"]["n"] + mean["categories"]["llm_better"]["n"] \
        + mean["categories"]["equally_good"]["n"] == 27
    md = files["markdown"].read_text()
    for needle in ("Human summary better", "GPT-3.5 summary better", "Equally good", "Self-preference", "figure.png"):
        assert needle in md
    # A second audit with the same judge is served from its cache.
    run_audit(cfg, judge=judge, study=_small_study(), progress=False)
    assert judge.stats()["cache_misses"] == n_texts * 2
    assert judge.stats()["cache_hits"] >= n_texts * 2


def test_a_failed_judgement_is_left_out_and_counted_never_scored_zero():
    judge = Judge(JudgeConfig(aspects_file="summeval", aspects=["coherence"], method="geval"),
                  backend=make_backend("char"))
    study = _small_study(bad_summary="   ")
    report = run_audit(AuditConfig(stats={"n_resamples": 200, "n_permutations": 200}), judge=judge, study=study,
                       progress=False)
    assert report["failures"] == {"coherence: output: empty text cannot be judged": 1}
    assert report["exclusions"]["judgement"]["excluded_by_failure"] == 3  # three evaluators judged that pair
    assert report["results"]["judgement"]["mean"]["n"] == 27 - 3
    bad = [t for t in report["texts"] if t["article_id"] == "a0" and t["kind"] == "human"]
    assert bad[0]["score"] is None and "empty text" in bad[0]["failure"]


def test_rows_an_aspect_lost_to_its_own_failures_are_counted_per_aspect(monkeypatch):
    """The mean fails with any aspect, so each aspect keeps at least the mean's rows; what each lost
    is recorded (it was only visible as a smaller n)."""
    from judge_reward.bias_audit.scoring import TextScore

    study = _small_study()
    broken = study.writer_summaries[("a0", "w0")]

    def fluency_fails_once(judge, texts, **kwargs):
        out = {}
        for source, output in dict.fromkeys(texts):
            n = float(n_words(output))
            bad = output == broken
            out[(source, output)] = TextScore(None if bad else n, {"coherence": n, "fluency": None if bad else n},
                                              "fluency: backend: timeout" if bad else None)
        return out, Counter({"fluency: backend: timeout": 1})

    judge = CountingLengthJudge()
    judge.aspects = load_aspects("summeval").select(["coherence", "fluency"])
    monkeypatch.setattr("judge_reward.bias_audit.audit.score_texts", fluency_fails_once)
    report = run_audit(AuditConfig(stats={"n_resamples": 200, "n_permutations": 200}), judge=judge, study=study,
                       progress=False)
    excl = report["exclusions"]["judgement"]
    assert excl["excluded_by_failure"] == 3
    assert excl["excluded_by_failure_per_aspect"] == {"coherence": 0, "fluency": 3}
    assert report["results"]["judgement"]["coherence"]["n"] == 27 and report["results"]["judgement"]["fluency"]["n"] == 24


def test_an_audit_whose_every_judgement_failed_names_the_failures(tmp_path, monkeypatch):
    """Nothing left to analyse: one clear line with the failure reasons (not a bare ValueError)."""
    from judge_reward.bias_audit.scoring import TextScore

    def fail_all(judge, texts, **kwargs):
        texts = list(dict.fromkeys(texts))
        reason = "coherence: backend: out of memory"
        return {t: TextScore(None, {"coherence": None}, reason) for t in texts}, Counter({reason: len(texts)})

    monkeypatch.setattr("judge_reward.bias_audit.audit.score_texts", fail_all)
    with pytest.raises(ValueError, match=r"27 left out because a summary failed.*out of memory: 15"):
        run_audit(AuditConfig(stats={"n_resamples": 200}), judge=CountingLengthJudge(), study=_small_study(),
                  progress=False)
    monkeypatch.setattr("judge_reward.bias_audit.data.load_zhang2023", lambda path=None: _small_study())
    monkeypatch.setattr("judge_reward.judge.build_backend", lambda spec: make_backend("char"))
    res = CliRunner().invoke(_cli(), ["audit", "--aspects", "coherence", "--no-cache", "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "outofmemory:15" in _flat(res.output), res.output


def test_audit_logs_every_number_to_wandb_offline(tmp_path, offline_wandb):
    judge = CountingLengthJudge()
    cfg = AuditConfig(name="wb-test", stats={"n_resamples": 200, "n_permutations": 200}, wandb={"enabled": True})
    report = run_audit(cfg, judge=judge, study=_small_study(), out_dir=tmp_path / "r", progress=False)
    assert report["wandb"]["mode"] == "offline"
    runs = find_offline_runs(offline_wandb)
    assert len(runs) == 1
    key = "audit/judgement/mean/categories/human_better/difference/value"
    # wandb-core may still be writing the offline run file after finish() returns: wait for its exit record
    logged = wait_for_offline_run(runs[0])
    assert logged["finished"]
    rows = [h for h in logged["history"] if key in h]
    row = rows[0]
    cats = report["results"]["judgement"]["mean"]["categories"]
    assert row["audit/judgement/mean/categories/human_better/difference/value"] == pytest.approx(
        cats["human_better"]["difference"]["value"])
    assert row["audit/judgement/mean/self_preference/flagged"] in (0.0, 1.0)
    # The figure and the per-category table are media files of the run.
    assert row["audit/figure/_type"] == "image-file"
    assert (runs[0] / "files" / row["audit/figure/path"]).read_bytes()[:4] == b"\x89PNG"
    table = json.loads((runs[0] / "files" / row["audit/categories/path"]).read_text())
    assert [r[0] for r in table["data"]] == ["Human summary better", "GPT-3.5 summary better", "Equally good"]
    assert logged["summary"]["audit/judgement/mean/n"] == 27
    assert logged["summary"]["audit/failures_total"] == 0 and logged["summary"]["audit/failures"] == "{}"
    assert logged["summary"]["audit/exclusions/judgement/excluded_by_failure"] == 0
    # audit.json records where the run went.
    assert json.loads((tmp_path / "r" / "audit.json").read_text())["wandb"]["run_id"] == report["wandb"]["run_id"]


# -- the command line --------------------------------------------------------------------------


def _cli():
    from judge_reward.console import app

    return app


def _flat(text: str) -> str:
    """The CLI's message without rich's box and line wrapping (its width depends on the terminal)."""
    return "".join(ch for ch in text if not ch.isspace() and ch not in "│╭╮╰╯─")


def test_cli_rejects_bad_config_and_data_naming_the_field(tmp_path):
    runner = CliRunner()
    bad = tmp_path / "bad.yaml"
    bad.write_text("judge: default\ncolour: blue\n")
    res = runner.invoke(_cli(), ["audit", "--config", str(bad), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "unknownfield(s)['colour']" in _flat(res.output)
    bad.write_text("judge: default\nstats: {confidence: 2}\n")
    res = runner.invoke(_cli(), ["audit", "--config", str(bad), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "stats.confidence" in _flat(res.output) and "got2" in _flat(res.output)
    res = runner.invoke(_cli(), ["audit", "--config", "gptscore", "--data", str(tmp_path / "nowhere"),
                                 "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "nowhere" in _flat(res.output) and "doesnotexist" in _flat(res.output)
    res = runner.invoke(_cli(), ["audit", "--config", "gptscore", "--max-articles", "1", "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "max_articles" in _flat(res.output)
    assert not (tmp_path / "o").exists()


def test_a_judge_config_is_accepted_as_an_audit_config():
    cfg = AuditConfig.from_yaml("configs/judges/geval_gemma.yaml")
    assert cfg.judge == "configs/judges/geval_gemma.yaml" and cfg.name == "geval_gemma"
    assert AuditConfig.from_yaml("geval").judge == "geval_gemma"


@pytest.mark.slow
def test_cli_audit_with_the_embedded_judge(tmp_path, shared_data):
    """The real command with the real Gemma judge on three articles (the full run is in docs/bias_audit.md)."""
    res = CliRunner().invoke(_cli(), ["audit", "--config", "gptscore", "--max-articles", "3", "--n-resamples", "200",
                                      "--data", str(shared_data / "zhang2023"), "--out", str(tmp_path / "g")])
    assert res.exit_code == 0, res.output
    data = json.loads((tmp_path / "g" / "audit.json").read_text())
    assert data["method"] == "gptscore" and data["judge"]["model"].startswith("embedded:gemma3-270m")
    assert data["failures"] == {}
    scores = [t["score"] for t in data["texts"]]
    assert all(s is not None and -15 < s < 0 for s in scores)  # mean token log-probs
    assert data["runtime"]["texts_scored"] == len(scores)
    assert (tmp_path / "g" / "figure.png").exists()


def test_cli_audit_says_what_it_does_and_resumes_from_its_cache(tmp_path, monkeypatch):
    """The command caches the judge's scores under --out by default: a second run scores nothing."""
    monkeypatch.setattr("judge_reward.bias_audit.data.load_zhang2023", lambda path=None: _small_study())
    monkeypatch.setattr("judge_reward.judge.build_backend", lambda spec: make_backend("char"))
    args = ["audit", "--config", "gptscore", "--aspects", "coherence", "--n-resamples", "200", "--out"]
    first = CliRunner().invoke(_cli(), [*args, str(tmp_path / "a")])
    assert first.exit_code == 0, first.output
    said = _flat(first.output)  # printed before the judge loads
    assert "gptscore-gemma3-270m:6articles;loadingthejudge(gptscore);scoresarekeptin" in said
    assert "judgments.sqlite,soaninterruptedrunresumes" in said
    assert (tmp_path / "a" / "judgments.sqlite").exists()
    stats = json.loads((tmp_path / "a" / "audit.json").read_text())["runtime"]["judge_stats"]
    assert stats["cache_misses"] == 15 and stats["cache_hits"] == 0
    second = CliRunner().invoke(_cli(), [*args, str(tmp_path / "a")])
    assert second.exit_code == 0, second.output
    stats = json.loads((tmp_path / "a" / "audit.json").read_text())["runtime"]["judge_stats"]
    assert stats["cache_hits"] == 15 and stats["cache_misses"] == 0
    fresh = CliRunner().invoke(_cli(), [*args, str(tmp_path / "b"), "--no-cache"])
    assert fresh.exit_code == 0 and not (tmp_path / "b" / "judgments.sqlite").exists()


def test_cli_no_cache_ignores_the_judge_configs_own_sqlite_file(tmp_path, monkeypatch):
    """--no-cache scores everything afresh and keeps no sqlite file, even where the judge YAML names one."""
    from tiny_models import save_judge_config

    monkeypatch.setattr("judge_reward.bias_audit.data.load_zhang2023", lambda path=None: _small_study())
    monkeypatch.setattr("judge_reward.judge.build_backend", lambda spec: make_backend("char"))
    own = tmp_path / "own.sqlite"
    judge_yaml = save_judge_config(tmp_path, aspects=["coherence"], cache={"path": str(own)})
    for run in ("a", "b"):
        res = CliRunner().invoke(_cli(), ["audit", "--config", str(judge_yaml), "--n-resamples", "200",
                                          "--no-cache", "--out", str(tmp_path / run)])
        assert res.exit_code == 0, res.output
        stats = json.loads((tmp_path / run / "audit.json").read_text())["runtime"]["judge_stats"]
        assert stats["cache_hits"] == 0 and stats["cache_misses"] == 15
    assert not own.exists()
