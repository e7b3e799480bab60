"""Lua scripts kept as ``.lua`` files beside the module that owns the Redis structure they work on."""

from pathlib import Path


def lua_source(module_file: str, name: str) -> str:
    """The source of the script ``name`` in the folder of ``module_file`` (pass ``__file__``)."""
    return (Path(module_file).parent / name).read_text()
