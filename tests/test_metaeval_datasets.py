"""Loaders: the shared benchmark files, generic JSONL/CSV, and errors that name record and field."""

import json

import pytest

from judge_reward.methods.base import Item
from judge_reward.metaeval import DatasetError, TableFormat, load_csv, load_dataset, load_jsonl, load_summeval
from judge_reward.metaeval.datasets import load_topical_chat


def test_summeval_with_references(shared_data):
    raw = json.loads((shared_data / "summeval" / "summeval.json").read_text())
    ds = load_summeval(shared_data / "summeval" / "summeval.json", shared_data / "summeval" / "references.json")
    assert len(ds) == 1600 and len(set(ds.groups)) == 100 and len(set(ds.systems)) == 16
    assert ds.aspects == ("coherence", "consistency", "fluency", "relevance")  # not the derived "overall"
    first = ds.records[0]
    assert isinstance(first.item, Item)
    assert first.item.output == raw[0]["system_output"] and first.item.source == raw[0]["source"]
    assert first.item.reference == raw[0]["reference"]
    assert first.item.id == f"{raw[0]['doc_id']}/{raw[0]['system_id']}"
    assert first.group == raw[0]["doc_id"] and first.system == raw[0]["system_id"]
    assert first.human == {a: raw[0]["scores"][a] for a in ds.aspects}
    assert all(len(r) == 11 for r in ds.references)
    assert ds.human("relevance")[5] == raw[5]["scores"]["relevance"]


def test_summeval_limit_keeps_whole_documents_in_order(sample_data):
    ds = load_summeval(sample_data / "summeval" / "summeval.json").first_groups(3)
    assert len(ds) == 48
    assert list(dict.fromkeys(ds.groups)) == list(dict.fromkeys(load_summeval(sample_data / "summeval" / "summeval.json").groups))[:3]
    with pytest.raises(ValueError, match="limit=0"):
        ds.first_groups(0)


def test_topical_chat(shared_data):
    raw = json.loads((shared_data / "topical_chat" / "topical_chat.json").read_text())
    ds = load_topical_chat(shared_data / "topical_chat" / "topical_chat.json")
    assert len(ds) == 360 and len(set(ds.groups)) == 60
    assert "groundedness" in ds.aspects and "overall" in ds.aspects
    r = ds.records[7]
    assert r.item.source == raw[7]["source"] and r.item.reference == raw[7]["context"]
    assert r.item.output == raw[7]["system_output"] and r.system == raw[7]["system_id"]
    # the group is the dialogue history: same history, same group
    same = [i for i, x in enumerate(raw) if x["source"] == raw[7]["source"]]
    assert {ds.groups[i] for i in same} == {r.group} and len(same) == 6


def test_topical_chat_references_are_the_human_responses_never_a_record_itself(sample_data):
    ds = load_topical_chat(sample_data / "topical_chat" / "topical_chat.json")
    assert len(ds) == 12 and len(set(ds.groups)) == 2
    for group in dict.fromkeys(ds.groups):
        recs = {r.system: r for r in ds.records if r.group == group}
        truth, fresh = recs["Original Ground Truth"].item.output, recs["New Human Generated"].item.output
        assert recs["Original Ground Truth"].references == (fresh,)
        assert recs["New Human Generated"].references == (truth,)
        assert recs["Argmax Decoding"].references == (truth, fresh)
        # the group's references: every human response, the conversation's own next turn first
        assert ds.group_references()[group] == (truth, fresh)


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def _summeval_record(**overrides):
    rec = {"doc_id": "d1", "system_id": "M1", "source": "Doc .", "reference": "Ref .", "system_output": "Sum .",
           "scores": {"coherence": 3.0, "consistency": 5, "fluency": 4.333, "relevance": 2}}  # fmt: skip
    rec.update(overrides)
    return rec


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"system_output": 5}, r"record 1: field 'system_output' should be text, got 5"),
        ({"doc_id": None}, r"record 1: field 'doc_id' is missing"),
        ({"scores": {"coherence": 1, "consistency": 1, "fluency": 1}}, r"record 1: field 'scores.relevance' is missing"),
        ({"scores": {"coherence": "good", "consistency": 1, "fluency": 1, "relevance": 1}},
         r"record 1: field 'scores.coherence' should be a number, got 'good'"),
        ({"scores": {"coherence": True, "consistency": 1, "fluency": 1, "relevance": 1}},
         r"record 1: field 'scores.coherence' should be a number, got True"),
        ({"scores": [1, 2]}, r"record 1: field 'scores' should be a mapping"),
    ],
)
def test_summeval_errors_name_record_and_field(tmp_path, bad, message):
    path = _write(tmp_path, "s.json", json.dumps([_summeval_record(), _summeval_record(**bad)]))
    with pytest.raises(DatasetError, match=message):
        load_summeval(path)


