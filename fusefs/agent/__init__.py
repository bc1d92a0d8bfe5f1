"""semfs for agents without a mount: the tools, their MCP server, grep and the agent guide.

* :mod:`semfs.fusefs.agent.toolbox`: the five tools (list, read, grep, search, status) over a
  store, as a mount would answer them; :mod:`semfs.fusefs.agent.mcp` serves them over MCP.
* :mod:`semfs.fusefs.agent.grep`: grep pushed down to the store (the tree and the reader).
* :mod:`semfs.fusefs.agent.guide`: the guide an agent reads before it uses a mount.

Nothing here imports FUSE bindings or the mount's callbacks (``tests/test_structure.py``):
it reads the tree, reader and search folders, which are plain Python.
"""
