"""The ``judge-reward`` console command: the engine's commands (:mod:`judge_reward.cli`: score, steps,
meta-eval, serve, probe, validate) and those of the packages built on it (:mod:`judge_reward.trainers`:
train, label-pairs; :mod:`judge_reward.bias_audit`: audit) in one Typer app.

The dependency points one way: this module imports the engine and its consumers, the engine
(the rest of ``judge_reward``) imports neither. ``python -m judge_reward ...`` is the same command.
"""

from judge_reward.bias_audit.cli import audit_command
from judge_reward.cli import new_app
from judge_reward.trainers.cli import label_pairs_command, train_command

app = new_app()
app.command("train")(train_command)
app.command("label-pairs")(label_pairs_command)
app.command("audit")(audit_command)

if __name__ == "__main__":
    app()
