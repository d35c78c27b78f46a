"""Test doubles kept in the repository, not in the installed package (``pip install`` adds only
``judge_reward``). Import them from the root of a clone (pytest's ``pythonpath = ["."]``, or
``PYTHONPATH=.`` for the benchmarks) as ``tests.doubles.<module>``:

* :mod:`.fake_openai`: a real, fault-injecting OpenAI-compatible HTTP server with deterministic
  answers; ``python -m tests.doubles.fake_openai --port 8000`` runs it in the foreground as a
  stand-in for vLLM;
* :mod:`.servers`: a free loopback port, and waiting until a server process answers;
* :mod:`.faulty_backend`: a real judge backend whose chosen requests come back with an error.
"""
