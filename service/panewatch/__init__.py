"""Panewatch: runs AI coding agents in pseudo-terminals and tells whether each one is waiting for you."""

__version__ = "0.1.0"
