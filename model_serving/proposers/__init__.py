"""Proposers: policies that turn an observation and the history into the next step."""
