"""What does the injection guard's ``chatter`` option remove from real texts?

First, from texts that hold no wrapping (no model needed, seconds): every system output, reference
and source (whole, and each sentence alone) of SummEval, the writer and model summaries and the
articles of Zhang et al. 2023, and Topical-Chat's responses, dialogue turns and facts (with that
set's aspect vocabulary). Anything removed there is a false removal, and would change the reward's
agreement with people.

Second, from a real instruct model's answers. The probe family ``chat_wrapper`` and the unit tests
use wordings written by this project. This script asks a real instruct model (SmolLM2-135M-Instruct, the GRPO policy of docs/grpo_hacking.md)
for summaries of SummEval's held-out articles (documents 80-99) under three phrasings of the request,
samples several answers per article, and reports:

* the share of answers with wrapping the option removes, and the removed pieces by count;
* the opening words of the answers it leaves alone, by count, to read for wrapping it misses;
* how many answers it would empty (those are judged whole instead: ``guards.neutralise``).

No judge model is loaded. About 4.5 minutes on 2 CPU cores for 20 articles x 3 requests x 4
samples (``--no-generate``: the false removals only).

    PYTHONPATH=. HF_HUB_OFFLINE=1 python experiments/chatter_coverage.py --out reports/chatter_coverage.json
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _common import data_dir  # noqa: E402
from grpo_hacking import PROMPTS, chatter_pieces, generate_answers, load_articles, policy_directory  # noqa: E402

# Three ways a user asks for a summary: the GRPO runs' requests (grpo_hacking.py --prompt).
REQUESTS = tuple(PROMPTS.values())


def false_removals(data: Path) -> dict[str, dict]:
    """Per set of texts without wrapping: how many texts, and what the option removed from them."""
    from judge_reward.sentences import sentences

    summeval = json.loads((data / "summeval" / "summeval.json").read_text())
    sources = list(dict.fromkeys(r["source"] for r in summeval))
    sets = {
        "summeval system outputs": ("summeval", [r["system_output"] for r in summeval]),
        "summeval sources": ("summeval", sources),
        "summeval source sentences": ("summeval", [x for src in sources for x in sentences(src) if x.strip()]),
    }
    refs = data / "summeval" / "references.json"
    if refs.is_file():
        table = json.loads(refs.read_text())
        sets["summeval references"] = ("summeval", [x for v in table.values() for x in v if isinstance(x, str)])
    zhang = data / "zhang2023"
    if (zhang / "writer_summaries.json").is_file():
        writers = json.loads((zhang / "writer_summaries.json").read_text())
        sets["zhang2023 writer summaries"] = ("summeval", [r["summary"] for r in writers])
        sets["zhang2023 articles"] = ("summeval", list(dict.fromkeys(r["article"] for r in writers)))
    if (zhang / "pairwise_evaluation_results.json").is_file():
        pairs = json.loads((zhang / "pairwise_evaluation_results.json").read_text())
        sets["zhang2023 model summaries"] = ("summeval", list(dict.fromkeys(r["text-davinci-002_summary"] for r in pairs)))
    chat = data / "topical_chat" / "topical_chat.json"
    if chat.is_file():
        records = json.loads(chat.read_text())
        sets["topical_chat responses"] = ("topical_chat", [r["system_output"] for r in records])
        sets["topical_chat dialogue turns"] = ("topical_chat", list(dict.fromkeys(
            t for r in records for t in r["source"].split(" \n ") if t.strip())))
        sets["topical_chat facts"] = ("topical_chat", list(dict.fromkeys(r["context"] for r in records)))
    out = {}
    for name, (aspects, texts) in sets.items():
        removed = [[text[:200], pieces] for text in texts if (pieces := chatter_pieces(text, aspects))]
        out[name] = {"texts": len(texts), "with_removals": len(removed), "removed": removed}
    return out


def opening_words(text: str, n: int = 3) -> str:
    return " ".join(re.findall(r"\S+", text)[:n])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=None,
                   help="data folder holding summeval/summeval.json (default: $JUDGE_REWARD_DATA or ../shared/data)")
    p.add_argument("--articles", type=int, default=20, help="held-out SummEval documents from the 81st on")
    p.add_argument("--samples", type=int, default=4, help="answers sampled per article and request")
    p.add_argument("--max-source-words", type=int, default=200)
    p.add_argument("--max-new-tokens", type=int, default=80)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--no-generate", action="store_true", help="only count false removals in the benchmark data")
    p.add_argument("--out", help="write the figures and every answer as JSON here")
    args = p.parse_args(argv)

    folder = data_dir(args.data / "summeval" / "summeval.json" if args.data else None, "summeval", "summeval.json").parents[1]
    wrong = false_removals(folder)
    print("false removals (texts with something removed / texts), in texts that hold no wrapping:")
    for name, got in wrong.items():
        print(f"  {name}: {got['with_removals']}/{got['texts']}")
        for text, pieces in got["removed"][:5]:
            print(f"      {pieces} from {text[:80]!r}")
    if args.no_generate:
        if args.out:
            Path(args.out).write_text(json.dumps({"false_removals": wrong}, indent=1))
        return 0

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rows = load_articles(folder, args.max_source_words)[80:80 + args.articles]
    model_dir = policy_directory()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()

    start = time.perf_counter()
    answers = []
    from tqdm import tqdm

    for request in tqdm(REQUESTS, desc="requests"):
        sampled = generate_answers(model, tokenizer, [r["source"] for r in rows], args.max_new_tokens, request,
                                   samples=args.samples, temperature=args.temperature)
        answers += [{"request": REQUESTS.index(request), "doc_id": row["doc_id"], "answer": text,
                     "removed": chatter_pieces(text)} for row, texts in zip(rows, sampled) for text in texts]
    seconds = time.perf_counter() - start

    wrapped = [a for a in answers if a["removed"]]
    pieces = collections.Counter(piece for a in wrapped for piece in a["removed"])
    left = collections.Counter(opening_words(a["answer"]) for a in answers if not a["removed"])
    print(f"{len(answers)} answers ({len(rows)} articles x {len(REQUESTS)} requests x {args.samples} samples, "
          f"T={args.temperature}) in {seconds:.0f} s")
    print(f"answers with wrapping removed: {len(wrapped)}/{len(answers)} ({len(wrapped) / len(answers):.1%})")
    for k, req in enumerate(REQUESTS):
        sub = [a for a in answers if a["request"] == k]
        print(f"  request {k + 1} ({req.splitlines()[0][:50]!r}): {sum(bool(a['removed']) for a in sub)}/{len(sub)}")
    print("\nremoved pieces (count, piece):")
    for piece, n in pieces.most_common(20):
        print(f"  {n:3d}  {piece[:90]!r}")
    print("\nopening words of the answers left alone (count, words), to read for wrapping missed:")
    for words, n in left.most_common(25):
        print(f"  {n:3d}  {words!r}")
    if args.out:
        Path(args.out).write_text(json.dumps({
            "false_removals": wrong,
            "answers": len(answers), "wrapped": len(wrapped), "seconds": seconds, "requests": list(REQUESTS),
            "settings": {k: v for k, v in vars(args).items() if k not in ("out", "data")},
            "pieces": pieces.most_common(), "left_openings": left.most_common(), "items": answers,
        }, indent=1))
        print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
