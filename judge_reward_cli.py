"""The ``judge-reward`` console command: the engine's commands (:mod:`judge_reward.cli`: score, steps,
meta-eval, serve) and those of the packages built on it (:mod:`trainers`: train, label-pairs;
:mod:`bias_audit`: audit) in one Typer app.

The dependency points one way: this module imports the engine and its consumers, the engine
(``judge_reward``) imports neither. ``python -m judge_reward_cli ...`` is the same command.
"""

from bias_audit.cli import audit_command
from judge_reward.cli import new_app
from trainers.cli import label_pairs_command, train_command

app = new_app()
app.command("train")(train_command)
app.command("label-pairs")(label_pairs_command)
app.command("audit")(audit_command)

if __name__ == "__main__":
    app()
