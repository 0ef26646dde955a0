"""Projects, their tasks and who works on them: access, the queue, importing task files,
what a project's desktop supports, which model versions a project runs.
Floor 1: imports only annotation.models below it.
"""
