"""What the desktop shows: frames captured from X and encoded as PNG, waiting for the
screen to settle, watching it change before a decision, comparing two screenshots (the named
tolerances), and screenshots stored once by content.
"""
