"""semfs for agents without a mount: the tools, their MCP server, grep and the agent guide.

* :mod:`semfs.fusefs.agent.toolbox`: the six tools (list, read, grep, search, status, write)
  over a store, as a mount would answer them; :mod:`semfs.fusefs.agent.mcp` serves them over
  MCP.
* :mod:`semfs.fusefs.agent.grep`: grep pushed down to the store (the tree and the reader).
* :mod:`semfs.fusefs.agent.guide`: the guide an agent reads before it uses a mount.

Nothing here imports FUSE bindings or the mount's callbacks (``tests/test_structure.py``):
it reads the tree, reader and search folders, which are plain Python.
"""

# Defaults the tools and `semfs mcp`'s options both read (here: the command line imports this
# package's guide at start, and not the tools, whose imports take a while).
DEFAULT_BUDGET = 30_000  # bytes per tool result, as Mintlify's MCP filesystem cuts
# Seconds an HTTP session lives without a request (see semfs.fusefs.agent.mcp).
SESSION_TIMEOUT = 600.0
