"""The offline W&B run reader every W&B test (and ``judge-reward train``) relies on, on a real offline run."""

import pytest

from wandb_offline import (_parse, _run_file, find_offline_runs, read_history, read_offline_run,
                                        wait_for_offline_run)


def test_reads_history_and_summary_and_stops_at_a_record_still_being_written(offline_wandb, tmp_path):
    import wandb

    run = wandb.init(project="judge-reward-tests")
    for step in range(3):
        run.log({"loss": 1.0 / (step + 1), "nested/value": step})
    run.summary.update({"final": "done", "big": "x" * 40_000})  # a record spanning two 32 KiB blocks
    run.finish()
    [run_dir] = find_offline_runs(offline_wandb)
    logged = wait_for_offline_run(run_dir)  # until the exit record, written after everything else
    assert logged["finished"] and logged["summary"]["final"] == "done"
    assert [row["loss"] for row in logged["history"]] == pytest.approx([1.0, 0.5, 1 / 3])
    assert [row["nested/value"] for row in logged["history"]] == [0, 1, 2]
    assert logged["summary"]["big"] == "x" * 40_000 and logged["summary"]["loss"] == pytest.approx(1 / 3)
    assert [row["loss"] for row in read_history(run_dir)] == pytest.approx([1.0, 0.5, 1 / 3])

    # Cut inside the long summary record (as a reader may find the file while wandb-core writes it):
    # what came before is read, the half record is left for the next read, nothing raises.
    data = _run_file(run_dir).read_bytes()
    cut = data.index(b"x" * 1000) + 20_000
    partial = _parse(data[:cut])
    assert len(partial["history"]) == 3 and "big" not in partial["summary"] and not partial["finished"]


def test_a_folder_without_a_run_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="no run-\\*.wandb file"):
        read_offline_run(tmp_path)
