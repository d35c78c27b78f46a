"""Prompt builders: every template the judge sends lives in this package, one module per method."""
