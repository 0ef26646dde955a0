"""Quality control of crowd work (design §13): gold steps and what counts as right."""
