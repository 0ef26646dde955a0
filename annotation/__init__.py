"""Where people and data meet: projects, task queues, episodes, steps, reviews, dataset exports."""
