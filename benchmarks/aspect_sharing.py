"""What a four-aspect reward costs against a one-aspect one: the 16 summaries of one SummEval article.

For G-Eval (exact; the default ``shared`` layout and the older ``guarded`` one) and GPTScore, with the
embedded judge and the cache off:

* ``1 aspect``: ``Judge.score`` with one aspect (relevance).
* ``4, one call``: ``Judge.score`` with the four SummEval aspects, as the engine runs it: G-Eval
  sends every aspect's rows in one backend call. In the ``shared`` layout everything but the form
  line (task, every aspect's criteria and steps, source, judged text) is common to the four aspects
  of a summary; in the ``guarded`` layout each aspect's criteria, steps and form follow the judged
  text. GPTScore sends every aspect's rows in one call too; with its default order the aspect phrase
  opens the instruction, so nothing is shared across aspects; ``source_first`` puts it after the
  source, so the four aspects share the source but each still scores the summary after its own phrase.
* ``4, per aspect``: the baseline, one ``method.score`` call per aspect (what the engine did before).

Prints median seconds (and min-max over ``--repeats`` runs) and the ratios against one aspect, plus
the largest difference between the two four-aspect paths (the numbers must not change), and the
token columns the decoder ran over for one and for four aspects (shared prefixes counted once).

    python benchmarks/aspect_sharing.py                 # ~3-5 min on 2 CPU cores
    python benchmarks/aspect_sharing.py --repeats 5
    python benchmarks/aspect_sharing.py --methods gptscore gptscore-source-first --summaries 4   # a GRPO group

``--summaries N`` scores only the article's first N summaries: a GRPO group of N completions of one
prompt, where the source is a larger share of the work than with 16 summaries.
"""

from __future__ import annotations

import argparse
import statistics

from _common import device_line, median_range, summeval, timings
from judge_reward import Item, Judge, JudgeConfig

ASPECTS = ["coherence", "consistency", "fluency", "relevance"]
VARIANTS = {  # name -> JudgeConfig fields
    "geval": {"method": "geval"},
    "geval-guarded": {"method": "geval", "geval": {"layout": "guarded"}},
    "gptscore": {"method": "gptscore"},
    "gptscore-source-first": {"method": "gptscore", "gptscore": {"layout": "source_first"}},
}


def fmt(times: list[float]) -> str:
    return f"{median_range(times)} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--doc", type=int, default=0, help="which SummEval document (file order)")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--summaries", type=int, default=16,
                        help="score the first N of the article's 16 summaries (N completions of one GRPO prompt)")
    parser.add_argument("--methods", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--tree-max-row-tokens", type=int, default=None,
                        help="backend.tree_max_row_tokens (default: the backend's); a packed row must hold "
                             "a summary and all four aspects' parts for G-Eval to compute the summary once")
    args = parser.parse_args()
    doc = summeval(args.doc + 1)[args.doc]
    items = [Item(r["system_output"], r["source"]) for r in doc][:args.summaries]
    backend = {"kind": "hf", "dtype": args.dtype, "progress": False}
    if args.tree_max_row_tokens:
        backend["tree_max_row_tokens"] = args.tree_max_row_tokens
    judge = Judge(JudgeConfig(backend=backend, aspects=ASPECTS, cache={"memory": False}))
    shared_backend = judge.backend
    print(f"{len(items)} summaries of one SummEval article ({judge.backend.model_id}); "
          f"median [min-max] of {args.repeats} runs, cache off; {judge.backend.dtype}, {device_line(judge.backend.device)}")
    print(f"{'method':<13} {'1 aspect':>22} {'4, one call':>22} {'4, per aspect':>22} {'one call / 1':>13} "
          f"{'per aspect / 1':>15} {'max|diff|':>10}")
    print(f"backend.tree_max_row_tokens = {judge.backend.config.tree_max_row_tokens}")
    for variant in args.methods:
        judge = Judge(JudgeConfig(backend=backend, aspects=ASPECTS, cache={"memory": False}, **VARIANTS[variant]),
                      backend=shared_backend)
        method = judge.config.method
        scorer = judge.method(method)
        judge.score(items[:2], aspects=ASPECTS, method=method)  # warm-up
        columns = lambda: shared_backend.work["body"]  # noqa: E731  token columns the decoder ran over
        start = columns()
        fresh = shared_backend.clear_token_memo  # each run tokenises its texts as if new
        one, _ = timings(lambda: judge.score(items, aspects=["relevance"], method=method), args.repeats, fresh)
        middle = columns()
        together, a = timings(lambda: judge.score(items, aspects=ASPECTS, method=method), args.repeats, fresh)
        work = f"body token columns per run: 1 aspect {(middle - start) // args.repeats}, 4 aspects {(columns() - middle) // args.repeats}"
        aspects = [judge.aspect_set.get(n) for n in ASPECTS]
        separate, b = timings(lambda: [scorer.score(judge.backend, asp, items) for asp in aspects], args.repeats, fresh)
        diff = max(abs(a[i][asp.name].value - b[k][i].value) for k, asp in enumerate(aspects) for i in range(len(items)))
        m1 = statistics.median(one)
        print(f"{variant:<13} {fmt(one):>22} {fmt(together):>22} {fmt(separate):>22} "
              f"{statistics.median(together) / m1:>12.2f}x {statistics.median(separate) / m1:>14.2f}x {diff:>10.2e}")
        print(f"{'':<13} {work}")


if __name__ == "__main__":
    main()
