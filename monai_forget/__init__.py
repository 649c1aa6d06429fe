"""monai-forget: audit what a trained clinical imaging model remembers."""

__version__ = "0.1.0"
