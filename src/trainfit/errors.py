"""Errors the CLI turns into one line and exit code 2."""


class TrainfitError(Exception):
    """Base for user-facing errors: the message is one line naming the field and the allowed values."""


class ConfigError(TrainfitError):
    """A model config is missing a field or has an unsupported architecture."""


class CardError(TrainfitError):
    """A run card has an unknown key or a bad value."""


class CatalogError(TrainfitError):
    """A name is not in a catalog; the message suggests near matches."""
