"""Runnable examples of hpsearch (``python -m examples.digits``)."""
