"""The sandbox of a local desktop: bubblewrap with its own user and namespaces, its cgroup
limits, and the firewalled way out for a desktop allowed the internet.
"""
