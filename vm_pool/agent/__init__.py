"""The in-desktop agent (``server.py``) and what it needs of its own (``files.py``,
``windows.py``): with the action space (``vm_pool.actions``) and ``vm_pool.devtools``, exactly
the code copied into every desktop. Run as ``python3 -s -P -m vm_pool.agent``.
"""
