"""One episode: the live loop (observe, propose, decide, execute), its leases and pauses,
reviews, and the task's score once it ends.
Floor 2: imports projects/ and models/ below it; its bottom is ownership.py and events.py.
"""
