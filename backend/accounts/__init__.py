"""Accounts, roles and personal access tokens."""