def test_summeval_missing_reference_entry(tmp_path):
    path = _write(tmp_path, "s.json", json.dumps([_summeval_record(), _summeval_record(doc_id="d2")]))
    refs = _write(tmp_path, "r.json", json.dumps({"d1": ["a .", "b ."]}))
    with pytest.raises(DatasetError, match=r"record 1: doc_id 'd2' has no entry in references file"):
        load_summeval(path, refs)
    bad_refs = _write(tmp_path, "r2.json", json.dumps({"d1": "just one string"}))
    with pytest.raises(DatasetError, match=r"doc_id 'd1': expected a non-empty list"):
        load_summeval(path, bad_refs)


def test_not_a_list_and_not_json(tmp_path):
    with pytest.raises(DatasetError, match="expected a JSON list"):
        load_summeval(_write(tmp_path, "a.json", "{}"))
    with pytest.raises(DatasetError, match="not valid JSON"):
        load_topical_chat(_write(tmp_path, "b.json", "[{"))
    with pytest.raises(DatasetError, match="no such file"):
        load_summeval(tmp_path / "missing.json")


def test_jsonl_with_scores_mapping(tmp_path):
    lines = [
        {"output": "a", "source": "s1", "group": "g1", "system": "x", "scores": {"quality": 1, "style": 2}},
        {"output": "b", "source": "s1", "group": "g1", "system": "y", "scores": {"quality": 3, "style": 1}, "id": "b"},
    ]
    path = _write(tmp_path, "d.jsonl", "\n".join(json.dumps(x) for x in lines) + "\n\n")
    ds = load_jsonl(path)
    assert ds.aspects == ("quality", "style") and ds.human("quality") == [1.0, 3.0]
    assert ds.items[0] == Item(output="a", source="s1", reference=None, id="0")
    assert ds.items[1].id == "b" and ds.groups == ["g1", "g1"] and ds.systems == ["x", "y"]
    with pytest.raises(KeyError, match="aspect 'fluency' is not rated"):
        ds.human("fluency")


def test_jsonl_explicit_fields_and_errors(tmp_path):
    lines = [{"response": "a", "ctx": "c1", "human": 2.5}, {"response": "b", "ctx": "c1", "human": "n/a"}]
    path = _write(tmp_path, "d.jsonl", "\n".join(json.dumps(x) for x in lines))
    fmt = TableFormat(output="response", group="ctx", human=("human",))
    with pytest.raises(DatasetError, match=r"record 1 \(line 2\): field 'human' should be a number, got 'n/a'"):
        load_jsonl(path, fmt)
    with pytest.raises(DatasetError, match=r"record 0 \(line 1\): field 'output' is missing"):
        load_jsonl(path, TableFormat(human=("human",)))
    with pytest.raises(DatasetError, match=r"record 0: field 'scores' is missing"):
        load_jsonl(path, TableFormat(output="response"))
    with pytest.raises(DatasetError, match=r"record 0 \(line 1\): not valid JSON"):
        load_jsonl(_write(tmp_path, "e.jsonl", "{oops\n"))


def test_csv_human_columns(tmp_path):
    path = _write(
        tmp_path, "d.csv",
        "id,output,source,group,system,human_coherence,human_fluency\n"
        "i1,first text,src,doc1,A,1,2\n"
        'i2,"second, with comma",src,doc1,B,3,\n',
    )  # fmt: skip
    with pytest.raises(DatasetError, match=r"record 1 \(line 3\): field 'human_fluency' is missing"):
        load_csv(path)
    ds = load_csv(path, TableFormat(human=("human_coherence",)))
    assert ds.aspects == ("human_coherence",) and ds.human("human_coherence") == [1.0, 3.0]
    path.write_text(path.read_text().replace("B,3,\n", "B,3,4\n"))
    ds = load_dataset("csv", path)
    assert ds.aspects == ("coherence", "fluency") and ds.human("fluency") == [2.0, 4.0]
    assert ds.items[1].output == "second, with comma" and ds.items[1].id == "i2"
    with pytest.raises(DatasetError, match="human score column 'score' is not in the header"):
        load_csv(path, TableFormat(human=("score",)))


def test_csv_without_groups_makes_each_item_its_own_group(tmp_path):
    path = _write(tmp_path, "d.csv", "output,human_q\na,1\nb,2\n")
    ds = load_csv(path)
    assert ds.groups == ["item0", "item1"] and ds.systems == ["system", "system"]
    assert ds.items[0].source == "" and ds.items[0].id == "0"


def test_load_dataset_dispatch_errors(tmp_path):
    with pytest.raises(DatasetError, match="dataset='xml'"):
        load_dataset("xml", tmp_path / "x")
    with pytest.raises(DatasetError, match="--references is only read for summeval"):
        load_dataset("jsonl", tmp_path / "x", references=tmp_path / "r")
