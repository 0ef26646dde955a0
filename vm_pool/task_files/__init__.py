"""The files tasks need: the cache of downloads by URL, the URLs a task may name, archives of
task files uploaded at once (read in memory, bounded, or by a job), and their API.
"""
