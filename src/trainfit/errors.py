"""Errors the CLI turns into one line and exit code 2."""


class TrainfitError(Exception):
    """Base for user-facing errors: the message is one line naming the field and the allowed values."""


class ConfigError(TrainfitError):
    """A model config is missing a field or has an unsupported architecture."""


class CardError(TrainfitError):
    """A run card has an unknown key or a bad value."""


class CatalogError(TrainfitError):
    """A name is not in a catalog; the message suggests near matches."""


class OutputError(TrainfitError):
    """An output path cannot be written: a directory, a missing folder, a full disk, or one of the inputs."""


class InputError(TrainfitError):
    """An input file cannot be read: missing, too large, not a mapping, or a YAML alias bomb."""
