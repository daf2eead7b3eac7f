"""focusflow: specialize a multilingual language model to one language with a new tokenizer and FOCUS."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("focusflow")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+unknown"
