"""parafill's front end: the language server, its completion service and the command line."""

__version__ = "0.1.0"
