"""``python -m judge_reward ...``: the ``judge-reward`` console command (:mod:`judge_reward.console`)."""

from judge_reward.console import app

app(prog_name="judge-reward")
