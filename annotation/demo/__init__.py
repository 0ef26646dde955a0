"""The demo's projects: plain tasks on the local desktop and OSWorld's published tasks with
the files they need (used by seed_demo only).
A face: imports any floor.
"""
