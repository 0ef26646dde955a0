"""A task's setup run on a desktop: the runner (the package's face: which step types run,
parsing and running them), the steps' toolkit, and the steps that act on windows and the browser.
"""
