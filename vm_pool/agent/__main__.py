"""``python3 -s -P -m vm_pool.agent``: the agent's server (see ``server.py``)."""

from vm_pool.agent.server import main

main()
