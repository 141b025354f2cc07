"""Errors that carry a message meant for the user, naming the file or option at fault."""


class GpuprofError(Exception):
    """Base class: the message is complete and is shown without a traceback."""


class TraceError(GpuprofError):
    """A trace file could not be read or has no usable content."""


class BaselineError(GpuprofError):
    """A baseline file could not be read or written."""


class ConfigError(GpuprofError):
    """An option, ini key or marker argument is invalid."""
